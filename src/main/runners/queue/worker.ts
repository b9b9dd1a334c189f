import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type ConnectionOptions, type Job, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { LogPolicy } from '../../../shared/agent-log.js';
import { CohortError } from '../../../shared/errors.js';
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

/** One job this worker runs right now. */
interface Running {
  handle?: ChildHandle;
  /** A cancel that arrived (broadcast) before the child was spawned. */
  cancel?: CancelReason;
  /** The worker is draining: the child was stopped to go back to the queue, not cancelled. */
  handingBack: boolean;
  /** The child's checkpoint writes, in order. */
  checkpoints: Promise<void>;
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
  readonly #worker: Worker<AgentJobData, AgentResult>;
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
    const capacity = this.#pool.threads * (options.agentsPerThread ?? DEFAULT_AGENTS_PER_THREAD);
    const maxDeliveries = options.maxDeliveries ?? DEFAULT_MAX_DELIVERIES;
    this.#worker = new Worker<AgentJobData, AgentResult>(
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
    this.#worker.on('error', noteError);
  }

  /** Connects, warms the pool, subscribes to cancels, then starts taking jobs. */
  static async start(options: QueueWorkerOptions): Promise<QueueWorker> {
    const worker = new QueueWorker(options);
    const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.all([
          worker.#pool.warm(),
          worker.#redis.ping(),
          worker.#subscriber.subscribe(worker.#keys.cancelChannel),
          worker.#worker.waitUntilReady(),
        ]),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            reject(
              new CohortError(
                'queue_unreachable',
                `Could not reach Redis at ${describeRedis(options.url)} within ${timeoutMs} ms${worker.#lastError ? `: ${worker.#lastError}` : ''}`,
              ),
            );
          }, timeoutMs);
        }),
      ]);
    } catch (error) {
      await worker.#shut();
      throw error;
    } finally {
      clearTimeout(timer);
    }
    void worker.#worker.run().catch(() => {});
    return worker;
  }

  /** Lets go of everything at once (a start that failed). */
  async #shut(): Promise<void> {
    await Promise.allSettled([this.#worker.close(true), this.#pool.close('shutdown')]);
    this.#redis.disconnect();
    this.#subscriber.disconnect();
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
          ...(this.#governor && spec.governed
            ? { governed: { patienceMs: this.#governor.patienceMs } }
            : {}),
        },
        {
          onCheckpoint: (write) => {
            run.checkpoints = run.checkpoints.then(() => this.#saveCheckpoint(jobId, write));
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
      if (run.handingBack && result.outcome === 'cancelled') return this.#handBack(job, token);
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

  async #saveCheckpoint(jobId: string, write: { replace: boolean; lines: string }): Promise<void> {
    const key = this.#keys.checkpoint(jobId);
    try {
      if (write.replace) await this.#redis.multi().del(key).rpush(key, write.lines).exec();
      else await this.#redis.rpush(key, write.lines);
    } catch {
      // Redis away: the step is still committed here; a resume elsewhere redoes it.
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
    await this.#worker.close().catch(() => {});
    await this.#pool.close('shutdown');
    await Promise.allSettled([this.#subscriber.quit(), this.#redis.quit()]);
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
