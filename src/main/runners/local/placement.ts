import type { BalancedTask, BalancedWorker, ChildPiscina } from './piscina.js';
import type { RunningChild } from './running-child.js';

/** A batch on its way to a worker: the thread the handoff chose for it, and its children. */
export interface Placement {
  thread: number | undefined;
  children: readonly RunningChild[];
}

/**
 * Which worker thread each batch of children goes to, and how many children each thread holds:
 * the pool picks the least loaded thread for a batch (`leastLoaded`), and piscina's balancer
 * (`balance`) sends the batch's task there once that worker is ready, so `agentsPerThread` holds
 * per thread although a batch is one piscina task.
 */
export class ThreadPlacement {
  /** Children handed to each thread (by thread id) and not yet released there. */
  readonly #load = new Map<number, number>();
  /** The thread each handed child went to, until it is released or starts again. */
  readonly #placedOn = new Map<RunningChild, number>();
  /** The batch whose `run` is on the stack: piscina asks the balancer for it synchronously. */
  #placing: Placement | undefined;
  /** Batches piscina queued (no worker ready), by task id, until it places them. */
  readonly #placements = new Map<number, Placement>();
  /** Batches piscina queued without asking the balancer (its queue was not empty), in order. */
  readonly #unasked: Placement[] = [];

  /** Of `threads`, the one with the fewest children, counting those `planned` this turn. */
  leastLoaded(
    threads: readonly number[],
    planned: ReadonlyMap<number, number>,
  ): number | undefined {
    let best: number | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (const thread of threads) {
      const load = (this.#load.get(thread) ?? 0) + (planned.get(thread) ?? 0);
      if (load < bestLoad) {
        best = thread;
        bestLoad = load;
      }
    }
    return best;
  }

  /** Runs `post` (the batch's `pool.run`) with `placement` as the one the balancer is asked for. */
  posting<T>(placement: Placement, post: () => T): T {
    this.#placing = placement;
    const posted = post();
    if (this.#placing) this.#unasked.push(this.#placing);
    this.#placing = undefined;
    return posted;
  }

  /**
   * Piscina's pick of a worker for a task: a batch goes to the thread chosen for it, once that
   * worker is ready; to the least loaded one when that thread is gone. Anything else (the warm
   * tasks) goes to an idle worker, else the least busy.
   */
  balance(
    piscina: ChildPiscina,
    task: BalancedTask,
    workers: BalancedWorker[],
  ): BalancedWorker | null {
    let placement = this.#placements.get(task.taskId);
    if (!placement) {
      // Piscina's queue is in order: a task it queued unasked comes back in that order.
      placement = this.#placing ?? this.#unasked.shift();
      this.#placing = undefined;
    }
    const usable = workers.filter((worker) => !worker.terminating && !worker.destroyed);
    if (!placement) {
      return usable.reduce<BalancedWorker | null>(
        (best, worker) =>
          best === null || worker.currentUsage < best.currentUsage ? worker : best,
        null,
      );
    }
    let worker = usable.find((candidate) => candidate.id === placement.thread);
    if (!worker) {
      const alive =
        placement.thread !== undefined &&
        piscina.threads.some((thread) => thread.threadId === placement.thread);
      // Its thread is still starting: it waits for it. Gone (or none chosen): the least loaded.
      if (!alive) {
        const least = this.leastLoaded(
          usable.map((candidate) => candidate.id),
          new Map(),
        );
        worker = usable.find((candidate) => candidate.id === least);
      }
    }
    if (!worker) {
      this.#placements.set(task.taskId, placement);
      return null;
    }
    this.#placements.delete(task.taskId);
    this.#load.set(worker.id, (this.#load.get(worker.id) ?? 0) + placement.children.length);
    for (const child of placement.children) this.#placedOn.set(child, worker.id);
    return worker;
  }

  /** `child` no longer counts on the thread it was handed to. */
  unplace(child: RunningChild): void {
    const thread = this.#placedOn.get(child);
    if (thread === undefined) return;
    this.#placedOn.delete(child);
    const load = (this.#load.get(thread) ?? 1) - 1;
    if (load > 0) this.#load.set(thread, load);
    else this.#load.delete(thread);
  }
}
