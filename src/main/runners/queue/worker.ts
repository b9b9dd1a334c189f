import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type ConnectionOptions, type Job, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import type { LogPolicy } from '../../../shared/agent-log.js';
import { Governor } from '../../../shared/governor/governor.js';
import type { GovernorOptions } from '../../../shared/governor/types.js';
import { redactSecrets } from '../../../shared/redact.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { emptyUsage } from '../../../shared/result.js';
import type { ChildHandle } from '../local/child-handle.js';
import { ChildPool, DEFAULT_AGENTS_PER_THREAD } from '../local/pool.js';
import type { PoolOptions } from '../local/pool-entry.js';
import { describeRedis, redisOptionsOf } from './connection.js';
import {
  type AgentJobData,
  cancelReasonFrom,
  JOB_NAME,
  QueueKeys,
  readCancelNotice,
  readJobData,
} from './job.js';
import { letGo, reachRedis } from './let-go.js';
import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from './options.js';
import { RedisBuckets } from './redis-buckets.js';

export interface QueueWorkerOptions extends PoolOptions {
  url: string;
  name?: string;
  prefix?: string;
  /** Jobs taken at once (default: the pool's capacity, at most 1,000). */
  concurrency?: number;
  /** Root of this worker's log folders: one per agent, kept on this machine. */
  logDir: string;
  /** How often workers look for jobs whose worker died, in ms (BullMQ's `stalledInterval`). */
  stalledIntervalMs?: number;
  /** How long a job's lock lives without renewal, in ms (BullMQ's `lockDuration`). */
  lockDurationMs?: number;
  /** Deliveries of a job whose workers keep dying before it fails (default 3). */
  maxDeliveries?: number;
  governor?: GovernorOptions;
  /**
   * Whether this worker's governor also leases from the fleet's buckets in Redis (default true).
   * Off, each worker paces as if it were alone: for comparisons, not for a fleet on one account.
   */
  sharedLimits?: boolean;
  /** Which log folders are kept here, over each job's own policy. */
  logs?: LogPolicy;
  /** How long `start` waits to reach Redis, in ms (default 10,000). */
  connectTimeoutMs?: number;
  /** Called with each result this worker hands back to the queue. */
  onResult?: (result: AgentResult) => void;
}

export const DEFAULT_MAX_DELIVERIES = 3;
const MAX_DEFAULT_CONCURRENCY = 1000;
/** A checkpoint outlives its job's last write by a week at most (a producer that never returns). */
const CHECKPOINT_TTL_MS = 7 * 24 * 3600 * 1000;
/** How long a drained worker waits for Redis to take its last answers before it cuts loose. */
const DRAIN_CLOSE_GRACE_MS = 10_000;

/** One job this worker runs right now. */
interface Running {
  handle?: ChildHandle;
  /** A cancel that arrived (broadcast) before the child was spawned. */
  cancel?: CancelReason;
  /** The worker is draining: the child was stopped to go back to the queue, not cancelled. */
  handingBack: boolean;
  /** The child's checkpoint writes, in order. */
  checkpoints: Promise<void>;
  /** A checkpoint write failed: appends stop until a replace. */
  checkpointBroken?: boolean;
  /** This worker lost the job's lock: it may run elsewhere now, and nothing of this run counts. */
  lost?: boolean;
}

/**
 * The worker side of queue mode (`cohort worker`): a BullMQ worker whose processor hands each
 * job to a local pool, many per thread. Each committed step is copied to Redis as it happens, so a
 * job redelivered after this process dies resumes elsewhere from that step; a cancel broadcast by
 * the producer reaches the job's child here; on drain, running children go back to the queue.
 */
export class QueueWorker {
  readonly name: string;
  readonly host = os.hostname();
  readonly #options: QueueWorkerOptions;
  readonly #keys: QueueKeys;
  readonly #redis: Redis;
  readonly #subscriber: Redis;
  readonly #pool: ChildPool;
  readonly #governor: Governor | undefined;
  /** Made by `start` once Redis answers. */
  #worker!: Worker<AgentJobData, AgentResult>;
  readonly #running = new Map<string, Running>();
  #draining = false;
  #lastError: string | undefined;
  #closing: Promise<void> | undefined;
  #done = 0;

  private constructor(options: QueueWorkerOptions) {
    this.#options = options;
    this.name = `${this.host}/${process.pid}`;
    const name = options.name ?? DEFAULT_QUEUE_NAME;
    const prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
    this.#keys = new QueueKeys(prefix, name);
    const connection = redisOptionsOf(options.url);
    const noteError = (error: Error) => {
      this.#lastError = redactSecrets(error.message);
    };
    this.#redis = new Redis(connection);
    this.#redis.on('error', noteError);
    this.#subscriber = new Redis(connection);
    this.#subscriber.on('error', noteError);
    this.#subscriber.on('message', (_channel: string, text: string) => this.#onCancel(text));
    // Every worker's governor leases from buckets in Redis: together they keep to the account's
    // limits (docs/SCALE-OUT.md).
    this.#governor =
      options.governor?.enabled === false
        ? undefined
        : new Governor(
            options.governor,
            options.sharedLimits === false ? {} : { store: new RedisBuckets(this.#redis, prefix) },
          );
    this.#pool = new ChildPool(options, { governor: this.#governor });
  }

  /**
   * The BullMQ worker, made once Redis has answered: one made while Redis is away waits for it
   * in its own connections, which nothing could then cut.
   */
  #makeWorker(
    connection: RedisOptions,
    name: string,
    prefix: string,
  ): Worker<AgentJobData, AgentResult> {
    const options = this.#options;
    const capacity = this.#pool.threads * (options.agentsPerThread ?? DEFAULT_AGENTS_PER_THREAD);
    const maxDeliveries = options.maxDeliveries ?? DEFAULT_MAX_DELIVERIES;
    const worker = new Worker<AgentJobData, AgentResult>(
      name,
      (job, token, signal) => this.#process(job, token, signal),
      {
        connection: connection as ConnectionOptions,
        prefix,
        name: this.name,
        autorun: false,
        concurrency: options.concurrency ?? Math.min(capacity, MAX_DEFAULT_CONCURRENCY),
        maxStalledCount: maxDeliveries - 1,
        ...(options.stalledIntervalMs === undefined
          ? {}
          : { stalledInterval: options.stalledIntervalMs }),
        ...(options.lockDurationMs === undefined ? {} : { lockDuration: options.lockDurationMs }),
      },
    );
    worker.on('error', (error: Error) => {
      this.#lastError = redactSecrets(error.message);
    });
    // Its lock lapsed (this process was too busy, or Redis restarted): the job may already run
    // on another worker. This run stops, and writes no more checkpoints over that one's.
    worker.on('lockRenewalFailed', (jobIds: string[]) => {
      for (const jobId of jobIds) {
        const run = this.#running.get(jobId);
        if (!run) continue;
        run.lost = true;
        run.handle?.cancel('shutdown');
      }
    });
    return worker;
  }

  /** Connects, warms the pool, subscribes to cancels, then starts taking jobs. */
  static async start(options: QueueWorkerOptions): Promise<QueueWorker> {
    const worker = new QueueWorker(options);
    try {
      await reachRedis(
        Promise.all([
          worker.#pool.warm(),
          worker.#redis.ping(),
          worker.#subscriber.subscribe(worker.#keys.cancelChannel),
        ]),
        describeRedis(options.url),
        options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
        () => worker.#lastError,
      );
    } catch (error) {
      await worker.#shut();
      throw error;
    }
    const connection = redisOptionsOf(options.url);
    worker.#worker = worker.#makeWorker(
      connection,
      options.name ?? DEFAULT_QUEUE_NAME,
      options.prefix ?? DEFAULT_QUEUE_PREFIX,
    );
    await worker.#worker.waitUntilReady();
    void worker.#worker.run().catch(() => {});
    return worker;
  }

  /** Lets go of everything at once (a start that failed). */
  async #shut(): Promise<void> {
    await Promise.allSettled([
      letGo([], [this.#redis, this.#subscriber], 0),
      this.#pool.close('shutdown'),
    ]);
  }

  /** Jobs running here now. */
  get running(): number {
    return this.#running.size;
  }

  /** Results this worker has handed back to the queue. */
  get done(): number {
    return this.#done;
  }

  async #process(
    job: Job<AgentJobData, AgentResult>,
    token: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<AgentResult> {
    if (job.name !== JOB_NAME) throw new UnrecoverableError(`not a cohort job: ${job.name}`);
    const data = readJobData(job.data);
    if (typeof data === 'string') throw new UnrecoverableError(data);
    const jobId = job.id!;
    if (this.#draining) return this.#handBack(job, token);
    const run: Running = { handingBack: false, checkpoints: Promise.resolve() };
    this.#running.set(jobId, run);
    try {
      // Registered first, read second: a cancel is either kept in Redis before this read or
      // broadcast after the registration, never lost in between.
      const [cancelled, checkpoint] = await Promise.all([
        this.#redis.get(this.#keys.cancel(jobId)),
        this.#redis.lrange(this.#keys.checkpoint(jobId), 0, -1),
      ]);
      const spec = {
        ...data.spec,
        logDir: path.join(this.#options.logDir, data.spec.id),
        ...(this.#options.logs === undefined ? {} : { logs: this.#options.logs }),
      };
      if (cancelled !== null || run.cancel !== undefined) {
        const kept = cancelled === null ? undefined : cancelReasonFrom(cancelled);
        return this.#stamp(cancelledHere(spec, run.cancel ?? kept ?? 'user'));
      }
      // A drain began while its state was read: it goes back before it starts.
      if (run.handingBack || this.#draining) return this.#handBack(job, token);
      // Steps another worker committed before it died: this one resumes after them.
      const resume = checkpoint.length > 0;
      if (resume) {
        await mkdir(spec.logDir, { recursive: true });
        await writeFile(path.join(spec.logDir, 'transcript.jsonl'), checkpoint.join(''));
      }
      const handle = this.#pool.spawn(
        {
          ...spec,
          checkpoint: true,
          resume,
          // This worker's governor admits every request of its children, whatever the
          // producer's own setting: the producer has none in queue mode.
          ...(this.#governor ? { governed: { patienceMs: this.#governor.patienceMs } } : {}),
        },
        {
          onCheckpoint: (write) => {
            // Once handed back or lost, what the stopped child commits (its cut-short step)
            // must not become the checkpoint another worker resumes from.
            if (run.handingBack || run.lost) return;
            run.checkpoints = run.checkpoints.then(() => this.#saveCheckpoint(run, jobId, write));
          },
        },
      );
      run.handle = handle;
      if (run.cancel !== undefined) handle.cancel(run.cancel);
      const onAbort = () => handle.cancel('shutdown');
      signal?.addEventListener('abort', onAbort, { once: true });
      const result = await handle.result;
      signal?.removeEventListener('abort', onAbort);
      await run.checkpoints;
      if (run.handingBack && run.cancel === undefined && result.outcome === 'cancelled') {
        return this.#handBack(job, token);
      }
      return this.#stamp(result);
    } finally {
      this.#running.delete(jobId);
    }
  }

  #stamp(result: AgentResult): AgentResult {
    this.#done++;
    const stamped = { ...result, host: this.host, worker: this.name };
    this.#options.onResult?.(stamped);
    return stamped;
  }

  /** Puts the job back in the queue for another worker; it resumes there from its checkpoint. */
  async #handBack(job: Job<AgentJobData, AgentResult>, token: string | undefined): Promise<never> {
    await job.moveToWait(token);
    throw new WaitingError();
  }

  /**
   * Copies one transcript write to the job's checkpoint list. After a write that failed, appends
   * stop until the next replace: the list must stay a prefix of the transcript (a resume from it
   * redoes the steps after), never a transcript with a hole.
   */
  async #saveCheckpoint(
    run: Running,
    jobId: string,
    write: { replace: boolean; lines: string },
  ): Promise<void> {
    if (run.checkpointBroken && !write.replace) return;
    const key = this.#keys.checkpoint(jobId);
    try {
      const batch = this.#redis.multi();
      if (write.replace) batch.del(key);
      const replies = await batch.rpush(key, write.lines).pexpire(key, CHECKPOINT_TTL_MS).exec();
      run.checkpointBroken = replies?.some(([error]) => error) ?? true;
    } catch {
      // Redis away: the step is still committed here; a resume elsewhere redoes it.
      run.checkpointBroken = true;
    }
  }

  #onCancel(text: string): void {
    const notice = readCancelNotice(text);
    if (!notice) return;
    const run = this.#running.get(notice.jobId);
    if (!run) return;
    run.cancel ??= notice.reason;
    run.handle?.cancel(notice.reason);
  }

  /**
   * Takes no new job, waits up to `waitMs` for the running ones to finish, hands the rest back
   * to the queue (they resume on another worker from their last step), then closes.
   */
  drain(waitMs: number): Promise<void> {
    this.#closing ??= this.#drain(waitMs);
    return this.#closing;
  }

  /** Hands back at once whatever still runs: a second signal during a drain. */
  handBackNow(): void {
    this.#draining = true;
    for (const run of this.#running.values()) {
      if (run.handingBack) continue;
      run.handingBack = true;
      run.handle?.cancel('shutdown');
    }
  }

  async #drain(waitMs: number): Promise<void> {
    this.#draining = true;
    await this.#worker.pause(true).catch(() => {});
    const deadline = Date.now() + waitMs;
    while (this.#running.size > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    this.handBackNow();
    // Every child is handed back or finished: the processors return, and the close is quick
    // unless Redis is away, when the connections are cut after a grace.
    await letGo([this.#worker], [], DRAIN_CLOSE_GRACE_MS);
    await this.#pool.close('shutdown');
    await Promise.allSettled([this.#subscriber.quit(), this.#redis.quit()]);
    this.#subscriber.disconnect();
    this.#redis.disconnect();
  }
}

/** The result of a job whose cancel was waiting for it: it never ran. */
function cancelledHere(spec: AgentJobData['spec'], reason: CancelReason): AgentResult {
  return {
    id: spec.id,
    title: redactSecrets(spec.title),
    outcome: 'cancelled',
    reason,
    text: '',
    truncated: false,
    elapsedMs: 0,
    generation: spec.generation,
    usage: emptyUsage(),
  };
}
