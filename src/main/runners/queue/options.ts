import type { LogPolicy } from '../../../shared/agent-log.js';
import { expected, UsageError } from '../../../shared/errors.js';
import type { GovernorOptions } from '../../../shared/governor/types.js';
import type { AgentResult } from '../../../shared/result.js';
import { checkDurationMs } from '../../options.js';
import type { PoolOptions } from '../local/pool.js';
import { checkQueueName, checkQueueUrl } from './connection.js';

/** Where an engine's children go in queue mode (`Engine.start({ queue })`, docs/SCALE-OUT.md). */
export interface QueueOptions {
  /** `redis://…`, `rediss://…`, or a unix socket path. */
  url: string;
  /** The BullMQ queue's name (default `cohort`): workers started with the same name take its jobs. */
  name?: string;
  /** BullMQ's key prefix (default `bull`); `{cohort}` keeps a queue's keys in one Cluster slot. */
  prefix?: string;
  /**
   * How often the producer checks its jobs still waiting for a result against Redis, in ms
   * (default 5,000): a completion it missed (events trimmed, a reconnect) or a job Redis forgot
   * (a restart without persistence), which it adds again.
   */
  reconcileMs?: number;
  /** How long `Engine.start` waits to reach Redis, in ms (default 10,000). */
  connectTimeoutMs?: number;
  /**
   * BullMQ's global rate limit: at most `max` jobs start per `durationMs` across every worker of
   * the queue. A coarse bound on tasks; the workers' governors keep the account's per-request
   * and per-token limits through buckets they share in Redis.
   */
  rateLimit?: { max: number; durationMs: number };
}

export const DEFAULT_QUEUE_NAME = 'cohort';
export const DEFAULT_QUEUE_PREFIX = 'bull';
export const DEFAULT_RECONCILE_MS = 5000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Checks `queue` as `Engine.start` takes it; throws a UsageError naming the field. */
export function checkQueueOptions(name: string, value: unknown): QueueOptions | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw expected(name, 'an object `{ url, name? }`', value);
  }
  const options = value as Partial<QueueOptions>;
  checkQueueUrl(`${name}.url`, options.url);
  if (options.name !== undefined) checkQueueName(`${name}.name`, options.name);
  if (options.prefix !== undefined) checkQueueName(`${name}.prefix`, options.prefix);
  checkDurationMs(`${name}.reconcileMs`, options.reconcileMs, 100);
  checkDurationMs(`${name}.connectTimeoutMs`, options.connectTimeoutMs, 1);
  const rate = options.rateLimit as unknown;
  if (rate !== undefined) {
    if (typeof rate !== 'object' || rate === null) {
      throw expected(`${name}.rateLimit`, 'an object `{ max, durationMs }`', rate);
    }
    const { max, durationMs } = rate as { max?: unknown; durationMs?: unknown };
    if (typeof max !== 'number' || !Number.isInteger(max) || max < 1) {
      throw expected(`${name}.rateLimit.max`, 'a whole number from 1 and up', max);
    }
    checkDurationMs(`${name}.rateLimit.durationMs`, durationMs, 1);
    if (durationMs === undefined) {
      throw expected(`${name}.rateLimit.durationMs`, 'a whole number of milliseconds', durationMs);
    }
  }
  return options as QueueOptions;
}

/**
 * What queue mode cannot carry: a child on another machine has no bridge to this process, so it
 * can neither call host tools (functions living here) nor spawn agents of its own through it.
 */
export function checkQueueMode(options: { hostTools?: unknown[]; maxDepth?: number }): void {
  if ((options.hostTools?.length ?? 0) > 0) {
    throw new UsageError(
      'Expected no `hostTools` with `queue`: a child on another machine cannot call a function that lives in this process; give it a tool module (`toolModules`) instead',
    );
  }
  if ((options.maxDepth ?? 1) > 1) {
    throw new UsageError(
      `Expected \`maxDepth\` 1 with \`queue\` (children on workers do not spawn agents of their own yet), got ${options.maxDepth}`,
    );
  }
}

/** What `cohort worker` starts a queue worker with (`QueueWorker.start`). */
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
