import type { LimitReport } from './headers.js';

/**
 * The governor's copy of one of the provider's token buckets: it refills continuously at `limit`
 * per minute up to `capacity`, as the provider's does, and may hold debt when a response cost
 * more than was estimated. Admissions take from it at once, so requests leave paced, not burst.
 */
export class LocalBucket {
  limit: number;
  capacity: number;
  level: number;
  source: 'configured' | 'learned';
  /** Sum of every adjustment that was not an admission: see `sync`. */
  corrections = 0;
  #perMs: number;
  #updatedAt: number;

  constructor(
    limit: number,
    capacity: number,
    level: number,
    now: number,
    source: 'configured' | 'learned',
  ) {
    this.limit = limit;
    this.capacity = capacity;
    this.level = level;
    this.source = source;
    this.#perMs = limit / 60_000;
    this.#updatedAt = now;
  }

  refill(now: number): void {
    const elapsed = now - this.#updatedAt;
    if (elapsed <= 0) return;
    this.#updatedAt = now;
    if (this.level < this.capacity) {
      this.level = Math.min(this.capacity, this.level + elapsed * this.#perMs);
    }
  }

  /** Ms until `amount` fits; an amount over the capacity needs a full bucket. 0 means now. */
  waitFor(amount: number): number {
    const needed = Math.min(amount, this.capacity);
    return this.level >= needed ? 0 : Math.ceil((needed - this.level) / this.#perMs);
  }

  take(amount: number): void {
    this.level -= amount;
  }

  /** Corrects the level; it never rises above the capacity, as the provider's cannot. */
  adjust(delta: number): void {
    if (!Number.isFinite(delta)) return;
    const applied = Math.min(this.capacity, this.level + delta) - this.level;
    this.level += applied;
    this.corrections += applied;
  }

  /** Learns the limit and the capacity a response reported (see `capacityFrom`). */
  learn(report: LimitReport, sentAt: number): void {
    const capacity = capacityFrom(report, sentAt);
    if (report.limit !== this.limit) {
      this.limit = report.limit;
      this.#perMs = report.limit / 60_000;
      // Another limit than assumed: the capacity assumed with it no longer holds, either way.
      this.capacity = capacity;
      this.level = Math.min(this.level, capacity);
    }
    this.source = 'learned';
    if (capacity > this.capacity) {
      // The provider's bucket is larger than assumed, and it was at least as full as ours. The
      // capacity grows first: a level is never adjusted above the capacity.
      const grown = capacity - this.capacity;
      this.capacity = capacity;
      this.adjust(grown);
    }
  }

  /**
   * Brings the level down to what the provider reported, when ours is higher by more than
   * `tolerance`. `levelAfter` is our level right after this request was admitted and
   * `correctionsAt` our corrections then: the provider's `remaining` was taken at that same
   * moment, and corrections made since (other responses' syncs, settled estimates) already
   * count, so no discrepancy is corrected twice. It never raises the level: the provider
   * charges output only as it is generated, so it will often report more than we keep back.
   */
  sync(remaining: number, levelAfter: number, correctionsAt: number, tolerance: number): void {
    const ours = levelAfter + (this.corrections - correctionsAt);
    const drift = ours - remaining;
    if (drift > tolerance) this.adjust(-drift);
  }
}

/**
 * A bucket's capacity from one report: what is left plus what refills until `reset`, the time the
 * bucket is full again. The provider rounds `reset` up to a whole second, so a second of refill is
 * taken off: the estimate errs small, never big. Without `reset`, what is left is all we know.
 */
export function capacityFrom(report: LimitReport, sentAt: number): number {
  if (report.resetAt === undefined) return Math.max(1, Math.min(report.limit, report.remaining));
  const refill = (Math.max(0, report.resetAt - sentAt - 1000) * report.limit) / 60_000;
  return Math.min(report.limit, Math.max(1, report.remaining + refill));
}
