/**
 * A periodic round over a changing set, a chunk at a time, never two rounds at once: the
 * producer's reconcile of its pending jobs against Redis. `soon` brings the next round forward
 * (a reconnect); `stop` ends it for good.
 */
export class Sweeper<Item> {
  readonly #items: () => Item[];
  readonly #visit: (chunk: Item[]) => Promise<void>;
  readonly #everyMs: number;
  readonly #chunk: number;
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  #stopped = false;

  constructor(options: {
    items: () => Item[];
    visit: (chunk: Item[]) => Promise<void>;
    everyMs: number;
    chunk: number;
  }) {
    this.#items = options.items;
    this.#visit = options.visit;
    this.#everyMs = options.everyMs;
    this.#chunk = options.chunk;
  }

  /** Starts the rounds: the first after one interval. */
  start(): void {
    this.soon(this.#everyMs);
  }

  /** The next round in `delayMs` (instead of whenever it was due). */
  soon(delayMs: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#round(), delayMs);
    this.#timer.unref();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  async #round(): Promise<void> {
    if (this.#running || this.#stopped) return;
    this.#running = true;
    try {
      const items = this.#items();
      for (let at = 0; at < items.length && !this.#stopped; at += this.#chunk) {
        await this.#visit(items.slice(at, at + this.#chunk));
      }
    } finally {
      this.#running = false;
      this.soon(this.#everyMs);
    }
  }
}
