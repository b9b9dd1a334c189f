import { capacityFrom, LocalBucket } from './bucket.js';
import { type LimitReport, readRateLimits } from './headers.js';
import type { BucketName, SharedLeases } from './shared-leases.js';
import type { AdmitRequest, GovernorLimits, GovernorState, SettleReport } from './types.js';

/** Output tokens reserved for a request before any response said how much they cost. */
const FIRST_OUTPUT_GUESS = 512;
/** Weight of the newest sample in the running averages of output and of the input ratio. */
const SMOOTHING = 0.1;
/** How far above the provider's `remaining` our level may be before it is brought down. */
const REQUEST_TOLERANCE = 1;
/** Token counts in headers are rounded to the nearest thousand. */
const TOKEN_TOLERANCE = 1000;

interface Totals {
  requests: number;
  input: number;
  output: number;
}

/** What one admitted attempt was charged, kept until it settles. */
export interface Charge {
  /** Raw client estimate, and the input tokens charged for it. */
  rawInput: number;
  input: number;
  output: number;
  /** Per bucket: our level right after admission, and the corrections then (see LocalBucket.sync). */
  marks: Partial<Record<BucketName, { levelAfter: number; correctionsAt: number }>>;
  /** Key-wide totals right after admission, to seat a bucket first learned from this response. */
  totals: Totals;
}

/**
 * One key's accounting: its copies of the provider's request, input and output buckets, what
 * each admission is charged, and the corrections from what responses report. It decides how
 * long a request must wait; the key's queue decides who goes.
 */
export class KeyBuckets {
  readonly #buckets: Partial<Record<BucketName, LocalBucket>> = {};
  readonly #totals: Totals = { requests: 0, input: 0, output: 0 };
  #inputRatio = 1;
  #outputAverage = FIRST_OUTPUT_GUESS;
  /** Running average of the input tokens one admission was charged. */
  #inputAverage = 0;
  /** Leases from buckets every process of a fleet shares (queue mode), when there are some. */
  readonly #shared: SharedLeases | undefined;

  constructor(limits: GovernorLimits, shared?: SharedLeases) {
    this.#shared = shared;
    const now = Date.now();
    // A configured limit paces from the first request, with a second's worth of burst: the real
    // capacity is learned from the first response.
    const configured = (name: BucketName, limit: number | undefined) => {
      if (limit === undefined) return;
      const burst = Math.max(1, limit / 60);
      this.#buckets[name] = new LocalBucket(limit, burst, burst, now, 'configured');
    };
    configured('requests', limits.rpm);
    configured('input', limits.itpm);
    configured('output', limits.otpm);
  }

  /** Ms until `request` fits every bucket; 0 means now. */
  waitFor(request: AdmitRequest, now: number): number {
    const { requests, input, output } = this.#buckets;
    const costs = this.#costs(request);
    requests?.refill(now);
    input?.refill(now);
    output?.refill(now);
    const local = Math.max(
      requests?.waitFor(1) ?? 0,
      input?.waitFor(costs.input) ?? 0,
      output?.waitFor(costs.output) ?? 0,
    );
    const shared = this.#shared;
    if (local > 0 || !shared) return local;
    // This process's copies allow it; the fleet's shared buckets must too (a bucket whose limit
    // is known: configured, or learned from a response).
    return Math.max(
      requests ? shared.waitFor('requests', 1, requests.limit, now) : 0,
      input ? shared.waitFor('input', costs.input, input.limit, now) : 0,
      output ? shared.waitFor('output', costs.output, output.limit, now) : 0,
    );
  }

  /** Takes one admission's cost from every bucket, and says what was taken. */
  charge(request: AdmitRequest): Charge {
    const costs = this.#costs(request);
    const marks: Charge['marks'] = {};
    const take = (name: BucketName, amount: number) => {
      const bucket = this.#buckets[name];
      if (!bucket) return;
      bucket.take(amount);
      this.#shared?.take(name, amount);
      marks[name] = { levelAfter: bucket.level, correctionsAt: bucket.corrections };
    };
    take('requests', 1);
    take('input', costs.input);
    take('output', costs.output);
    this.#totals.requests += 1;
    this.#inputAverage =
      this.#inputAverage === 0
        ? costs.input
        : this.#inputAverage + SMOOTHING * (costs.input - this.#inputAverage);
    this.#totals.input += costs.input;
    this.#totals.output += costs.output;
    return { rawInput: request.inputTokens, ...costs, marks, totals: { ...this.#totals } };
  }

  /**
   * Corrects a charge to what the attempt cost. A 429 or 529 cost nothing: the provider takes
   * nothing for a refusal. A failure with no usage keeps the estimate, since the provider may
   * have charged it. Output reserved and not generated goes back.
   */
  settle(charge: Charge, report: SettleReport, refused: boolean): void {
    // Only the buckets this attempt was charged to: one learned since it left owes it nothing.
    const charged = (name: BucketName) => (charge.marks[name] ? this.#buckets[name] : undefined);
    const requests = charged('requests');
    const input = charged('input');
    const output = charged('output');
    // A response may report usage oddly; a count that is not a number must not poison pacing.
    // The input-token limit counts uncached input and cache writes, not cache reads.
    const inputTokens = countOf(report.usage.inputTokens) + countOf(report.usage.cacheWriteTokens);
    const outputTokens = countOf(report.usage.outputTokens);
    const shared = this.#shared;
    if (refused) {
      requests?.adjust(1);
      input?.adjust(charge.input);
      output?.adjust(charge.output);
      if (requests) shared?.adjust('requests', 1);
      if (input) shared?.adjust('input', charge.input);
      if (output) shared?.adjust('output', charge.output);
      return;
    }
    if (inputTokens > 0) {
      input?.adjust(charge.input - inputTokens);
      if (input) shared?.adjust('input', charge.input - inputTokens);
      const ratio = inputTokens / Math.max(1, charge.rawInput);
      this.#inputRatio += SMOOTHING * (ratio - this.#inputRatio);
    }
    output?.adjust(charge.output - outputTokens);
    if (output) shared?.adjust('output', charge.output - outputTokens);
    if (report.outcome === 'ok') {
      this.#outputAverage += SMOOTHING * (outputTokens - this.#outputAverage);
    }
  }

  /** Learns limits and levels from the rate-limit headers of an attempt sent at `sentAt`. */
  learn(charge: Charge, sentAt: number, headers: Record<string, string>): void {
    const report = readRateLimits(headers);
    const seat = (name: BucketName, limit: LimitReport | undefined, tolerance: number) => {
      if (!limit) return;
      const bucket = this.#buckets[name];
      if (!bucket) {
        // First seen: seat the level at what the provider had left, less what went out since.
        const since = this.#totals[name] - charge.totals[name];
        const capacity = capacityFrom(limit, sentAt);
        const level = Math.min(capacity, limit.remaining) - since;
        this.#buckets[name] = new LocalBucket(limit.limit, capacity, level, Date.now(), 'learned');
        return;
      }
      bucket.learn(limit, sentAt);
      const mark = charge.marks[name];
      if (mark) bucket.sync(limit.remaining, mark.levelAfter, mark.correctionsAt, tolerance);
    };
    seat('requests', report.requests, REQUEST_TOLERANCE);
    seat('input', report.inputTokens, TOKEN_TOLERANCE);
    seat('output', report.outputTokens, TOKEN_TOLERANCE);
  }

  /**
   * How many more requests of the usual size what is left of every known bucket allows now, or
   * undefined when no limit is known (no rate-limit headers came: the provider has none).
   */
  headroom(now: number): number | undefined {
    const { requests, input, output } = this.#buckets;
    if (!requests && !input && !output) return undefined;
    requests?.refill(now);
    input?.refill(now);
    output?.refill(now);
    return Math.max(
      1,
      Math.floor(
        Math.min(
          requests ? requests.level : Number.POSITIVE_INFINITY,
          input ? input.level / Math.max(1, this.#inputAverage) : Number.POSITIVE_INFINITY,
          output ? output.level / Math.max(1, this.#outputAverage) : Number.POSITIVE_INFINITY,
        ),
      ),
    );
  }

  /**
   * The requests in flight that fill the known limits when each takes `latencyMs` (Little's
   * law): a window cut below it would leave the account's limits unused. 1 with no known limit.
   */
  fillingWindow(latencyMs: number): number {
    const perMinute = Math.min(
      this.#buckets.requests?.limit ?? Number.POSITIVE_INFINITY,
      (this.#buckets.input?.limit ?? Number.POSITIVE_INFINITY) / Math.max(1, this.#inputAverage),
      (this.#buckets.output?.limit ?? Number.POSITIVE_INFINITY) / Math.max(1, this.#outputAverage),
    );
    if (!Number.isFinite(perMinute)) return 1;
    return Math.max(1, Math.ceil((perMinute * latencyMs) / 60_000));
  }

  /** The per-minute limits the provider's headers taught, for a later process to start from. */
  learnedLimits(): GovernorLimits {
    const learned: GovernorLimits = {};
    const { requests, input, output } = this.#buckets;
    if (requests?.source === 'learned') learned.rpm = requests.limit;
    if (input?.source === 'learned') learned.itpm = input.limit;
    if (output?.source === 'learned') learned.otpm = output.limit;
    return learned;
  }

  /** The known limits and what is left of each now, for the key's state. */
  describe(state: GovernorState, now: number): void {
    const names = { requests: 'requests', input: 'inputTokens', output: 'outputTokens' } as const;
    for (const name of ['requests', 'input', 'output'] as const) {
      const bucket = this.#buckets[name];
      if (!bucket) continue;
      bucket.refill(now);
      state[names[name]] = {
        limit: bucket.limit,
        remaining: Math.floor(bucket.level),
        source: bucket.source,
      };
    }
  }

  #costs(request: AdmitRequest): { input: number; output: number } {
    return {
      input: Math.max(1, Math.ceil(request.inputTokens * this.#inputRatio)),
      output: Math.max(1, Math.min(request.maxTokens, Math.ceil(this.#outputAverage))),
    };
  }
}

/** A token count as reported, or 0 when it is not a finite, non-negative number. */
function countOf(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}
