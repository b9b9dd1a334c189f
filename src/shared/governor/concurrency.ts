/**
 * Adaptive concurrency of one key: additive increase, multiplicative decrease, with a slow
 * start. docs/GOVERNOR.md has the figures it was chosen by.
 */

/** The cut on a 429 or 529: gentle enough that rate pacing, not this, sets the pace. */
const DECREASE = 0.7;

export class Concurrency {
  #limit: number;
  /** Below this, each success adds one (doubling per round trip); above, one per round trip. */
  #threshold = Number.POSITIVE_INFINITY;
  readonly #ceiling: number;
  /** Attempt sequence number at the last cut: one cut per round trip, not one per 429. */
  #cutAfter = -1;

  constructor(initial: number, ceiling: number) {
    this.#ceiling = ceiling;
    this.#limit = Math.min(initial, ceiling);
  }

  /** Requests that may be in flight now: at least one, so a key always makes progress. */
  get limit(): number {
    return Math.max(1, Math.floor(this.#limit));
  }

  /**
   * A success. The window grows only if it was in use: otherwise a quiet key would earn a large
   * window it never tested, and spend it at once in a burst.
   */
  grow(wasFull: boolean): void {
    if (!wasFull) return;
    const step = this.#limit < this.#threshold ? 1 : 1 / this.#limit;
    this.#limit = Math.min(this.#ceiling, this.#limit + step);
  }

  /**
   * A 429 or 529 for the attempt numbered `sequence`. Attempts that were already in flight when
   * the window was last cut report the same congestion: they do not cut again.
   */
  cut(sequence: number, latestSequence: number): void {
    if (sequence <= this.#cutAfter) return;
    this.#cutAfter = latestSequence;
    this.#limit = Math.max(1, this.#limit * DECREASE);
    this.#threshold = this.#limit;
  }
}
