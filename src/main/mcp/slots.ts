/**
 * A per-server cap on calls in flight: `take` resolves when one of `size` slots is free, in the
 * order callers asked. A caller whose signal aborts while it waits leaves the line at once (or,
 * handed a slot in that turn, gives it back), and its listener is removed either way.
 */
export class Slots {
  readonly #size: number;
  #used = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.#size = size;
  }

  get inUse(): number {
    return this.#used;
  }

  async take(signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    if (this.#used < this.#size) {
      this.#used++;
      return this.#releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const index = this.#waiting.indexOf(wake);
        if (index >= 0) this.#waiting.splice(index, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(wake);
    });
    // The slot was handed over by `release` without being given back. Its caller may have been
    // cancelled between the handover and this turn (its listener was gone by then): the slot
    // goes to the next in line and the caller gets its abort, so nothing is sent for it.
    const release = this.#releaser();
    if (signal.aborted) {
      release();
      throw signal.reason;
    }
    return release;
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift();
      if (next) next();
      else this.#used--;
    };
  }
}
