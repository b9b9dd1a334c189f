/**
 * The bench's concurrency bound, the same for every engine: `concurrency` lanes, each starting
 * the next agent as soon as its previous one settled. So the engines are compared under one
 * admission policy, and each agent's latency is timed the same way (start call → result).
 */
export interface LimitedRun<T> {
  results: T[];
  /** Per-item time from its start call to its settled promise, in ms, in item order. */
  latenciesMs: number[];
  /** First start call to last settle, in ms. */
  makespanMs: number;
  /** Most items in flight at once. */
  maxLive: number;
}

/** Runs `start(0) … start(count - 1)` with at most `concurrency` in flight. */
export async function runLimited<T>(
  count: number,
  concurrency: number,
  start: (index: number) => Promise<T>,
): Promise<LimitedRun<T>> {
  const results = new Array<T>(count);
  const latenciesMs = new Array<number>(count).fill(0);
  let next = 0;
  let live = 0;
  let maxLive = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const index = next++;
      live++;
      if (live > maxLive) maxLive = live;
      const begin = performance.now();
      results[index] = await start(index);
      latenciesMs[index] = performance.now() - begin;
      live--;
    }
  };
  const begin = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  return { results, latenciesMs, makespanMs: performance.now() - begin, maxLive };
}
