/**
 * The agents a main-thread engine has running, each with its own controller (one shared signal
 * would collect an abort listener per request), so `close` can cancel what is live.
 */
export class LiveRuns<T> {
  readonly #live = new Set<AbortController>();
  readonly #pending = new Set<Promise<T>>();

  start(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    this.#live.add(controller);
    const result = run(controller.signal).finally(() => {
      this.#live.delete(controller);
      this.#pending.delete(result);
    });
    this.#pending.add(result);
    return result;
  }

  /** Cancels what is live (reason `shutdown`) and waits for every result. */
  async close(): Promise<void> {
    for (const controller of this.#live) controller.abort('shutdown');
    await Promise.all(this.#pending);
  }
}
