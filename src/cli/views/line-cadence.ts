/**
 * When a plain progress line is due off a terminal (a log, a pipe): as soon as what it says has
 * changed, but at most one per `minMs`; and once per `maxMs` even when nothing changed, so a log
 * read later shows the batch alive, not hung, however long nothing settles.
 */
export class LineCadence {
  readonly #minMs: number;
  readonly #maxMs: number;
  /** When the last line was written, or when the cadence began. */
  #lastAt: number;
  /** What the last line said (the parts that count as a change). */
  #state: string;
  #written = false;

  constructor(options: { minMs: number; maxMs: number; start: number; state: string }) {
    this.#minMs = options.minMs;
    this.#maxMs = options.maxMs;
    this.#lastAt = options.start;
    this.#state = options.state;
  }

  /** Whether a line saying `state` is due at `now`. */
  due(now: number, state: string): boolean {
    if (now - this.#lastAt >= this.#maxMs) return true;
    if (state === this.#state) return false;
    // The first change gets its line at once: nothing was written to be too close to.
    return !this.#written || now - this.#lastAt >= this.#minMs;
  }

  /** Whether `state` differs from what the last line said. */
  changed(state: string): boolean {
    return state !== this.#state;
  }

  /** A line saying `state` was written at `now`. */
  wrote(now: number, state: string): void {
    this.#lastAt = now;
    this.#state = state;
    this.#written = true;
  }
}
