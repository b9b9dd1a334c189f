import { performance } from 'node:perf_hooks';

/**
 * Runs tasks at (or just after) a given time on shared ticks. Due times are rounded up to
 * a multiple of `quantumMs`, so thousands of paced streams share one timer and wake
 * together, instead of arming a timer per chunk. Tasks cannot be cancelled: each checks
 * its own state when it runs, which is cheaper than bookkeeping removals.
 */
export class TickScheduler {
  readonly #quantumMs: number;
  readonly #clock: () => number;
  readonly #buckets = new Map<number, Array<() => void>>();
  /** Min-heap of bucket keys (due time / quantum). */
  readonly #heap: number[] = [];
  #timer: NodeJS.Timeout | undefined;
  #armedKey = Number.POSITIVE_INFINITY;
  #closed = false;

  /**
   * `clock` is the time in ms (default `performance.now()`). A clock that jumps forward makes
   * the tasks it jumped past due at once; one slower than real time delays them.
   */
  constructor(quantumMs = 4, clock: () => number = () => performance.now()) {
    this.#quantumMs = quantumMs;
    this.#clock = clock;
  }

  /** The clock the scheduler uses, in milliseconds. */
  now(): number {
    return this.#clock();
  }

  /** Runs `task` on the first tick at or after `atMs` (in `now()` time). */
  schedule(atMs: number, task: () => void): void {
    if (this.#closed) return;
    const key = Math.ceil(atMs / this.#quantumMs);
    const bucket = this.#buckets.get(key);
    if (bucket !== undefined) {
      bucket.push(task);
      return;
    }
    this.#buckets.set(key, [task]);
    this.#push(key);
    if (key < this.#armedKey) this.#arm();
  }

  /** Drops every pending task and the timer. */
  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#buckets.clear();
    this.#heap.length = 0;
  }

  #arm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const key = this.#heap[0];
    if (key === undefined) {
      this.#armedKey = Number.POSITIVE_INFINITY;
      return;
    }
    this.#armedKey = key;
    const delay = Math.max(0, key * this.#quantumMs - this.now());
    this.#timer = setTimeout(() => this.#tick(), delay);
  }

  #tick(): void {
    this.#timer = undefined;
    this.#armedKey = Number.POSITIVE_INFINITY;
    // Timers may fire a fraction of a millisecond early relative to performance.now().
    const limit = Math.floor((this.now() + 1) / this.#quantumMs);
    while (this.#heap.length > 0 && (this.#heap[0] ?? Number.POSITIVE_INFINITY) <= limit) {
      const key = this.#pop();
      const tasks = this.#buckets.get(key) ?? [];
      this.#buckets.delete(key);
      for (const task of tasks) task();
    }
    if (!this.#closed) this.#arm();
  }

  #push(key: number): void {
    const heap = this.#heap;
    heap.push(key);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if ((heap[parent] ?? 0) <= key) break;
      heap[index] = heap[parent] ?? 0;
      index = parent;
    }
    heap[index] = key;
  }

  #pop(): number {
    const heap = this.#heap;
    const top = heap[0] ?? 0;
    const last = heap.pop() ?? 0;
    if (heap.length > 0) {
      let index = 0;
      for (;;) {
        const left = index * 2 + 1;
        if (left >= heap.length) break;
        const right = left + 1;
        const child = right < heap.length && (heap[right] ?? 0) < (heap[left] ?? 0) ? right : left;
        if ((heap[child] ?? 0) >= last) break;
        heap[index] = heap[child] ?? 0;
        index = child;
      }
      heap[index] = last;
    }
    return top;
  }
}
