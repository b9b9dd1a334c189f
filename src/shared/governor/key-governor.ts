import { capacityFrom, LocalBucket } from './bucket.js';
import { type ConcurrencyControl, makeWindow, type Window } from './concurrency.js';
import { type LimitReport, readRateLimits, retryAfterMsOf } from './headers.js';
import type {
  Admission,
  AdmitRequest,
  GovernorLimits,
  GovernorState,
  LimitState,
  SettleReport,
} from './types.js';

/** Settings every key of one governor shares. */
export interface KeySettings extends GovernorLimits {
  /** The longest pause a `retry-after` may impose (the requests' patience). */
  patienceMs: number;
  initialConcurrency: number;
  maxConcurrency: number;
  concurrencyControl: ConcurrencyControl;
}

/** How long a key stays shut after the provider said retrying is pointless, before it probes. */
export const EXHAUSTED_HOLD_MS = 60_000;
/** The pause after a 429 or 529 that named no `retry-after`: doubles per answer in a row. */
const FIRST_PAUSE_MS = 500;
const MAX_PAUSE_MS = 30_000;
/** The longest timer Node honours, in ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Output tokens reserved for a request before any response said how much they cost. */
const FIRST_OUTPUT_GUESS = 512;
/** Weight of the newest sample in the running averages of output and of the input ratio. */
const SMOOTHING = 0.1;
/** How far above the provider's `remaining` our level may be before it is brought down. */
const REQUEST_TOLERANCE = 1;
/** Token counts in headers are rounded to the nearest thousand. */
const TOKEN_TOLERANCE = 1000;

interface Waiter {
  request: AdmitRequest;
  resolve(admission: Admission): void;
  signal: AbortSignal;
  onAbort(): void;
}

type BucketName = 'requests' | 'input' | 'output';

/** What an admitted attempt holds until it settles. */
interface Held {
  sequence: number;
  sentAt: number;
  /** Raw client estimate, and the input tokens charged for it. */
  rawInput: number;
  input: number;
  output: number;
  /** The window was full when it went: a success may grow it. */
  wasFull: boolean;
  /** Per bucket: our level right after admission, and the corrections then (see LocalBucket.sync). */
  marks: Partial<Record<BucketName, { levelAfter: number; correctionsAt: number }>>;
  /** Key-wide totals right after admission, to seat a bucket first learned from this response. */
  totals: Totals;
}

interface Totals {
  requests: number;
  input: number;
  output: number;
}

/**
 * One key's admission: a FIFO queue (retries and later steps of running agents first), the
 * buckets, the adaptive window, the shared pause and the shut state after a spend limit. All
 * state is here and only `pump` admits.
 */
export class KeyGovernor {
  readonly key: string;
  readonly label: string;
  readonly #priority = new Set<Waiter>();
  readonly #normal = new Set<Waiter>();
  readonly #held = new Map<number, Held>();
  readonly #buckets: Partial<Record<BucketName, LocalBucket>> = {};
  readonly #window: Window;
  readonly #onChange: () => void;
  readonly #allocate: () => number;
  readonly #patienceMs: number;
  readonly #totals: Totals = { requests: 0, input: 0, output: 0 };
  #timer: NodeJS.Timeout | undefined;
  #sequence = 0;
  #pausedUntil = 0;
  #pauseStreak = 0;
  /** Attempt sequence number when the streak last grew. */
  #streakAfter = -1;
  #exhausted: { message: string; until: number } | undefined;
  /** After a shut key reopens, one request at a time until one succeeds. */
  #probing = false;
  #inputRatio = 1;
  #outputAverage = FIRST_OUTPUT_GUESS;
  #admitted = 0;
  #rateLimited = 0;
  #overloaded = 0;

  constructor(
    key: string,
    label: string,
    settings: KeySettings,
    hooks: { onChange: () => void; allocate: () => number },
  ) {
    this.key = key;
    this.#allocate = hooks.allocate;
    this.#patienceMs = settings.patienceMs;
    this.label = label;
    this.#onChange = hooks.onChange;
    this.#window = makeWindow(
      settings.concurrencyControl,
      settings.initialConcurrency,
      settings.maxConcurrency,
    );
    const now = Date.now();
    // A configured limit paces from the first request, with a second's worth of burst: the real
    // capacity is learned from the first response.
    const configured = (limit: number | undefined) =>
      limit === undefined
        ? undefined
        : new LocalBucket(
            limit,
            Math.max(1, limit / 60),
            Math.max(1, limit / 60),
            now,
            'configured',
          );
    const requests = configured(settings.rpm);
    const input = configured(settings.itpm);
    const output = configured(settings.otpm);
    if (requests) this.#buckets.requests = requests;
    if (input) this.#buckets.input = input;
    if (output) this.#buckets.output = output;
  }

  admit(request: AdmitRequest, signal: AbortSignal, resolve: (a: Admission) => void): void {
    if (signal.aborted) {
      resolve({ ok: false, reason: 'aborted' });
      return;
    }
    const queue = request.priority ? this.#priority : this.#normal;
    const waiter: Waiter = {
      request,
      signal,
      resolve,
      onAbort: () => {
        // A cancelled request leaves the queue at once; it held nothing yet.
        if (queue.delete(waiter)) {
          resolve({ ok: false, reason: 'aborted' });
          // A wake-up armed for nobody would keep the process alive until it fired.
          if (this.#head() === undefined) this.#disarm();
          this.#onChange();
        }
      },
    };
    signal.addEventListener('abort', waiter.onAbort, { once: true });
    queue.add(waiter);
    this.pump();
  }

  /** Admits from the head of the queue while the window, the pause and the buckets allow. */
  pump(): void {
    this.#disarm();
    const now = Date.now();
    if (this.#exhausted !== undefined) {
      if (now < this.#exhausted.until) {
        this.#refuseAll(this.#exhausted.message);
        return;
      }
      // Long enough: one request probes whether the limit was raised, the rest wait for it.
      this.#exhausted = undefined;
      this.#probing = true;
    }
    for (let head = this.#head(); head !== undefined; head = this.#head()) {
      // Paused, the window full (a settle pumps again), or a bucket short (a timer does).
      if (now < this.#pausedUntil) {
        this.#wake(this.#pausedUntil - now);
        return;
      }
      if (this.#held.size >= (this.#probing ? 1 : this.#window.limit)) return;
      const wait = this.#bucketWait(head.request, now);
      if (wait > 0) {
        this.#wake(wait);
        return;
      }
      this.#let(head, now);
    }
  }

  #head(): Waiter | undefined {
    const first = this.#priority.values().next();
    if (!first.done) return first.value;
    const next = this.#normal.values().next();
    return next.done ? undefined : next.value;
  }

  #disarm(): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #wake(ms: number): void {
    // Armed only while someone waits, so it keeps the process alive exactly as long as needed.
    // Node fires a longer timer at once, and then every millisecond: never ask for one.
    this.#timer = setTimeout(() => this.pump(), Math.min(MAX_TIMER_MS, Math.max(1, ms)));
  }

  #costs(request: AdmitRequest): { input: number; output: number } {
    return {
      input: Math.max(1, Math.ceil(request.inputTokens * this.#inputRatio)),
      output: Math.max(1, Math.min(request.maxTokens, Math.ceil(this.#outputAverage))),
    };
  }

  #bucketWait(request: AdmitRequest, now: number): number {
    const { requests, input, output } = this.#buckets;
    const costs = this.#costs(request);
    requests?.refill(now);
    input?.refill(now);
    output?.refill(now);
    return Math.max(
      requests?.waitFor(1) ?? 0,
      input?.waitFor(costs.input) ?? 0,
      output?.waitFor(costs.output) ?? 0,
    );
  }

  #let(waiter: Waiter, now: number): void {
    (waiter.request.priority ? this.#priority : this.#normal).delete(waiter);
    waiter.signal.removeEventListener('abort', waiter.onAbort);
    const costs = this.#costs(waiter.request);
    // Permits are numbered by the governor, across keys; the sequence is this key's own.
    const permit = this.#allocate();
    const sequence = ++this.#sequence;
    // The window limited someone: it is full with this one, and others still wait. A window
    // that merely matches the demand has learned nothing about a larger one.
    const wasFull = this.#held.size + 1 >= this.#window.limit && this.#head() !== undefined;
    const marks: Held['marks'] = {};
    const charge = (name: BucketName, amount: number) => {
      const bucket = this.#buckets[name];
      if (!bucket) return;
      bucket.take(amount);
      marks[name] = { levelAfter: bucket.level, correctionsAt: bucket.corrections };
    };
    charge('requests', 1);
    charge('input', costs.input);
    charge('output', costs.output);
    this.#totals.requests += 1;
    this.#totals.input += costs.input;
    this.#totals.output += costs.output;
    this.#held.set(permit, {
      sequence,
      sentAt: now,
      rawInput: waiter.request.inputTokens,
      input: costs.input,
      output: costs.output,
      wasFull,
      marks,
      totals: { ...this.#totals },
    });
    this.#admitted++;
    waiter.resolve({ ok: true, permit });
    this.#onChange();
  }

  /** An admitted attempt ended: what it cost, and what the provider said about the limits. */
  settle(permit: number, report: SettleReport): void {
    const held = this.#held.get(permit);
    if (!held) return;
    this.#held.delete(permit);
    const now = Date.now();
    const refused = report.outcome === 'rate_limited' || report.outcome === 'overloaded';
    this.#settleCosts(held, report, refused);
    if (report.headers) this.#learn(held, report.headers);
    this.#window.sample({
      sequence: held.sequence,
      latest: this.#sequence,
      refused,
      ok: report.outcome === 'ok',
      wasFull: held.wasFull,
      latencyMs: now - held.sentAt,
      queued: this.#priority.size + this.#normal.size,
    });
    if (refused) this.#refused(held, report, now);
    else if (report.outcome === 'ok') {
      this.#pauseStreak = 0;
      this.#probing = false;
    } else if (report.outcome === 'exhausted') {
      this.#exhausted = {
        message: report.message ?? 'the provider said retrying is pointless',
        until: now + EXHAUSTED_HOLD_MS,
      };
    }
    this.pump();
    this.#onChange();
  }

  /**
   * Corrects the charges to what the attempt cost. A 429 or 529 cost nothing: the provider takes
   * nothing for a refusal. A failure with no usage keeps the estimate, since the provider may
   * have charged it. Output reserved and not generated goes back.
   */
  #settleCosts(held: Held, report: SettleReport, refused: boolean): void {
    // Only the buckets this attempt was charged to: one learned since it left owes it nothing.
    const charged = (name: BucketName) => (held.marks[name] ? this.#buckets[name] : undefined);
    const requests = charged('requests');
    const input = charged('input');
    const output = charged('output');
    // A response may report usage oddly; a count that is not a number must not poison pacing.
    const inputTokens = countOf(report.usage.inputTokens);
    const outputTokens = countOf(report.usage.outputTokens);
    if (refused) {
      requests?.adjust(1);
      input?.adjust(held.input);
      output?.adjust(held.output);
      return;
    }
    if (inputTokens > 0) {
      input?.adjust(held.input - inputTokens);
      const ratio = inputTokens / Math.max(1, held.rawInput);
      this.#inputRatio += SMOOTHING * (ratio - this.#inputRatio);
    }
    output?.adjust(held.output - outputTokens);
    if (report.outcome === 'ok') {
      this.#outputAverage += SMOOTHING * (outputTokens - this.#outputAverage);
    }
  }

  #refused(held: Held, report: SettleReport, now: number): void {
    if (report.outcome === 'rate_limited') this.#rateLimited++;
    else this.#overloaded++;
    // A pause longer than a request's patience would hold it past the moment it should fail.
    const told = retryAfterMsOf(report.headers);
    const unprompted = Math.min(MAX_PAUSE_MS, FIRST_PAUSE_MS * 2 ** this.#pauseStreak);
    const pause = Math.min(told ?? unprompted, this.#patienceMs);
    // Attempts already in flight at the last refusal report the same moment: the unprompted
    // pause doubles once per round trip, not once per refused attempt.
    if (held.sequence > this.#streakAfter) {
      this.#pauseStreak++;
      this.#streakAfter = this.#sequence;
    }
    // Shared: every queued request of the key waits until that instant, not only this one.
    this.#pausedUntil = Math.max(this.#pausedUntil, now + pause);
  }

  #learn(held: Held, headers: Record<string, string>): void {
    const report = readRateLimits(headers);
    const seat = (name: BucketName, limit: LimitReport | undefined, tolerance: number) => {
      if (!limit) return;
      const bucket = this.#buckets[name];
      if (!bucket) {
        // First seen: seat the level at what the provider had left, less what went out since.
        const since = this.#totals[name] - held.totals[name];
        const capacity = capacityFrom(limit, held.sentAt);
        const level = Math.min(capacity, limit.remaining) - since;
        this.#buckets[name] = new LocalBucket(limit.limit, capacity, level, Date.now(), 'learned');
        return;
      }
      bucket.learn(limit, held.sentAt);
      const mark = held.marks[name];
      if (mark) bucket.sync(limit.remaining, mark.levelAfter, mark.correctionsAt, tolerance);
    };
    seat('requests', report.requests, REQUEST_TOLERANCE);
    seat('input', report.inputTokens, TOKEN_TOLERANCE);
    seat('output', report.outputTokens, TOKEN_TOLERANCE);
  }

  #refuseAll(message: string): void {
    for (const queue of [this.#priority, this.#normal]) {
      for (const waiter of queue) {
        waiter.signal.removeEventListener('abort', waiter.onAbort);
        waiter.resolve({ ok: false, reason: 'exhausted', message });
      }
      queue.clear();
    }
  }

  state(): GovernorState {
    const now = Date.now();
    const limitState = (bucket: LocalBucket | undefined): LimitState | undefined => {
      if (!bucket) return undefined;
      bucket.refill(now);
      return { limit: bucket.limit, remaining: Math.floor(bucket.level), source: bucket.source };
    };
    const state: GovernorState = {
      key: this.key,
      label: this.label,
      limit: this.#window.limit,
      inFlight: this.#held.size,
      queued: this.#priority.size + this.#normal.size,
      admitted: this.#admitted,
      rateLimited: this.#rateLimited,
      overloaded: this.#overloaded,
    };
    if (this.#pausedUntil > now) state.pausedUntil = this.#pausedUntil;
    if (this.#exhausted) state.exhausted = this.#exhausted.message;
    const requests = limitState(this.#buckets.requests);
    const input = limitState(this.#buckets.input);
    const output = limitState(this.#buckets.output);
    if (requests) state.requests = requests;
    if (input) state.inputTokens = input;
    if (output) state.outputTokens = output;
    return state;
  }
}

/** A token count as reported, or 0 when it is not a finite, non-negative number. */
function countOf(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}
