import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Ending } from '../spawned-child.js';
import {
  type AgentJobData,
  plainError as errorText,
  JOB_NAME,
  JOB_VERSION,
  type QueueKeys,
  remoteSpec,
} from './job.js';
import type { QueuedChild } from './producer.js';
import { inOneWrite, WriteWindow } from './write-window.js';

/** How long a finished job waits in Redis for its producer, in seconds. */
const KEEP_FINISHED_S = 7 * 24 * 3600;
/** Spawns of one turn of the event loop are added in one round trip. */
const ADD_WINDOW_MS = 0;
/** Finished jobs within this window are removed together; nobody waits on a removal. */
const REMOVE_WINDOW_MS = 100;

/** What the producer hears back from its writes. */
export interface WriteHooks {
  /** A child whose job never went to Redis (cancelled first, or the add failed) ends so. */
  refuse(child: QueuedChild, ending: Ending): void;
  noteError(error: unknown): void;
}

/**
 * The producer's writes to Redis: the jobs it adds and the finished ones it removes, each a
 * window at a time (`Batch`), so a burst of spawns or results costs one round trip, not one each.
 */
export class JobWrites {
  readonly #queue: Queue<AgentJobData>;
  readonly #redis: Redis;
  readonly #keys: QueueKeys;
  readonly #hooks: WriteHooks;
  readonly #adds = new WriteWindow<QueuedChild>(
    (children) => this.#addAll(children),
    ADD_WINDOW_MS,
  );
  readonly #removals = new WriteWindow<string>(
    (jobIds) => this.removeNow(jobIds),
    REMOVE_WINDOW_MS,
  );
  /** Job ids whose removal waits for its window or is under way, and when it is done. */
  readonly #removing = new Map<string, Promise<void>>();

  constructor(queue: Queue<AgentJobData>, redis: Redis, keys: QueueKeys, hooks: WriteHooks) {
    this.#queue = queue;
    this.#redis = redis;
    this.#keys = keys;
    this.#hooks = hooks;
  }

  /** Adds the child's job with its window; resolves once it is in Redis or the child has ended. */
  add(child: QueuedChild): Promise<void> {
    return this.#adds.push(child);
  }

  /**
   * Puts a window's jobs in Redis in one round trip. A cancel an earlier run of the same id may
   * have left goes first: sent before the add on the same connection, Redis runs it first. A
   * job id known fresh (an agent id) has none to clear.
   */
  async #addAll(children: QueuedChild[]): Promise<void> {
    const adding: QueuedChild[] = [];
    for (const child of children) {
      // Cancelled while it waited for its window: it never goes to Redis.
      if (settled(child)) continue;
      if (child.cancelReason === undefined) adding.push(child);
      else this.#hooks.refuse(child, { outcome: 'cancelled', reason: child.cancelReason });
    }
    if (adding.length === 0) return;
    // A job id spawned again while its last job's removal waits: that removal goes first, or
    // the add would find the finished job and hand over its old result.
    const removing = adding.flatMap((child) => this.#removing.get(child.jobId) ?? []);
    if (removing.length > 0) {
      void this.#removals.flush();
      await Promise.all(removing);
    }
    const stale = adding.filter((child) => child.clearCancel);
    try {
      const jobs = adding.map((child) => ({
        name: JOB_NAME,
        data: { v: JOB_VERSION, spec: remoteSpec(child.spec) } satisfies AgentJobData,
        opts: {
          jobId: child.jobId,
          // Kept until this producer has read it (then removed); a week for a producer that
          // never comes back.
          removeOnComplete: { age: KEEP_FINISHED_S },
          removeOnFail: { age: KEEP_FINISHED_S },
        },
      }));
      // Each job goes as its own script call, all in one socket write (`inOneWrite`), behind the
      // clearing of stale cancels: BullMQ's bulk add builds an ioredis pipeline, which copies
      // every BullMQ script onto itself before it sends anything.
      await Promise.all(
        inOneWrite(this.#redis, () => [
          stale.length
            ? this.#redis.del(...stale.map((child) => this.#keys.cancel(child.jobId)))
            : undefined,
          ...jobs.map((job) => this.#queue.add(job.name, job.data, job.opts)),
        ]),
      );
    } catch (error) {
      await this.#refuseUnadded(adding, error);
    }
  }

  /**
   * After an add that failed: the adds of one write are no transaction, so some may be in Redis
   * all the same. Those stay pending (their events answer); the others fail, saying why.
   */
  async #refuseUnadded(adding: QueuedChild[], error: unknown): Promise<void> {
    const found = await Promise.allSettled(adding.map((child) => this.#queue.getJob(child.jobId)));
    adding.forEach((child, at) => {
      const look = found[at];
      if (settled(child) || (look?.status === 'fulfilled' && look.value)) return;
      this.#hooks.refuse(child, {
        outcome: 'failed',
        failure: {
          code: 'internal',
          message: `could not add its job to the queue: ${errorText(error)}`,
        },
      });
    });
  }

  /** The job is done with: its Redis state goes (job, checkpoint, cancel), off the caller's path. */
  remove(jobId: string): void {
    this.#removing.set(jobId, this.#removals.push(jobId));
  }

  /** Sends the removals waiting for their window now. */
  flushRemovals(): Promise<void> {
    return this.#removals.flush();
  }

  /**
   * Removes the jobs, and with each its checkpoint and any cancel kept for it. A job a worker
   * still holds cannot be removed: its cancel then stays (until it expires) for that worker or the
   * one it is redelivered to, so it never runs again for nobody.
   */
  async removeNow(jobIds: string[]): Promise<void> {
    // Each job on its own: one that fails to go must not keep the others' keys.
    const gone = await Promise.all(
      inOneWrite(this.#redis, () => jobIds.map((jobId) => this.#removeJob(jobId))),
    );
    const keys = jobIds
      .filter((_, at) => gone[at])
      .flatMap((jobId) => [this.#keys.checkpoint(jobId), this.#keys.cancel(jobId)]);
    try {
      if (keys.length > 0) await this.#redis.del(...keys);
    } catch (error) {
      this.#hooks.noteError(error);
    } finally {
      for (const jobId of jobIds) this.#removing.delete(jobId);
    }
  }

  /** True once the job is gone; false while a worker holds it, or when Redis refused. */
  async #removeJob(jobId: string): Promise<boolean> {
    try {
      if ((await this.#queue.remove(jobId)) === 1) return true;
      return (await this.#queue.getJob(jobId)) === undefined;
    } catch (error) {
      this.#hooks.noteError(error);
      return false;
    }
  }
}

/** Read afresh each time: an await in between may have settled it. */
function settled(child: QueuedChild): boolean {
  return child.status === 'settled';
}
