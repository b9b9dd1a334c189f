import path from 'node:path';
import { defaultLogRoot, runFolderName } from '../../main/run-folder.js';
import {
  checkQueueName,
  checkQueueUrl,
  describeRedis,
} from '../../main/runners/queue/connection.js';
import { DEFAULT_QUEUE_NAME } from '../../main/runners/queue/options.js';
import { DEFAULT_MAX_DELIVERIES, QueueWorker } from '../../main/runners/queue/worker.js';
import { checkLogPolicy } from '../../shared/agent-log.js';
import { UsageError } from '../../shared/errors.js';
import { durationFlag, intFlag, parseCommand, stringFlag } from '../flags.js';
import { note, safeText, stdout } from '../output.js';
import { handleInterrupts } from '../process.js';
import { governorFlagsFrom } from './common.js';
import { EXIT_CODES_HELP } from './help.js';

export const WORKER_USAGE = `Usage: cohort worker --queue REDIS [options]

Takes agent jobs from a queue in Redis and runs them on this machine's worker threads, many to a
thread, under the reply contract; their results go back through the queue to whoever added them
(\`cohort batch --queue\`, \`cohort run --queue\`, or Engine.start({ queue })). Start one on each
machine of a fleet; see docs/SCALE-OUT.md.

REDIS is redis://[:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS), or a unix socket path.
The API key comes from this machine's ANTHROPIC_API_KEY; the model and base URL from each job.
Tool modules and the workspace a job names must exist at the same paths here.

SIGTERM, SIGINT or SIGHUP drains: no new job is taken, the running ones get --drain-timeout to
finish, the rest go back to the queue (another worker resumes them from their last step), and
the worker exits 0. A second signal hands every running job back at once.

Options:
  --queue REDIS               the Redis holding the queue (required)
  --queue-name NAME           the queue (default ${DEFAULT_QUEUE_NAME}); producers use the same name
  --threads N                 worker threads (default: one per core)
  --agents-per-thread N       children per thread (default 2048)
  --concurrency N             jobs taken at once (default: threads × agents per thread, at most 1000)
  --log-dir DIR               root of the agents' log folders, kept here (default: a new folder
                              under the OS temp dir)
  --logs all|failed|none      overrides each job's own policy for the folders kept here
  --drain-timeout DURATION    on a stop signal, how long running jobs may finish (default 10s)
  --connect-timeout DURATION  how long to wait for Redis at start before giving up (default 10s)
  --stalled-interval DURATION how often workers look for jobs of dead workers (default 30s)
  --lock-duration DURATION    how long a job's lock lasts unrenewed (default 30s): a worker
                              silent that long is taken for dead and its jobs are redelivered
  --max-deliveries N          deliveries of a job whose workers keep dying before it fails
                              (default ${DEFAULT_MAX_DELIVERIES})
  --rpm N, --itpm N, --otpm N, --max-concurrency N, --governor on|off
                              this worker's rate-limit governor (see cohort help batch)
  --shared-limits on|off      lease the account's limits from buckets in Redis shared by every
                              worker (default on); off paces each worker alone (comparisons)
  --quiet                     no progress lines on stderr
  -h, --help                  this help
Durations: 500ms, 2s, 5m, 1h, or whole milliseconds.
${EXIT_CODES_HELP}
  0  drained after a stop signal
  1  a fault: Redis could not be reached at start
  2  a usage error: a bad or missing flag`;

const OPTIONS = {
  queue: { type: 'string' },
  'queue-name': { type: 'string' },
  threads: { type: 'string' },
  'agents-per-thread': { type: 'string' },
  concurrency: { type: 'string' },
  'log-dir': { type: 'string' },
  logs: { type: 'string' },
  'drain-timeout': { type: 'string' },
  'connect-timeout': { type: 'string' },
  'stalled-interval': { type: 'string' },
  'lock-duration': { type: 'string' },
  'max-deliveries': { type: 'string' },
  governor: { type: 'string' },
  rpm: { type: 'string' },
  itpm: { type: 'string' },
  otpm: { type: 'string' },
  'max-concurrency': { type: 'string' },
  'shared-limits': { type: 'string' },
  quiet: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** How often a busy worker prints a progress line. */
const PROGRESS_EVERY_MS = 5000;

export async function workerCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, OPTIONS);
  if (values.help) {
    stdout().write(`${WORKER_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(
      `Expected no arguments (the queue is given with --queue), got \`${safeText(positionals[0]!)}\``,
    );
  }
  const url = stringFlag(values, 'queue');
  if (url === undefined) throw new UsageError('Expected `--queue REDIS`, got nothing');
  checkQueueUrl('--queue', url);
  const name = stringFlag(values, 'queue-name') ?? DEFAULT_QUEUE_NAME;
  checkQueueName('--queue-name', name);
  const threads = intFlag(values, 'threads', 1, 256);
  const agentsPerThread = intFlag(values, 'agents-per-thread', 1);
  const concurrency = intFlag(values, 'concurrency', 1, 100_000);
  const logs = checkLogPolicy('--logs', values.logs);
  const drainMs = durationFlag(values, 'drain-timeout') ?? 10_000;
  const connectTimeoutMs = positive(values, 'connect-timeout');
  const stalledIntervalMs = positive(values, 'stalled-interval');
  const lockDurationMs = positive(values, 'lock-duration');
  const maxDeliveries = intFlag(values, 'max-deliveries', 1, 100);
  const quiet = values.quiet === true;
  const shared = values['shared-limits'];
  if (shared !== undefined && shared !== 'on' && shared !== 'off') {
    throw new UsageError(`Expected \`--shared-limits\` to be on or off, got \`${String(shared)}\``);
  }
  const logDir = path.resolve(
    stringFlag(values, 'log-dir') ?? path.join(defaultLogRoot(), runFolderName()),
  );
  const stop = new AbortController();
  let worker: QueueWorker | undefined;
  handleInterrupts({
    onSignal: (_signal, count) => {
      if (count > 1) worker?.handBackNow();
      stop.abort();
      return 'handled';
    },
  });
  worker = await startWorker({
    url,
    name,
    logDir,
    drainMs,
    ...(threads === undefined ? {} : { threads }),
    ...(agentsPerThread === undefined ? {} : { agentsPerThread }),
    ...(concurrency === undefined ? {} : { concurrency }),
    ...(logs === undefined ? {} : { logs }),
    ...(connectTimeoutMs === undefined ? {} : { connectTimeoutMs }),
    ...(stalledIntervalMs === undefined ? {} : { stalledIntervalMs }),
    ...(lockDurationMs === undefined ? {} : { lockDurationMs }),
    ...(maxDeliveries === undefined ? {} : { maxDeliveries }),
    ...governorFlagsFrom(values),
    ...(shared === 'off' ? { sharedLimits: false } : {}),
  });
  if (!quiet) {
    note(
      `cohort worker ${worker.name}: taking jobs from queue ${safeText(name)} at ${describeRedis(url)}; logs in ${safeText(logDir)}`,
    );
  }
  const progress = quiet ? undefined : setInterval(() => report(worker!), PROGRESS_EVERY_MS);
  if (!stop.signal.aborted) {
    await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
  }
  if (!quiet) {
    note(
      `cohort worker: draining: ${worker.running} job(s) running get ${drainMs} ms to finish, then go back to the queue`,
    );
  }
  await worker.drain(drainMs);
  if (progress) clearInterval(progress);
  if (!quiet) note(`cohort worker: drained after ${worker.done} result(s)`);
  return 0;
}

/** Starts the worker; a Redis that cannot be reached is a plain fault, not a hang. */
async function startWorker(
  options: Parameters<typeof QueueWorker.start>[0] & { drainMs: number },
): Promise<QueueWorker> {
  const { drainMs: _drain, ...rest } = options;
  return QueueWorker.start(rest);
}

function report(worker: QueueWorker): void {
  note(`cohort worker: ${worker.running} running, ${worker.done} done`);
}

function positive(values: Record<string, unknown>, name: string): number | undefined {
  const ms = durationFlag(values as never, name);
  if (ms === 0) {
    throw new UsageError(
      `Expected \`--${name}\` to be at least 1ms, got \`${String(values[name])}\``,
    );
  }
  return ms;
}
