import { DEFAULT_MAX_DEPTH } from '../../../shared/child-spec.js';
import { formatDuration } from '../../../shared/duration.js';
import { UsageError } from '../../../shared/errors.js';
import { checkGovernorOptions, type GovernorOptions } from '../../../shared/governor/options.js';
import { LOG_POLICY } from '../../../shared/journal/policy.js';
import {
  boolean,
  checkedBy,
  checkOption,
  custom,
  type Defined,
  durationMs,
  type Field,
  type Fields,
  nonEmptyString,
  type OptionsOf,
  required,
  stringArray,
  wholeNumber,
} from '../../../shared/option-schema.js';
import type { AgentResult } from '../../../shared/result.js';
import type { EngineWarning } from '../../engine-options.js';
import type { SpawnObserver } from '../../spawn-observer.js';
import type { PoolOptions } from '../local/pool.js';
import { checkQueueName, checkQueueUrl, QUEUE_NAME, QUEUE_URL } from './connection.js';

export const DEFAULT_QUEUE_NAME = 'cohort';
export const DEFAULT_QUEUE_PREFIX = 'bull';
export const DEFAULT_RECONCILE_MS = 5000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

const RATE_LIMIT_FIELDS = {
  max: required(wholeNumber(1, Number.POSITIVE_INFINITY, { flag: '--queue-rate' })),
  // Unset, it is refused in words of its own; set, as any duration.
  durationMs: required(
    custom<number>(
      'a whole number of milliseconds',
      (value, name) => checkOption(name, durationMs(1), value) !== undefined,
      { flag: '--queue-rate' },
    ),
  ),
} as const satisfies Fields;

/** The fields of `queue`, the option that puts an engine's children on a queue. */
export const QUEUE_FIELDS = {
  /** `redis://…`, `rediss://…`, or a unix socket path. */
  url: required(
    custom<string>(QUEUE_URL, checkedBy(checkQueueUrl), {
      flag: '--queue',
      arg: 'REDIS',
      help: "run every child on `cohort worker` processes taking jobs from\nthis Redis (redis://…, rediss://…, or a socket path) instead of\non this machine's threads; see docs/SCALE-OUT.md",
    }),
  ),
  /** The BullMQ queue's name: workers started with the same name take its jobs. */
  name: custom<string>(QUEUE_NAME, checkedBy(checkQueueName), {
    default: DEFAULT_QUEUE_NAME,
    flag: '--queue-name',
    arg: 'NAME',
    help: `the queue's name (default ${DEFAULT_QUEUE_NAME})`,
  }),
  /** BullMQ's key prefix; `{cohort}` keeps a queue's keys in one Cluster slot. */
  prefix: custom<string>(QUEUE_NAME, checkedBy(checkQueueName), { default: DEFAULT_QUEUE_PREFIX }),
  /**
   * How often the producer checks its jobs still waiting for a result against Redis, in ms: a
   * completion it missed (events trimmed, a reconnect) or a job Redis forgot (a restart without
   * persistence), which it adds again.
   */
  reconcileMs: durationMs(100, { default: DEFAULT_RECONCILE_MS }),
  /** How long `Engine.start` waits to reach Redis, in ms. */
  connectTimeoutMs: durationMs(1, { default: DEFAULT_CONNECT_TIMEOUT_MS }),
  /**
   * BullMQ's global rate limit: at most `max` jobs start per `durationMs` across every worker of
   * the queue. A coarse bound on tasks; the workers' governors keep the account's per-request
   * and per-token limits through buckets they share in Redis.
   */
  rateLimit: {
    ...custom<{ max: number; durationMs: number }>(
      'an object `{ max, durationMs }`',
      (value) => typeof value === 'object' && value !== null,
      {
        flag: '--queue-rate',
        arg: 'N/DURATION',
        help: "at most N tasks start per DURATION across every worker (BullMQ's\nglobal rate limit, kept on the queue), e.g. 600/1m",
      },
    ),
    properties: RATE_LIMIT_FIELDS,
  },
} as const satisfies Fields;

/** Where an engine's children go in queue mode (`Engine.start({ queue })`, docs/SCALE-OUT.md). */
export type QueueOptions = OptionsOf<typeof QUEUE_FIELDS>;

/** The `queue` option itself: an object of `QUEUE_FIELDS`. */
export const QUEUE_OPTION: Field<QueueOptions> = {
  type: 'object',
  properties: QUEUE_FIELDS,
  expected: 'an object `{ url, name? }`',
};

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
  if ((options.maxDepth ?? DEFAULT_MAX_DEPTH) > 1) {
    throw new UsageError(
      `Expected \`maxDepth\` 1 with \`queue\` (children on workers do not spawn agents of their own yet), got ${options.maxDepth}`,
    );
  }
}

/**
 * What a queue worker is started with (`QueueWorker.start`, `cohort worker`), beside the pool's
 * own options. Its type and the worker command's flags come from these fields; `QueueWorker`
 * does not check them itself yet (the CLI checks each flag).
 */
export const QUEUE_WORKER_FIELDS = {
  url: QUEUE_FIELDS.url,
  name: QUEUE_FIELDS.name,
  prefix: QUEUE_FIELDS.prefix,
  /** Jobs taken at once (default: the pool's capacity, at most 1,000). */
  concurrency: wholeNumber(1, 100_000, {
    flag: '--concurrency',
    arg: 'N',
    help: 'jobs taken at once (default: threads × agents per thread, at most 1000)',
  }),
  /**
   * The run folder this worker journals its agents in, on this machine. `cohort worker` makes it
   * from `--log-dir ROOT` and `--run ID`, as the engine commands do.
   */
  logDir: required(nonEmptyString({ flag: '--log-dir' })),
  /** How often workers look for jobs whose worker died, in ms (BullMQ's `stalledInterval`). */
  stalledIntervalMs: durationMs(1, {
    flag: '--stalled-interval',
    arg: 'DURATION',
    help: 'how often workers look for jobs of dead workers (default 30s)',
  }),
  /** How long a job's lock lives without renewal, in ms (BullMQ's `lockDuration`). */
  lockDurationMs: durationMs(1, {
    flag: '--lock-duration',
    arg: 'DURATION',
    help: "how long a job's lock lasts unrenewed (default 30s): a worker\nsilent that long is taken for dead and its jobs are redelivered",
  }),
  /** Deliveries of a job whose workers keep dying before it fails (default 3). */
  maxDeliveries: wholeNumber(1, 100, { flag: '--max-deliveries', arg: 'N' }),
  governor: custom<GovernorOptions>('an object', (value) => {
    checkGovernorOptions(value);
    return true;
  }),
  /**
   * Whether this worker's governor also leases from the fleet's buckets in Redis (default true).
   * Off, each worker paces as if it were alone: for comparisons, not for a fleet on one account.
   */
  sharedLimits: boolean(),
  /**
   * `.mcp.json` files of MCP servers this worker starts for its jobs: a job's agent calls the
   * tools its producer listed (`mcp__NAME__TOOL`) on this worker's servers of those names, so
   * give every worker the producer's file (docs/TOOLS.md, "MCP servers").
   */
  mcpConfig: stringArray({
    flag: '--mcp-config',
    arg: 'FILE',
    help: "a .mcp.json file of MCP servers for this worker's jobs (repeatable);\ngive it the producer's file",
  }),
  /** Which log folders are kept here, over each job's own policy. */
  logs: { ...LOG_POLICY, help: "overrides each job's own policy for the records kept here" },
  /** How long `start` waits to reach Redis, in ms. */
  connectTimeoutMs: {
    ...QUEUE_FIELDS.connectTimeoutMs,
    flag: '--connect-timeout',
    arg: 'DURATION',
    help: `how long to wait for Redis at start before giving up (default ${formatDuration(DEFAULT_CONNECT_TIMEOUT_MS)})`,
  },
  /**
   * Called with each warning: the governor's state file is corrupt or cannot be written (as the
   * engine's `onWarning`; default: `process.emitWarning`).
   */
  onWarning: custom<(warning: EngineWarning) => void>(
    'a function',
    (value) => typeof value === 'function',
  ),
  /** Called with each result this worker hands back to the queue. */
  onResult: custom<(result: AgentResult) => void>(
    'a function',
    (value) => typeof value === 'function',
  ),
  /**
   * Told of each job's child from the first job on (a dashboard, `serveDashboard`), as
   * `observe` tells one added once the worker runs.
   */
  observer: custom<SpawnObserver>(
    'an object with a spawned method',
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      typeof (value as SpawnObserver).spawned === 'function',
  ),
} as const satisfies Fields;

/** What a queue worker is started with: the pool's options and `QUEUE_WORKER_FIELDS`. */
export type QueueWorkerOptions = PoolOptions & Defined<OptionsOf<typeof QUEUE_WORKER_FIELDS>>;
