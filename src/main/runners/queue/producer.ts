import { type Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { ChildSpec } from '../../../shared/child-spec.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { DEFAULT_CANCEL_GRACE_MS } from '../local/pool.js';
import {
  type ChildHandle,
  type DeliveryCounts,
  type Ending,
  noDeliveries,
  type PoolStats,
  SpawnedChild,
} from '../spawned-child.js';
import type { ChildRunner, SpawnExtras } from '../types.js';
import { describeRedis, redisOptionsOf } from './connection.js';
import { EventsReader, parseReturnValue } from './events-reader.js';
import {
  type AgentJobData,
  CANCEL_TTL_S,
  type CancelNotice,
  plainError as errorText,
  failureOfJob,
  QueueKeys,
  readJobResult,
} from './job.js';
import { JobWrites } from './job-writes.js';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_PREFIX,
  DEFAULT_RECONCILE_MS,
  type QueueOptions,
} from './options.js';
import { closeWithin, reachRedis } from './redis-lifecycle.js';
import { Sweeper } from './sweeper.js';

/** How long a close waits for Redis before it cuts the connections. */
const CLOSE_GRACE_MS = 5000;
/** Jobs one reconcile round reads at once. */
const SWEEP_CHUNK = 200;
/**
 * Times a job may be added again after Redis forgot it, or came back with a result this producer
 * never asked for: a backstop against a loop, never reached by a healthy fleet.
 */
const MAX_READDS = 5;

/** How the events stream is read: a window to gather in after each read that found events. */
const EVENTS = { gatherMs: 25, blockMs: 10_000, count: 1000 };

/**
 * The producer side of queue mode: every child is a BullMQ job that some `cohort worker` takes
 * and runs on its own pool. Completions arrive as queue events, read a window at a time; a
 * periodic reconcile reads the jobs still pending from Redis, for whatever the events missed.
 * Adds and removals go out a window at a time too (`Batch`). Each child settles exactly once
 * (`SpawnedChild.deliver` is the guard, shared with the local runner); a result that arrives
 * after it is counted as a duplicate.
 */
export class QueueRunner implements ChildRunner {
  readonly threads = 0;
  readonly #options: QueueOptions;
  readonly #graceMs: number;
  readonly #keys: QueueKeys;
  readonly #redis: Redis;
  readonly #queue: Queue<AgentJobData>;
  /** The events stream's reader and its connection, made by `warm` once Redis answers. */
  #events: { reader: EventsReader; client: Redis } | undefined;
  readonly #writes: JobWrites;
  readonly #pending = new Map<string, QueuedChild>();
  /** What every child of this runner reaches it by. */
  readonly #side: QueueSide;
  readonly #sweeper: Sweeper<QueuedChild>;
  #readyOnce = false;
  /** The next reconcile round reads every pending job, however young (a reconnect). */
  #sweepAll = false;
  /** Redis answered once: a close may wait for it a little. */
  #warm = false;
  #lastError: string | undefined;
  #closed = false;

  constructor(
    options: QueueOptions,
    { cancelGraceMs }: { cancelGraceMs?: number | undefined } = {},
  ) {
    this.#options = options;
    this.#graceMs = cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
    const pending = this.#pending;
    this.#side = {
      counts: noDeliveries(),
      cancelled: (child, reason) => this.#cancel(child, reason),
      // Only its own entry: a spawn refused for a job id in use must not orphan the child using it.
      delivered: (child) => {
        if (pending.get(child.jobId) === child) pending.delete(child.jobId);
      },
    };
    const name = options.name ?? DEFAULT_QUEUE_NAME;
    const prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
    this.#keys = new QueueKeys(prefix, name);
    const reconcileMs = options.reconcileMs ?? DEFAULT_RECONCILE_MS;
    this.#sweeper = new Sweeper({
      // A job younger than a round is left to its events: a round reads only what they may
      // have missed for a while. After a reconnect, every job is read.
      items: () => {
        const since = this.#sweepAll ? Infinity : Date.now() - reconcileMs;
        this.#sweepAll = false;
        return [...this.#pending.values()].filter((child) => child.spawnedOn <= since);
      },
      visit: (chunk) => this.#reconcile(chunk),
      everyMs: reconcileMs,
      chunk: SWEEP_CHUNK,
    });
    const connection = redisOptionsOf(options.url);
    this.#redis = new Redis({ ...connection, lazyConnect: false });
    this.#redis.on('error', (error: Error) => this.#noteError(error));
    // A reconnect after Redis went away: what it forgot (or the events missed) is read back soon.
    this.#redis.on('ready', () => {
      if (this.#readyOnce) {
        this.#sweepAll = true;
        this.#sweeper.soon(500);
      }
      this.#readyOnce = true;
    });
    this.#queue = new Queue<AgentJobData>(name, { connection: this.#redis, prefix });
    this.#queue.on('error', (error: Error) => this.#noteError(error));
    this.#writes = new JobWrites(this.#queue, this.#redis, this.#keys, {
      refuse: (child, ending) => child.deliverFromMain(ending),
      noteError: (error) => this.#noteError(error),
    });
  }

  /**
   * The events stream's reader, made once Redis has answered: its connection, made while Redis
   * is away, would hold a close open, waiting.
   */
  async #listen(): Promise<void> {
    const client = new Redis(redisOptionsOf(this.#options.url));
    client.on('error', (error: Error) => this.#noteError(error));
    const reader = new EventsReader(
      client,
      this.#keys.events,
      {
        active: (jobId) => {
          const child = this.#pending.get(jobId);
          if (child && child.status === 'queued') child.status = 'running';
        },
        completed: (jobId, text) => {
          if (!this.#pending.has(jobId)) return;
          this.#completed(jobId, parseReturnValue(text));
        },
        failed: (jobId, failedReason) => this.#failed(jobId, failedReason),
        // A job id already in Redis: a rerun's add. Its state is read at once, not at the next
        // round.
        duplicated: (jobId) => {
          const child = this.#pending.get(jobId);
          if (child) void this.#reconcile([child]);
        },
      },
      EVENTS,
    );
    this.#events = { reader, client };
    await reader.start();
  }

  get liveCount(): number {
    return this.#pending.size;
  }

  get stats(): PoolStats {
    return { ...this.#side.counts, crashRecords: 0 };
  }

  /** Resolves once Redis answers and the events stream is read; rejects after the timeout. */
  async warm(): Promise<void> {
    await reachRedis(
      (async () => {
        await Promise.all([this.#redis.ping(), this.#queue.waitUntilReady()]);
        await this.#listen();
      })(),
      describeRedis(this.#options.url),
      this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      () => this.#lastError,
    );
    this.#warm = true;
    const rate = this.#options.rateLimit;
    if (rate) await this.#queue.setGlobalRateLimit(rate.max, rate.durationMs);
    this.#sweeper.start();
  }

  spawn(spec: ChildSpec, extras: SpawnExtras = {}): ChildHandle {
    const child = new QueuedChild(spec, extras, this.#side).serve();
    const jobId = child.jobId;
    if (this.#closed || this.#pending.has(jobId)) {
      // A second spawn of a job id still pending would share its result: it is refused as a
      // cancel, which the caller sees at once, rather than running twice or never.
      child.deliverFromMain({ outcome: 'cancelled', reason: 'shutdown' });
      return child;
    }
    this.#pending.set(jobId, child);
    child.added = this.#writes.add(child);
    return child;
  }

  #completed(jobId: string, value: unknown): void {
    const child = this.#pending.get(jobId);
    if (!child) return;
    const result = readJobResult(value);
    if (typeof result === 'string') {
      child.deliverFromMain({
        outcome: 'failed',
        failure: { code: 'internal', message: `its worker answered garbage: ${result}` },
      });
      this.#writes.remove(jobId);
      return;
    }
    // A cancelled result nobody here asked for was left by an earlier run's cancel (a batch
    // stopped by Ctrl-C, then rerun): the task runs again rather than ending cancelled.
    if (result.outcome === 'cancelled' && child.cancelReason === undefined && !this.#closed) {
      if (this.#readd(child)) return;
    }
    // Counted as it is delivered (or found a duplicate): garbage and re-adds are not results.
    child.deliverFromWorker(result);
    this.#writes.remove(jobId);
  }

  #failed(jobId: string, failedReason: string): void {
    const child = this.#pending.get(jobId);
    if (!child) return;
    child.deliverFromMain(
      child.cancelReason !== undefined
        ? { outcome: 'cancelled', reason: child.cancelReason }
        : { outcome: 'failed', failure: failureOfJob(failedReason) },
    );
    this.#writes.remove(jobId);
  }

  /** Adds the job again as new; false when the backstop says it has been added enough. */
  #readd(child: QueuedChild): boolean {
    if (child.readds >= MAX_READDS) return false;
    child.readds++;
    const { jobId } = child;
    child.added = (async () => {
      await this.#writes.removeNow([jobId]);
      if (settled(child)) return;
      // A cancelled answer left by an earlier run brought it here: that cancel goes too.
      child.clearCancel = true;
      await this.#writes.add(child);
    })();
    return true;
  }

  /** A first cancel of an unsettled child. */
  #cancel(child: QueuedChild, reason: CancelReason): void {
    child.cancelReason = reason;
    void this.#cancelJob(child, reason);
    // No worker answers (none is alive, or Redis is away): the result is made here, once the
    // grace a local child gets has passed twice.
    child.graceTimer = setTimeout(() => {
      child.deliverFromMain({ outcome: 'cancelled', reason });
      this.#writes.remove(child.jobId);
    }, this.#graceMs * 2);
    child.graceTimer.unref();
  }

  /**
   * Tells every worker, then takes the job out if it is still waiting. The cancel is kept in Redis
   * before it is broadcast and before the removal is tried: a worker that takes the job in between
   * reads it when it starts, so no order of events loses it.
   */
  async #cancelJob(child: QueuedChild, reason: CancelReason): Promise<void> {
    await child.added;
    if (settled(child)) return;
    const notice: CancelNotice = { jobId: child.jobId, reason };
    try {
      await this.#redis.set(this.#keys.cancel(child.jobId), reason, 'EX', CANCEL_TTL_S);
      await this.#redis.publish(this.#keys.cancelChannel, JSON.stringify(notice));
      // A job that finished just now keeps its result: its answer, not the cancel, is delivered.
      const job = await this.#queue.getJob(child.jobId);
      if (job?.finishedOn) {
        if (job.failedReason) this.#failed(child.jobId, job.failedReason);
        else this.#completed(child.jobId, job.returnvalue);
        return;
      }
      // 1 when it was waiting (or delayed) and is now gone; 0 when a worker holds its lock.
      const removed = await this.#queue.remove(child.jobId);
      if (removed === 1) {
        try {
          // A job that had started may have finished between the read and the removal (its lock
          // goes with its finish): its answer is then in the events stream, ahead of the
          // removal's own entry. Read up to there first, so the worker's result (its usage, its
          // host) wins.
          if (job?.processedOn !== undefined) await this.#events?.reader.readPast(this.#redis);
          if (!settled(child)) child.deliverFromMain({ outcome: 'cancelled', reason });
        } finally {
          // The job is gone either way: its checkpoint and cancel keys go too.
          this.#writes.remove(child.jobId);
        }
      }
    } catch (error) {
      this.#noteError(error);
    }
  }

  /** Reads each job's state: a result the events missed is taken, a forgotten job added again. */
  async #reconcile(children: QueuedChild[]): Promise<void> {
    await Promise.all(
      children.map(async (child) => {
        await child.added;
        if (settled(child)) return;
        let job: Job<AgentJobData> | undefined;
        try {
          job = await this.#queue.getJob(child.jobId);
        } catch (error) {
          this.#noteError(error);
          return;
        }
        if (settled(child)) return;
        if (!job) {
          // Redis forgot it (a restart without persistence): it runs again from the start.
          if (!this.#readd(child)) {
            child.deliverFromMain({
              outcome: 'failed',
              failure: { code: 'worker_lost', message: 'the queue lost its job too many times' },
            });
          }
          return;
        }
        if (job.finishedOn && job.failedReason) this.#failed(child.jobId, job.failedReason);
        else if (job.finishedOn) this.#completed(child.jobId, job.returnvalue);
      }),
    );
  }

  #noteError(error: unknown): void {
    this.#lastError = errorText(error);
  }

  async close(reason: CancelReason = 'shutdown'): Promise<void> {
    this.#closed = true;
    this.#sweeper.stop();
    // Waiting ones first: taken out before a slot freed by a running one's cancel could start them.
    const children = [...this.#pending.values()].sort(
      (a, b) => Number(b.status === 'queued') - Number(a.status === 'queued'),
    );
    for (const child of children) child.cancel(reason);
    await Promise.all(children.map((child) => child.result));
    // Never warm (Redis never answered): nothing to close gracefully.
    const deadline = Date.now() + (this.#warm ? CLOSE_GRACE_MS : 0);
    this.#events?.reader.stop();
    this.#events?.client.disconnect();
    // The last removals go out now, then the queue closes: both within the one grace.
    await Promise.race([this.#writes.flushRemovals(), delay(deadline - Date.now())]);
    await closeWithin([this.#queue], [this.#redis], Math.max(0, deadline - Date.now()));
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)).unref());
}

/** Read afresh each time: an await in between may have settled it. */
function settled(child: QueuedChild): boolean {
  return child.status === 'settled';
}

/** What a queued child needs of its runner: one object, shared by all the runner's children. */
interface QueueSide {
  readonly counts: DeliveryCounts;
  /** The runner's part of a first cancel. */
  cancelled(child: QueuedChild, reason: CancelReason): void;
  /** The child has its result: it is no longer pending. */
  delivered(child: QueuedChild): void;
}

/** What the producer keeps of one job, from spawn until its result is delivered. */
export class QueuedChild extends SpawnedChild {
  readonly jobId: string;
  /** Resolves once the job is in Redis (or its add failed and the child settled). */
  added: Promise<void> = Promise.resolve();
  readds = 0;
  /** When it was spawned (ms since the epoch): a reconcile round reads only older jobs. */
  readonly spawnedOn = Date.now();
  /** A cancel an earlier run of this job id may have left must go before it is added. */
  clearCancel: boolean;
  readonly #side: QueueSide;

  constructor(spec: ChildSpec, extras: SpawnExtras, side: QueueSide) {
    super(spec, extras, side.counts);
    this.#side = side;
    this.jobId = extras.jobId ?? spec.id;
    this.clearCancel = extras.jobId !== undefined;
  }

  protected cancelled(reason: CancelReason): void {
    this.#side.cancelled(this, reason);
  }

  protected override delivered(): void {
    this.#side.delivered(this);
  }

  protected madeOnMain(ending: Ending): AgentResult {
    // Nothing was written on this machine: the result names no folder.
    const { logDir: _none, ...result } = this.endedOnMain(ending);
    return result;
  }
}
