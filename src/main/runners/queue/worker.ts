import os from 'node:os';
import {
  type ConnectionOptions,
  DelayedError,
  type Job,
  UnrecoverableError,
  WaitingError,
  Worker,
} from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { Governor } from '../../../shared/governor/governor.js';
import { defined } from '../../../shared/option-schema.js';
import { redactSecrets } from '../../../shared/redact.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { toCancelReason } from '../../../shared/result.js';
import { warner } from '../../engine-options.js';
import { type GovernorStateFile, openGovernorState } from '../../governor-state.js';
import { type SpawnObserver, SpawnObservers, withStepTap } from '../../spawn-observer.js';
import { type ChildCapabilities, capabilityFlags } from '../capabilities.js';
import { ChildPool, DEFAULT_AGENTS_PER_THREAD } from '../local/pool.js';
import type { ChildHandle } from '../spawned-child.js';
import { type CheckpointRun, Checkpoints } from './checkpoints.js';
import { describeRedis, redisOptionsOf } from './connection.js';
import {
  type AgentJobData,
  cancelledHere,
  JOB_NAME,
  QueueKeys,
  readCancelNotice,
  readJobData,
} from './job.js';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_PREFIX,
  type QueueWorkerOptions,
} from './options.js';
import { RedisBuckets } from './redis-buckets.js';
import { closeWithin, quitWithin, reachRedis } from './redis-lifecycle.js';
import { WorkerTools } from './worker-tools.js';
import { inOneWrite } from './write-window.js';

export const DEFAULT_MAX_DELIVERIES = 3;
const MAX_DEFAULT_CONCURRENCY = 1000;
/** How long a delivery waits for a stale run of the same job on this worker to stop. */
const STALE_RUN_DELAY_MS = 1000;
/** How long a drained worker's clients may take to quit before they are cut. */
const QUIT_GRACE_MS = 1000;

/** How long a drained worker waits for Redis to take its last answers before it cuts loose. */
const DRAIN_CLOSE_GRACE_MS = 10_000;

/** One job this worker runs right now. */
interface Running extends CheckpointRun {
  handle?: ChildHandle;
  /** A cancel that arrived (broadcast) before the child was spawned. */
  cancel?: CancelReason;
  /** The worker is draining: the child was stopped to go back to the queue, not cancelled. */
  handingBack: boolean;
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
  /** Its MCP servers (`mcpConfig`), started before it takes a job. */
  #tools: WorkerTools | undefined;
  readonly #governor: Governor | undefined;
  /** Where this worker's governor keeps what its keys learned (`governor.state`). */
  readonly #governorState: GovernorStateFile | undefined;
  /** Made by `start` once Redis answers. */
  #worker!: Worker<AgentJobData, AgentResult>;
  readonly #running = new Map<string, Running>();
  readonly #observers = new SpawnObservers();
  readonly #checkpoints: Checkpoints<Running>;
  #draining = false;
  #lastError: string | undefined;
  #closing: Promise<void> | undefined;
  #done = 0;

  private constructor(options: QueueWorkerOptions) {
    this.#options = options;
    this.name = `${this.host}/${process.pid}`;
    if (options.observer) this.#observers.add(options.observer);
    const name = options.name ?? DEFAULT_QUEUE_NAME;
    const prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
    this.#keys = new QueueKeys(prefix, name);
    const connection = redisOptionsOf(options.url);
    const noteError = (error: Error) => {
      this.#lastError = redactSecrets(error.message);
    };
    this.#redis = new Redis(connection);
    this.#redis.on('error', noteError);
    // A write refused: the lock is another run's now, and this one stops and writes no more.
    this.#checkpoints = new Checkpoints<Running>(this.#redis, this.#keys, (lost) => {
      lost.lost = true;
      lost.handle?.cancel('shutdown');
    });
    this.#subscriber = new Redis(connection);
    this.#subscriber.on('error', noteError);
    this.#subscriber.on('message', (_channel: string, text: string) => this.#onCancel(text));
    // Broadcasts sent while the subscriber was away are lost: the kept cancels are read instead.
    this.#subscriber.on('ready', () => void this.#rereadCancels());
    // Every worker's governor leases from buckets in Redis: together they keep to the account's
    // limits (docs/SCALE-OUT.md).
    const governed = options.governor?.enabled !== false;
    this.#governorState = governed
      ? openGovernorState(options.governor?.state, warner(options.onWarning))
      : undefined;
    this.#governor = governed
      ? new Governor(
          options.governor,
          defined({
            store:
              options.sharedLimits === false ? undefined : new RedisBuckets(this.#redis, prefix),
            memory: this.#governorState,
          }),
        )
      : undefined;
    this.#pool = new ChildPool(options);
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
      // Two parameters: BullMQ then makes no AbortController per job; a cancel comes from the
      // producer's broadcast, and a lost lock from `lockRenewalFailed`.
      (job, token) => this.#process(job, token),
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
      // A server that cannot start stops the worker before it takes a job (exit 2).
      worker.#tools = await WorkerTools.start(options);
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
    try {
      await reachRedis(
        worker.#worker.waitUntilReady(),
        describeRedis(options.url),
        options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
        () => worker.#lastError,
      );
    } catch (error) {
      await Promise.allSettled([closeWithin([worker.#worker], [], 0), worker.#shut()]);
      throw error;
    }
    void worker.#worker.run().catch(() => {});
    return worker;
  }

  /** Lets go of everything at once (a start that failed). */
  async #shut(): Promise<void> {
    await Promise.allSettled([
      closeWithin([], [this.#redis, this.#subscriber], 0),
      // The servers are closed whatever the pool's close does: a server left up keeps this
      // process alive.
      this.#pool.close('shutdown').finally(() => this.#tools?.close()),
      this.#governorState?.close(),
    ]);
  }

  /** This worker's rate-limit governor (none with `governor.enabled: false`). */
  get governor(): Governor | undefined {
    return this.#governor;
  }

  /** The run folder its children's journal is written to. */
  get logDir(): string {
    return this.#options.logDir;
  }

  /** Tells `observer` of every job's child this worker starts; the function returned stops it. */
  observe(observer: SpawnObserver): () => void {
    return this.#observers.add(observer);
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
  ): Promise<AgentResult> {
    if (job.name !== JOB_NAME) throw new UnrecoverableError(`not a cohort job: ${job.name}`);
    const data = readJobData(job.data);
    if (typeof data === 'string') throw new UnrecoverableError(data);
    const jobId = job.id!;
    if (this.#draining) return this.#handBack(job, token);
    const stale = this.#running.get(jobId);
    if (stale) {
      // Its earlier run here lost the job (a lapsed lock, a Redis that forgot it) and is still
      // going: it stops, and this delivery waits until it has, so two runs never share the job.
      stale.lost = true;
      stale.handle?.cancel('shutdown');
      await job.moveToDelayed(Date.now() + STALE_RUN_DELAY_MS, token);
      throw new DelayedError();
    }
    const run: Running = { handingBack: false, token };
    this.#running.set(jobId, run);
    try {
      // Registered first, read second: a cancel is either kept in Redis before this read or
      // broadcast after the registration, never lost in between.
      const [cancelled, checkpoint] = await Promise.all(
        inOneWrite(this.#redis, () => [
          this.#redis.get(this.#keys.cancel(jobId)),
          this.#redis.lrange(this.#keys.checkpoint(jobId), 0, -1),
        ]),
      );
      const spec = {
        ...data.spec,
        logDir: this.#options.logDir,
        ...(this.#options.logs === undefined ? {} : { logs: this.#options.logs }),
      };
      if (cancelled !== null || run.cancel !== undefined) {
        const kept = cancelled === null ? undefined : toCancelReason(cancelled);
        return this.#stamp(cancelledHere(spec, run.cancel ?? kept ?? 'user'));
      }
      // A drain began while its state was read: it goes back before it starts.
      if (run.handingBack || this.#draining) return this.#handBack(job, token);
      // Steps another worker committed before it died: this one resumes after them.
      const resume = checkpoint.length > 0 ? { lines: checkpoint.join('') } : undefined;
      const capabilities: ChildCapabilities = {
        checkpoint: (write) => {
          // Once handed back or lost, what the stopped child commits (its cut-short step)
          // must not become the checkpoint another worker resumes from.
          if (run.handingBack || run.lost) return;
          this.#checkpoints.save(run, jobId, write);
        },
      };
      // This worker's governor admits every request of its children, whatever the producer's
      // own setting: the producer has none in queue mode.
      if (this.#governor) capabilities.governor = this.#governor;
      const bridge = this.#tools?.bridgeFor(spec);
      // An observer that wants each step's usage (the dashboard) has the child send `step-end`.
      const watchSteps = this.#observers.steps;
      const handle = this.#pool.spawn(
        {
          ...spec,
          ...(resume ? { resume } : {}),
          ...(watchSteps ? { liveEvents: true, eventTypes: ['step-end' as const] } : {}),
          ...capabilityFlags(capabilities),
        },
        {
          capabilities,
          ...(bridge ? { makeBridge: bridge.make } : {}),
          ...(watchSteps ? { onEvent: withStepTap(undefined, this.#observers) } : {}),
        },
      );
      if (this.#observers.active) {
        const { id, title, depth, parent } = spec;
        this.#observers.spawned({ id, title, depth, parent, model: spec.provider.model, handle });
      }
      if (bridge) void handle.result.then(bridge.shutdown);
      run.handle = handle;
      if (run.cancel !== undefined) handle.cancel(run.cancel);
      // A drain, or a lost lock, while its state was written back: it stops at once.
      if (run.handingBack || run.lost) handle.cancel('shutdown');
      const result = await handle.result;
      if (run.handingBack && run.cancel === undefined && result.outcome === 'cancelled') {
        // Its steps are copied before the job goes back: another worker resumes from them.
        await this.#checkpoints.written(run);
        return this.#handBack(job, token);
      }
      // It has its result: steps still waiting to be copied are no use to anyone.
      this.#checkpoints.forget(run);
      return this.#stamp(result);
    } finally {
      if (this.#running.get(jobId) === run) this.#running.delete(jobId);
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

  async #rereadCancels(): Promise<void> {
    for (const jobId of [...this.#running.keys()]) {
      const reason = await this.#redis.get(this.#keys.cancel(jobId)).catch(() => null);
      if (reason !== null) this.#onCancel(JSON.stringify({ jobId, reason }));
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
    try {
      await closeWithin([this.#worker], [], DRAIN_CLOSE_GRACE_MS);
      await this.#pool.close('shutdown');
    } finally {
      // Whatever the steps before did: a server left up keeps this process alive.
      await this.#tools?.close();
    }
    await Promise.allSettled([
      quitWithin(this.#subscriber, QUIT_GRACE_MS),
      quitWithin(this.#redis, QUIT_GRACE_MS),
      this.#governorState?.close(),
    ]);
  }
}

export type { QueueWorkerOptions } from './options.js';
