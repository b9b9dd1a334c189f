/**
 * The scripted model's rate limits, kept per API key as the real API keeps them: token
 * buckets of requests, input tokens and output tokens that refill continuously, and an
 * optional ramp (acceleration) limit on how fast the request rate may grow.
 */

import type { Refusal } from './requests.js';

/** Limits per minute (0 is unlimited) and the shape of the buckets; see ScriptedModelOptions. */
export interface RateLimitSettings {
  rpm: number;
  itpm: number;
  otpm: number;
  /** Seconds of the per-minute limit a full bucket holds (60 is the real API's). */
  bucketSeconds: number;
  /** Ramp factor F ≥ 1, or 0 for no ramp limit. */
  acceleration: number;
}

/** Response headers: `anthropic-ratelimit-*`, plus `retry-after(-ms)` on a refusal. */
export type RateLimitHeaders = Record<string, string>;

/** The SDK's `errorCode` for a refusal by the ramp limit (`RampLimitExceededError`). */
export const RAMP_LIMIT_EXCEEDED = 'ramp_limit_exceeded';

/** What `admit` decided. A refusal takes nothing from any bucket. */
export type Admission =
  | { ok: true; headers: RateLimitHeaders }
  | {
      ok: false;
      headers: RateLimitHeaders;
      /** When the binding limit will let this request through, in ms. */
      waitMs: number;
      /** Names the limit that ran out, like the real API's message. */
      message: string;
      errorCode?: typeof RAMP_LIMIT_EXCEEDED;
    };

/** The 429 for a refused admission: the limit that ran out, `retry-after`, and the error code. */
export function rateLimitRefusal(admission: Extract<Admission, { ok: false }>): Refusal {
  return {
    status: 429,
    type: 'rate_limit_error',
    message: admission.message,
    headers: admission.headers,
    ...(admission.errorCode === undefined ? {} : { details: { error_code: admission.errorCode } }),
  };
}

/** True when any limit is set: without one, the server keeps no accounting at all. */
export function hasRateLimits(settings: RateLimitSettings): boolean {
  return settings.rpm > 0 || settings.itpm > 0 || settings.otpm > 0 || settings.acceleration > 0;
}

/** The time constant of the ramp limit's average of the admitted request rate. */
const RAMP_TIME_CONSTANT_MS = 60_000;
/** Keys kept before idle ones are dropped (a fresh bucket is the same as a full one). */
const KEYS_BEFORE_SWEEP = 4096;
/**
 * Slack in comparing a level with what is needed: refills are sums of floating-point
 * products, and a client that waits exactly `retry-after-ms` must not be refused for 1e-13
 * of a token.
 */
const SLACK = 1e-9;

const thousands = new Intl.NumberFormat('en-US');

/** Header names of one limit, built once rather than per response. */
interface HeaderNames {
  limit: string;
  remaining: string;
  reset: string;
}

function headerNames(name: string): HeaderNames {
  const prefix = `anthropic-ratelimit-${name}`;
  return { limit: `${prefix}-limit`, remaining: `${prefix}-remaining`, reset: `${prefix}-reset` };
}

const REQUESTS = headerNames('requests');
const INPUT_TOKENS = headerNames('input-tokens');
const OUTPUT_TOKENS = headerNames('output-tokens');
const TOKENS = headerNames('tokens');

/** A bucket that refills continuously at `limit` per minute up to `capacity`; it may hold debt. */
class Bucket {
  readonly limit: number;
  readonly limitText: string;
  readonly capacity: number;
  readonly perMs: number;
  level: number;

  constructor(limit: number, capacity: number) {
    this.limit = limit;
    this.limitText = String(limit);
    this.capacity = capacity;
    this.perMs = limit / 60_000;
    this.level = capacity;
  }

  refill(elapsedMs: number): void {
    if (this.level < this.capacity) {
      this.level = Math.min(this.capacity, this.level + elapsedMs * this.perMs);
    }
  }

  /**
   * Ms until the bucket can pay `amount`: when it holds that much, or, for an amount over
   * its capacity, when it is full (the request then leaves it in debt). 0 means now.
   */
  waitFor(amount: number): number {
    const needed = Math.min(amount, this.capacity);
    return this.level + SLACK >= needed ? 0 : (needed - this.level) / this.perMs;
  }

  /** Ms until full again. */
  untilFull(): number {
    return (this.capacity - this.level) / this.perMs;
  }
}

/**
 * The ramp limit. `average` estimates the admitted request rate (per s) with an exponential
 * decay of time constant τ = 60 s: each admission adds 1/τ, so a steady stream of r/s
 * converges to r. The allowed rate is F × max(average, 1/s), enforced by a bucket that
 * holds one second of it. A client that keeps up with the allowed rate raises its average
 * at (F − 1) × average / τ, so the allowed rate grows like e^((F−1)t/τ): a gradual ramp
 * passes and a sudden jump is refused until the average catches up.
 */
class Ramp {
  readonly #factor: number;
  average = 0;
  level: number;

  constructor(factor: number) {
    this.#factor = factor;
    this.level = factor;
  }

  /** Allowed requests per second right now. */
  allowedPerSecond(): number {
    return this.#factor * Math.max(this.average, 1);
  }

  refill(elapsedMs: number): void {
    if (elapsedMs <= 0) return;
    this.average *= Math.exp(-elapsedMs / RAMP_TIME_CONSTANT_MS);
    const allowed = this.allowedPerSecond();
    this.level = Math.min(allowed, this.level + (elapsedMs * allowed) / 1000);
  }

  /**
   * Ms until one request fits. The average decays while the client waits, and `refill`
   * grants a whole interval at the rate its end allows, so the wait is solved for that
   * rate: a few rounds of w = missing / allowed(w), which only grows, then rounded up.
   */
  waitMs(): number {
    if (this.level + SLACK >= 1) return 0;
    const missing = 1 - this.level;
    let wait = 0;
    for (let round = 0; round < 4; round++) {
      const average = this.average * Math.exp(-wait / RAMP_TIME_CONSTANT_MS);
      wait = (missing * 1000) / (this.#factor * Math.max(average, 1));
    }
    return Math.ceil(wait);
  }

  admit(): void {
    this.level -= 1;
    this.average += 1000 / RAMP_TIME_CONSTANT_MS;
  }
}

/** The buckets of one API key; a limit that is not set has no bucket. */
interface KeyState {
  updatedAt: number;
  requests: Bucket | undefined;
  input: Bucket | undefined;
  output: Bucket | undefined;
  ramp: Ramp | undefined;
}

/** Which limit refused a request, for the message. */
type Binding = 'requests' | 'input' | 'output' | 'ramp';

/**
 * Rate limits per API key. The server calls `admit` before answering a request,
 * `chargeOutput` as output tokens are generated, and `headers` for any other response.
 * `now` is the server's monotonic clock in ms; `reset` headers read the wall clock once
 * per call. The key is only a map key: it never appears in a message or a header.
 */
export class RateLimits {
  readonly #settings: RateLimitSettings;
  readonly #keys = new Map<string, KeyState>();
  #sweepAt = KEYS_BEFORE_SWEEP;
  // A few formatted reset times by whole second: most responses repeat the same ones.
  readonly #resetSeconds: number[] = [0, 0, 0, 0];
  readonly #resetTexts: string[] = ['', '', '', ''];

  readonly #wallClock: () => number;

  /** `wallClock` (ms since the epoch, default `Date.now`) dates the `reset` headers. */
  constructor(settings: RateLimitSettings, wallClock: () => number = Date.now) {
    this.#settings = settings;
    this.#wallClock = wallClock;
  }

  /**
   * Admits a request that costs `inputTokens`, taking one request and its input tokens, or
   * refuses it, taking nothing. It needs a request token, `inputTokens` (or, for a request
   * larger than the bucket, a full bucket, which it leaves in debt: a large request is
   * never refused forever), an output bucket that is not empty or in debt, and a ramp token.
   */
  admit(key: string, inputTokens: number, now: number): Admission {
    const state = this.#state(key, now);
    // The binding limit is the one that lets the request through last: all refill at once.
    const requestsWait = state.requests?.waitFor(1) ?? 0;
    const inputWait = state.input?.waitFor(inputTokens) ?? 0;
    const outputWait = state.output?.waitFor(1) ?? 0;
    const rampWait = state.ramp?.waitMs() ?? 0;
    const waitMs = Math.max(requestsWait, inputWait, outputWait, rampWait);
    if (waitMs > 0) {
      const binding: Binding =
        waitMs === requestsWait
          ? 'requests'
          : waitMs === inputWait
            ? 'input'
            : waitMs === outputWait
              ? 'output'
              : 'ramp';
      return this.#refusal(state, binding, Math.ceil(waitMs));
    }
    if (state.requests !== undefined) state.requests.level -= 1;
    if (state.input !== undefined) state.input.level -= inputTokens;
    state.ramp?.admit();
    return { ok: true, headers: this.#snapshot(state) };
  }

  /** Counts output tokens as they are generated; the bucket may go into debt. */
  chargeOutput(key: string, tokens: number, now: number): void {
    const state = this.#state(key, now);
    if (state.output !== undefined) state.output.level -= tokens;
  }

  /** The `anthropic-ratelimit-*` headers of `key` now. */
  headers(key: string, now: number): RateLimitHeaders {
    return this.#snapshot(this.#state(key, now));
  }

  #state(key: string, now: number): KeyState {
    let state = this.#keys.get(key);
    if (state === undefined) {
      if (this.#keys.size >= this.#sweepAt) this.#sweep(now);
      state = this.#fresh(now);
      this.#keys.set(key, state);
      return state;
    }
    const elapsed = now - state.updatedAt;
    if (elapsed > 0) {
      state.updatedAt = now;
      state.requests?.refill(elapsed);
      state.input?.refill(elapsed);
      state.output?.refill(elapsed);
      state.ramp?.refill(elapsed);
    }
    return state;
  }

  #fresh(now: number): KeyState {
    const { rpm, itpm, otpm, bucketSeconds, acceleration } = this.#settings;
    const share = bucketSeconds / 60;
    return {
      updatedAt: now,
      // At least one request, or no request could ever pass.
      requests: rpm > 0 ? new Bucket(rpm, Math.max(1, rpm * share)) : undefined,
      input: itpm > 0 ? new Bucket(itpm, itpm * share) : undefined,
      output: otpm > 0 ? new Bucket(otpm, otpm * share) : undefined,
      ramp: acceleration > 0 ? new Ramp(acceleration) : undefined,
    };
  }

  /**
   * Drops keys whose buckets are full again and whose ramp average has faded: they behave
   * as a new key would. Many short-lived keys then cannot grow the map without bound.
   */
  #sweep(now: number): void {
    for (const [key, state] of this.#keys) {
      const elapsed = now - state.updatedAt;
      const idle = (bucket: Bucket | undefined): boolean =>
        bucket === undefined || bucket.level + elapsed * bucket.perMs >= bucket.capacity;
      const rampIdle =
        state.ramp === undefined ||
        state.ramp.average * Math.exp(-elapsed / RAMP_TIME_CONSTANT_MS) < 0.01;
      if (idle(state.requests) && idle(state.input) && idle(state.output) && rampIdle) {
        this.#keys.delete(key);
      }
    }
    this.#sweepAt = Math.max(KEYS_BEFORE_SWEEP, this.#keys.size * 2);
  }

  #refusal(state: KeyState, binding: Binding, waitMs: number): Admission {
    const headers = this.#snapshot(state);
    headers['retry-after'] = String(Math.max(1, Math.ceil(waitMs / 1000)));
    headers['retry-after-ms'] = String(waitMs);
    const retry = `retry in ${(Math.ceil(waitMs / 100) / 10).toFixed(1)} s`;
    if (binding === 'ramp') {
      const allowed = state.ramp?.allowedPerSecond() ?? 0;
      const message =
        `This request would exceed the acceleration limit for this API key: the request rate ` +
        `may grow to at most ${allowed.toFixed(1)} requests per second for now, rising as ` +
        `usage ramps up gradually; ${retry}`;
      return { ok: false, headers, waitMs, message, errorCode: RAMP_LIMIT_EXCEEDED };
    }
    const bucket = state[binding] as Bucket;
    const unit =
      binding === 'requests'
        ? bucket.limit === 1
          ? 'request'
          : 'requests'
        : `${binding} ${bucket.limit === 1 ? 'token' : 'tokens'}`;
    const message = `This request would exceed the rate limit of ${thousands.format(bucket.limit)} ${unit} per minute for this API key; ${retry}`;
    return { ok: false, headers, waitMs, message };
  }

  #snapshot(state: KeyState): RateLimitHeaders {
    const headers: RateLimitHeaders = {};
    const { requests, input, output } = state;
    if (requests === undefined && input === undefined && output === undefined) return headers;
    // Buckets are refilled to `now`, so `now` on the wall clock is simply the wall clock's now.
    const wallNow = this.#wallClock();
    if (requests !== undefined) {
      headers[REQUESTS.limit] = requests.limitText;
      headers[REQUESTS.remaining] = String(Math.max(0, Math.floor(requests.level)));
      headers[REQUESTS.reset] = this.#reset(requests, wallNow);
    }
    if (input !== undefined) this.#tokenHeaders(headers, INPUT_TOKENS, input, wallNow);
    if (output !== undefined) this.#tokenHeaders(headers, OUTPUT_TOKENS, output, wallNow);
    // `tokens-*` is whichever token limit is nearer to refusing: the one with less left.
    const tighter =
      input === undefined || (output !== undefined && output.level < input.level) ? output : input;
    if (tighter !== undefined) this.#tokenHeaders(headers, TOKENS, tighter, wallNow);
    return headers;
  }

  #tokenHeaders(
    headers: RateLimitHeaders,
    names: HeaderNames,
    bucket: Bucket,
    wallNow: number,
  ): void {
    const floored = Math.max(0, Math.floor(bucket.level));
    // The real API rounds token counts to the nearest thousand; never show more than a full bucket holds.
    const rounded = Math.min(Math.floor(bucket.capacity), Math.round(floored / 1000) * 1000);
    headers[names.limit] = bucket.limitText;
    headers[names.remaining] = String(rounded);
    headers[names.reset] = this.#reset(bucket, wallNow);
  }

  /** RFC 3339 UTC, whole seconds rounded up, of when `bucket` is full again. */
  #reset(bucket: Bucket, wallNow: number): string {
    const seconds = Math.ceil((wallNow + bucket.untilFull()) / 1000);
    const slot = seconds & 3;
    if (this.#resetSeconds[slot] !== seconds || this.#resetTexts[slot] === '') {
      this.#resetSeconds[slot] = seconds;
      this.#resetTexts[slot] = `${new Date(seconds * 1000).toISOString().slice(0, 19)}Z`;
    }
    return this.#resetTexts[slot] as string;
  }
}
