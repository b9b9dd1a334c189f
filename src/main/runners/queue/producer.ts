import { type ConnectionOptions, type Job, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import type { ChildSpec } from '../../../shared/child-spec.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { type ChildHandle, PoolHandle } from '../local/child-handle.js';
import { DEFAULT_CANCEL_GRACE_MS } from '../local/pool.js';
import { type Ending, type PoolStats, type SpawnExtras, synthetic } from '../local/pool-entry.js';
import type { ChildRunner } from '../types.js';
import { describeRedis, redisOptionsOf } from './connection.js';
import {
  type AgentJobData,
  CANCEL_TTL_S,
  type CancelNotice,
  plainError as errorText,
  failureOfJob,
  JOB_NAME,
  JOB_VERSION,
  type QueuedChild,
  QueueKeys,
  readJobResult,
  remoteSpec,
} from './job.js';
import { letGo, reachRedis } from './let-go.js';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_PREFIX,
  DEFAULT_RECONCILE_MS,
  type QueueOptions,
} from './options.js';
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

const NO_STATS: PoolStats = {
  workerResults: 0,
  mainResults: 0,
  duplicateResults: 0,
  delivered: 0,
  crashRecords: 0,
};
/** How long a finished job waits in Redis for its producer, in seconds. */
const KEEP_FINISHED_S = 7 * 24 * 3600;

/**
 * The producer side of queue mode: every child is a BullMQ job that some `cohort worker` takes
 * and runs on its own pool. Completions arrive as queue events; a periodic reconcile reads the
 * jobs still pending from Redis, for whatever the events missed. The handle settles exactly once
 * (`PoolHandle.settle` is the guard); a result that arrives after it is counted as a duplicate.
 */
export class QueueRunner implements ChildRunner {
  readonly threads = 0;
  readonly #options: QueueOptions;
  readonly #graceMs: number;
  readonly #keys: QueueKeys;
  readonly #redis: Redis;
  readonly #queue: Queue<AgentJobData>;
  /** Made by `warm` once Redis answers. */
  #events: QueueEvents | undefined;
  readonly #pending = new Map<string, QueuedChild>();
  readonly #stats: PoolStats = { ...NO_STATS };
  readonly #sweeper: Sweeper<QueuedChild>;
  #readyOnce = false;
  /** Redis answered once: a close may wait for it a little. */
  #warm = false;
  #lastError: string | undefined;
  #closed = false;
  /** Called with every settled result. */
  onSettle: ((result: AgentResult) => void) | undefined;

  constructor(
    options: QueueOptions,
    { cancelGraceMs }: { cancelGraceMs?: number | undefined } = {},
  ) {
    this.#options = options;
    this.#graceMs = cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
    const name = options.name ?? DEFAULT_QUEUE_NAME;
    const prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
    this.#keys = new QueueKeys(prefix, name);
    this.#sweeper = new Sweeper({
      items: () => [...this.#pending.values()],
      visit: (chunk) => this.#reconcile(chunk),
      everyMs: options.reconcileMs ?? DEFAULT_RECONCILE_MS,
      chunk: SWEEP_CHUNK,
    });
    const connection = redisOptionsOf(options.url);
    this.#redis = new Redis({ ...connection, lazyConnect: false });
    this.#redis.on('error', (error: Error) => this.#noteError(error));
    // A reconnect after Redis went away: what it forgot (or the events missed) is read back soon.
    this.#redis.on('ready', () => {
      if (this.#readyOnce) this.#sweeper.soon(500);
      this.#readyOnce = true;
    });
    this.#queue = new Queue<AgentJobData>(name, { connection: this.#redis, prefix });
    this.#queue.on('error', (error: Error) => this.#noteError(error));
  }

  /**
   * The events stream's reader, made once Redis has answered: it opens a connection of its own,
   * which a reader made while Redis is away would hold open, waiting, beyond any close.
   */
  #listen(): QueueEvents {
    const name = this.#options.name ?? DEFAULT_QUEUE_NAME;
    const prefix = this.#options.prefix ?? DEFAULT_QUEUE_PREFIX;
    const connection = redisOptionsOf(this.#options.url) as ConnectionOptions;
    const events = new QueueEvents(name, { connection, prefix });
    this.#events = events;
    events.on('error', (error: Error) => this.#noteError(error));
    events.on('active', ({ jobId }) => {
      const child = this.#pending.get(jobId);
      if (child && child.handle.status === 'queued') child.handle.status = 'running';
    });
    events.on('completed', ({ jobId, returnvalue }) =>
      this.#completed(jobId, returnvalue as unknown),
    );
    events.on('failed', ({ jobId, failedReason }) => this.#failed(jobId, failedReason));
    // A job id already in Redis: a rerun's add. Its state is read at once, not at the next round.
    events.on('duplicated', ({ jobId }) => {
      const child = this.#pending.get(jobId);
      if (child) void this.#reconcile([child]);
    });
    return events;
  }

  get liveCount(): number {
    return this.#pending.size;
  }

  get stats(): PoolStats {
    return { ...this.#stats };
  }

  /** Resolves once Redis answers and the events stream is read; rejects after the timeout. */
  async warm(): Promise<void> {
    await reachRedis(
      (async () => {
        await Promise.all([this.#redis.ping(), this.#queue.waitUntilReady()]);
        await this.#listen().waitUntilReady();
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
    const jobId = extras.jobId ?? spec.id;
    const child: QueuedChild = {
      jobId,
      spec,
      extras,
      readds: 0,
      added: Promise.resolve(),
      handle: new PoolHandle(spec, (reason) => this.#cancel(child, reason)),
    };
    if (this.#closed || this.#pending.has(jobId)) {
      // A second spawn of a job id still pending would share its result: it is refused as a
      // cancel, which the caller sees at once, rather than running twice or never.
      this.#deliverFromMain(child, { outcome: 'cancelled', reason: 'shutdown' });
      return child.handle;
    }
    this.#pending.set(jobId, child);
    child.added = this.#add(child);
    return child.handle;
  }

  /** Puts the child's job in Redis; a cancel left by an earlier run of the same id goes first. */
  async #add(child: QueuedChild): Promise<void> {
    const data: AgentJobData = { v: JOB_VERSION, spec: remoteSpec(child.spec) };
    try {
      await this.#redis.del(this.#keys.cancel(child.jobId));
      await this.#queue.add(JOB_NAME, data, {
        jobId: child.jobId,
        // Kept until this producer has read it (then removed); a week for a producer that never
        // comes back.
        removeOnComplete: { age: KEEP_FINISHED_S },
        removeOnFail: { age: KEEP_FINISHED_S },
      });
    } catch (error) {
      this.#deliverFromMain(child, {
        outcome: 'failed',
        failure: {
          code: 'internal',
          message: `could not add its job to the queue: ${errorText(error)}`,
        },
      });
    }
  }

  #completed(jobId: string, value: unknown): void {
    const child = this.#pending.get(jobId);
    if (!child) return;
    const result = readJobResult(value);
    if (typeof result === 'string') {
      this.#deliverFromMain(child, {
        outcome: 'failed',
        failure: { code: 'internal', message: `its worker answered garbage: ${result}` },
      });
      this.#removeLater(jobId);
      return;
    }
    // A cancelled result nobody here asked for was left by an earlier run's cancel (a batch
    // stopped by Ctrl-C, then rerun): the task runs again rather than ending cancelled.
    if (result.outcome === 'cancelled' && child.cancelReason === undefined && !this.#closed) {
      if (this.#readd(child)) return;
    }
    // Counted as it is delivered (or found a duplicate): garbage and re-adds are not results.
    this.#stats.workerResults++;
    this.#deliver(child, result);
    this.#removeLater(jobId);
  }

  #failed(jobId: string, failedReason: string): void {
    const child = this.#pending.get(jobId);
    if (!child) return;
    this.#deliverFromMain(
      child,
      child.cancelReason !== undefined
        ? { outcome: 'cancelled', reason: child.cancelReason }
        : { outcome: 'failed', failure: failureOfJob(failedReason) },
    );
    this.#removeLater(jobId);
  }

  /** Adds the job again as new; false when the backstop says it has been added enough. */
  #readd(child: QueuedChild): boolean {
    if (child.readds >= MAX_READDS) return false;
    child.readds++;
    const { jobId } = child;
    child.added = (async () => {
      await this.#removeJob(jobId);
      if (settled(child)) return;
      await this.#add(child);
    })();
    return true;
  }

  #deliver(child: QueuedChild, result: AgentResult): boolean {
    if (!child.handle.settle(result)) {
      this.#stats.duplicateResults++;
      return false;
    }
    this.#stats.delivered++;
    if (child.graceTimer) clearTimeout(child.graceTimer);
    // Only its own entry: a spawn refused for a job id in use must not orphan the child using it.
    if (this.#pending.get(child.jobId) === child) this.#pending.delete(child.jobId);
    this.onSettle?.(result);
    child.extras.onEvent?.({ type: 'agent-settle', agentId: result.id, result });
    return true;
  }

  /** A result made here for a child no worker answered for: removed, cancelled, lost. */
  #deliverFromMain(child: QueuedChild, ending: Ending): void {
    this.#stats.mainResults++;
    const made = synthetic(child, ending);
    // Nothing was written on this machine: the result names no folder.
    const { logDir: _none, ...result } = made;
    this.#deliver(child, result);
  }

  /** The job is done with: its Redis state goes (job, checkpoint, cancel), off the caller's path. */
  #removeLater(jobId: string): void {
    void this.#removeJob(jobId);
  }

  /**
   * Removes the job, and with it its checkpoint and any cancel kept for it. A job a worker still
   * holds cannot be removed: its cancel then stays (until it expires) for that worker or the one
   * it is redelivered to, so it never runs again for nobody.
   */
  async #removeJob(jobId: string): Promise<void> {
    try {
      if ((await this.#queue.remove(jobId)) !== 1 && (await this.#queue.getJob(jobId))) return;
      await this.#redis.del(this.#keys.checkpoint(jobId), this.#keys.cancel(jobId));
    } catch (error) {
      this.#noteError(error);
    }
  }

  #cancel(child: QueuedChild, reason: CancelReason): boolean {
    if (settled(child)) return false;
    if (child.cancelReason !== undefined) return true;
    child.cancelReason = reason;
    void this.#cancelJob(child, reason);
    // No worker answers (none is alive, or Redis is away): the result is made here, once the
    // grace a local child gets has passed twice.
    child.graceTimer = setTimeout(() => {
      this.#deliverFromMain(child, { outcome: 'cancelled', reason });
      this.#removeLater(child.jobId);
    }, this.#graceMs * 2);
    child.graceTimer.unref();
    return true;
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
        this.#deliverFromMain(child, { outcome: 'cancelled', reason });
        this.#removeLater(child.jobId);
      }
    } catch (error) {
      this.#noteError(error);
    }
  }

  /** Nothing to tell: members of a tree run at depth 1 here and carry their own limits. */
  budgetSpent(): void {}
  /** Nothing to read: a remote child's spans are not replayed (docs/SCALE-OUT.md). */
  readUplinkOf(): void {}

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
            this.#deliverFromMain(child, {
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
      (a, b) => Number(b.handle.status === 'queued') - Number(a.handle.status === 'queued'),
    );
    for (const child of children) child.handle.cancel(reason);
    await Promise.all(children.map((child) => child.handle.result));
    // Never warm (Redis never answered): nothing to close gracefully.
    const parts = this.#events ? [this.#events, this.#queue] : [this.#queue];
    await letGo(parts, [this.#redis], this.#warm ? CLOSE_GRACE_MS : 0);
  }
}

/** Read afresh each time: an await in between may have settled it. */
function settled(child: QueuedChild): boolean {
  return child.handle.status === 'settled';
}
