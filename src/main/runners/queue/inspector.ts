import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { CohortError } from '../../../shared/errors.js';
import { describeRedis, redisOptionsOf } from './connection.js';
import { plainError } from './job.js';
import { DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from './options.js';
import { closeWithin } from './redis-lifecycle.js';

/** A queue's jobs by state, as `cohort queue status` shows them. */
export interface QueueCounts {
  /** Waiting for a worker to take them (BullMQ's `waiting` and `prioritized`). */
  waiting: number;
  /** Taken by a worker, running now. */
  active: number;
  /** Finished and not yet taken out by their producer. */
  completed: number;
  failed: number;
  /** Held back until a time: a redelivery's pause, a rate limit. */
  delayed: number;
}

/** One worker of the queue: a connected `cohort worker`, or one that holds jobs and is gone. */
export interface QueueWorkerStatus {
  /** The worker's name: `HOST/PID` for `cohort worker`. */
  name: string;
  /**
   * Whether it is connected to Redis now; absent when the Redis would not list its clients. A
   * worker that died still holds its jobs until their locks expire: it shows here with
   * `connected: false` while it does.
   */
  connected?: boolean;
  /** How long its connection has been open, in seconds (connected workers only). */
  connectedSeconds?: number;
  /** The queue's jobs it runs now. */
  running: number;
  /** How long the longest-running of them has run, in ms. */
  oldestRunningMs?: number;
}

/** What `cohort queue status` reports. */
export interface QueueStatus {
  queue: string;
  /** Where Redis is, without its password. */
  redis: string;
  /** Paused queues hand no job to any worker. */
  paused: boolean;
  counts: QueueCounts;
  workers: QueueWorkerStatus[];
  /** Why the connected workers could not be listed (a Redis that refuses CLIENT LIST), if so. */
  workersUnknown?: string;
}

/** Running jobs read for who runs them; past this many, the rest are only counted. */
const MAX_RUNNING_READ = 5000;

/**
 * Reads a queue's state from Redis: its job counts and its workers, for `cohort queue status`
 * and for a batch that watches whether any worker takes its jobs. It only reads; it adds,
 * moves and removes nothing.
 */
export class QueueInspector {
  readonly #queue: Queue;
  readonly #client: Redis;
  readonly #name: string;
  readonly #prefix: string;
  readonly #where: string;
  #lastError: string | undefined;

  private constructor(client: Redis, options: InspectorOptions) {
    this.#client = client;
    this.#name = options.name ?? DEFAULT_QUEUE_NAME;
    this.#prefix = options.prefix ?? DEFAULT_QUEUE_PREFIX;
    this.#where = describeRedis(options.url);
    client.on('error', (error: Error) => {
      this.#lastError = plainError(error);
    });
    this.#queue = new Queue(this.#name, { connection: client, prefix: this.#prefix });
    this.#queue.on('error', (error: Error) => {
      this.#lastError = plainError(error);
    });
  }

  /**
   * Connects and waits until Redis answers. With `once`, a single attempt: a refused or lost
   * connection fails at once (a command run by hand); a silent host fails after `timeoutMs`.
   * Without it, the connection comes back after Redis does, as the queue's own do; then only
   * `timeoutMs` ends the wait. Rejects with a `queue_unreachable` error saying where and why.
   */
  static async open(options: InspectorOptions & { once?: boolean }): Promise<QueueInspector> {
    const connection = redisOptionsOf(options.url);
    const client = new Redis({
      ...connection,
      ...(options.once
        ? { retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: options.timeoutMs }
        : {}),
    });
    const inspector = new QueueInspector(client, options);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timed out'>((resolve) => {
      timer = setTimeout(() => resolve('timed out'), options.timeoutMs);
    });
    try {
      const answered = Promise.all([client.ping(), inspector.#queue.waitUntilReady()]);
      if ((await Promise.race([answered, timedOut])) === 'timed out') {
        // Not awaited past the close: the cut connection ends it.
        answered.catch(() => {});
        throw new CohortError(
          'queue_unreachable',
          `Could not reach Redis at ${inspector.#where} within ${options.timeoutMs} ms${inspector.#lastError ? `: ${inspector.#lastError}` : ''}`,
        );
      }
    } catch (error) {
      await inspector.close(0);
      if (error instanceof CohortError) throw error;
      // A single attempt failed: the connection's own error says why better than the command's.
      throw new CohortError(
        'queue_unreachable',
        `Could not reach Redis at ${inspector.#where}: ${inspector.#lastError ?? plainError(error)}`,
      );
    } finally {
      clearTimeout(timer);
    }
    return inspector;
  }

  /** The queue's job counts by state. */
  async counts(): Promise<QueueCounts> {
    const counts = await this.#queue.getJobCounts(
      'waiting',
      'prioritized',
      'active',
      'completed',
      'failed',
      'delayed',
    );
    return {
      waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
      active: counts.active ?? 0,
      completed: counts.completed ?? 0,
      failed: counts.failed ?? 0,
      delayed: counts.delayed ?? 0,
    };
  }

  /**
   * The workers connected to the queue now, by name, with how long each connection has been
   * open (seconds). A worker keeps more than one connection: the longest-open one counts.
   * Throws when the Redis refuses CLIENT LIST (some managed services do).
   */
  async connectedWorkers(): Promise<Map<string, number>> {
    const clients = await this.#queue.getWorkers();
    // How BullMQ names a named worker's connection: PREFIX:BASE64(QUEUE):w:WORKER.
    const named = `${this.#prefix}:${Buffer.from(this.#name).toString('base64')}:w:`;
    const workers = new Map<string, number>();
    for (const client of clients) {
      const raw = client.rawname;
      // BullMQ's answer when the service refuses CLIENT LIST: no client, a sentence.
      if (raw === undefined) throw new Error(client.name ?? 'CLIENT LIST gave no client names');
      const name = raw.startsWith(named) ? raw.slice(named.length) : '(unnamed)';
      const age = Number(client.age ?? 0);
      workers.set(name, Math.max(workers.get(name) ?? 0, Number.isFinite(age) ? age : 0));
    }
    return workers;
  }

  /** Everything `cohort queue status` shows. */
  async status(): Promise<QueueStatus> {
    const [counts, paused, running] = await Promise.all([
      this.counts(),
      this.#queue.isPaused(),
      this.#running(),
    ]);
    let connected: Map<string, number> | undefined;
    let workersUnknown: string | undefined;
    try {
      connected = await this.connectedWorkers();
    } catch (error) {
      workersUnknown = plainError(error);
    }
    const now = Date.now();
    const names = new Set([...(connected?.keys() ?? []), ...running.keys()]);
    const workers = [...names].sort().map((name): QueueWorkerStatus => {
      const jobs = running.get(name);
      const age = connected?.get(name);
      return {
        name,
        ...(connected === undefined ? {} : { connected: age !== undefined }),
        ...(age === undefined ? {} : { connectedSeconds: age }),
        running: jobs?.count ?? 0,
        ...(jobs ? { oldestRunningMs: Math.max(0, now - jobs.since) } : {}),
      };
    });
    return {
      queue: this.#name,
      redis: this.#where,
      paused,
      counts,
      workers,
      ...(workersUnknown === undefined ? {} : { workersUnknown }),
    };
  }

  /**
   * The running jobs by the worker that took them (BullMQ keeps its name on the job), with when
   * the earliest of each started: one round trip for the ids, one for their two fields.
   */
  async #running(): Promise<Map<string, { count: number; since: number }>> {
    const ids = await this.#queue.getRanges(['active'], 0, MAX_RUNNING_READ - 1);
    const pipeline = this.#client.pipeline();
    for (const id of ids)
      pipeline.hmget(`${this.#prefix}:${this.#name}:${id}`, 'pb', 'processedOn');
    const replies = ids.length === 0 ? [] : ((await pipeline.exec()) ?? []);
    const running = new Map<string, { count: number; since: number }>();
    for (const [error, fields] of replies) {
      if (error) continue;
      const [by, processedOn] = fields as [string | null, string | null];
      // A job moved to active whose fields are gone (finished in between) is left out.
      if (by === null) continue;
      const since = Number(processedOn ?? Number.NaN);
      const seen = running.get(by);
      const started = Number.isFinite(since) ? since : Date.now();
      if (seen) {
        seen.count++;
        seen.since = Math.min(seen.since, started);
      } else running.set(by, { count: 1, since: started });
    }
    return running;
  }

  /** Lets go of the connection, waiting for Redis at most `graceMs`. */
  async close(graceMs = 1000): Promise<void> {
    await closeWithin([this.#queue], [this.#client], graceMs);
  }
}

/** Which queue to read, and how long to wait for Redis. */
export interface InspectorOptions {
  /** `redis://…`, `rediss://…`, or a unix socket path. */
  url: string;
  /** The queue's name (default `cohort`). */
  name?: string | undefined;
  /** BullMQ's key prefix (default `bull`). */
  prefix?: string | undefined;
  /** How long `open` waits for Redis to answer, in ms. */
  timeoutMs: number;
}
