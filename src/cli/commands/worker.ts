import { ENGINE_FIELDS } from '../../main/engine-options.js';
import {
  checkQueueName,
  checkQueueUrl,
  describeRedis,
} from '../../main/runners/queue/connection.js';
import {
  DEFAULT_QUEUE_NAME,
  QUEUE_WORKER_FIELDS as WORKER,
} from '../../main/runners/queue/options.js';
import { DEFAULT_MAX_DELIVERIES, QueueWorker } from '../../main/runners/queue/worker.js';
import { SpawnObservers } from '../../main/spawn-observer.js';
import { formatDuration } from '../../shared/duration.js';
import { UsageError } from '../../shared/errors.js';
import { GOVERNOR_FIELDS } from '../../shared/governor/options.js';
import { checkLogPolicy } from '../../shared/journal/policy.js';
import { defined, oneOf } from '../../shared/option-schema.js';
import { DASHBOARD_FLAGS, dashboardFlags, startDashboard } from '../dashboard-flags.js';
import {
  type CliFlag,
  choiceFlag,
  durationFlag,
  flagOf,
  HELP_FLAG,
  type HelpRow,
  helpLines,
  type ParsedValues,
  parseCommand,
  parseOptions,
  stringFlag,
  wholeNumberFlag,
} from '../flags.js';
import { journalNote, LOG_ROOT_FLAG, newRunFolder, RUN_FLAG } from '../logs/run-folders.js';
import { note, safeText, stdout } from '../output.js';
import { handleInterrupts } from '../process.js';
import { governorFlags, governorRow, noteWarning } from './common.js';
import { EXIT_CODES_HELP } from './help.js';

/** How long running jobs may finish after a stop signal, unless `--drain-timeout` says. */
const DEFAULT_DRAIN_MS = 10_000;

const DRAIN_TIMEOUT_FLAG: CliFlag = {
  flag: '--drain-timeout',
  arg: 'DURATION',
  help: `on a stop signal, how long running jobs may finish (default ${formatDuration(DEFAULT_DRAIN_MS)})`,
};
const SHARED_LIMITS_FLAG = oneOf(['on', 'off'], 'on or off', {
  flag: '--shared-limits',
  arg: 'on|off',
  help: "lease the account's limits from buckets in Redis shared by every\nworker (default on); off paces each worker alone (comparisons)",
});
const QUIET_FLAG: CliFlag = { flag: '--quiet', help: 'no progress lines on stderr' };

/**
 * `cohort worker`'s flags, in the order its help lists them. Those it shares with the engine
 * commands are the same fields, some described in words of the worker's own.
 */
const WORKER_FLAGS: readonly HelpRow[] = [
  { flags: [WORKER.url], help: 'the Redis holding the queue (required)' },
  {
    flags: [WORKER.name],
    help: `the queue (default ${DEFAULT_QUEUE_NAME}); producers use the same name`,
  },
  ENGINE_FIELDS.threads,
  ENGINE_FIELDS.agentsPerThread,
  WORKER.concurrency,
  WORKER.mcpConfig,
  LOG_ROOT_FLAG,
  RUN_FLAG,
  WORKER.logs,
  DRAIN_TIMEOUT_FLAG,
  WORKER.connectTimeoutMs,
  WORKER.stalledIntervalMs,
  WORKER.lockDurationMs,
  {
    flags: [WORKER.maxDeliveries],
    help: `deliveries of a job whose workers keep dying before it fails\n(default ${DEFAULT_MAX_DELIVERIES})`,
  },
  governorRow("this worker's rate-limit governor (see cohort help batch)"),
  GOVERNOR_FIELDS.state,
  SHARED_LIMITS_FLAG,
  QUIET_FLAG,
  ...DASHBOARD_FLAGS,
  HELP_FLAG,
];

export const WORKER_USAGE = `Usage: cohort worker --queue REDIS [options]

Takes agent jobs from a queue in Redis and runs them on this machine's worker threads, many to a
thread, under the reply contract; their results go back through the queue to whoever added them
(\`cohort batch --queue\`, \`cohort run --queue\`, or Engine.start({ queue })). Start one on each
machine of a fleet; see docs/SCALE-OUT.md. \`cohort queue status\` lists the queue's workers.

REDIS is redis://[:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS), or a unix socket path.
The API key comes from this machine's ANTHROPIC_API_KEY; the model and base URL from each job.
Tool modules and the workspace a job names must exist at the same paths here; a job's MCP
tools are called on this worker's own servers (--mcp-config: give it the producer's file).
The agents it runs are journaled on this machine, in a run folder under --log-dir (stderr
names it at start); \`cohort logs\` reads it back here.

SIGTERM, SIGINT or SIGHUP drains: no new job is taken, the running ones get --drain-timeout to
finish, the rest go back to the queue (another worker resumes them from their last step), and
the worker exits 0. A second signal hands every running job back at once.

Options:
${helpLines(WORKER_FLAGS, 28)}
Durations: 500ms, 2s, 5m, 1h, or whole milliseconds.
${EXIT_CODES_HELP}
  0  drained after a stop signal
  1  a fault: Redis could not be reached at start
  2  a usage error: a bad or missing flag, or an MCP server that cannot start`;

const OPTIONS = parseOptions(WORKER_FLAGS);

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
  const url = stringFlag(values, WORKER.url);
  if (url === undefined) throw new UsageError('Expected `--queue REDIS`, got nothing');
  checkQueueUrl('--queue', url);
  const name = stringFlag(values, WORKER.name) ?? DEFAULT_QUEUE_NAME;
  checkQueueName('--queue-name', name);
  const threads = wholeNumberFlag(values, ENGINE_FIELDS.threads);
  const agentsPerThread = wholeNumberFlag(values, ENGINE_FIELDS.agentsPerThread);
  const concurrency = wholeNumberFlag(values, WORKER.concurrency);
  const mcpConfig = values['mcp-config'] as string[] | undefined;
  const logs = checkLogPolicy('--logs', values.logs);
  const drainMs = durationFlag(values, DRAIN_TIMEOUT_FLAG) ?? DEFAULT_DRAIN_MS;
  const connectTimeoutMs = positive(values, WORKER.connectTimeoutMs);
  const stalledIntervalMs = positive(values, WORKER.stalledIntervalMs);
  const lockDurationMs = positive(values, WORKER.lockDurationMs);
  const maxDeliveries = wholeNumberFlag(values, WORKER.maxDeliveries);
  const quiet = values.quiet === true;
  const shared = choiceFlag(values, SHARED_LIMITS_FLAG);
  const dashboardChoice = dashboardFlags(values);
  // Workers of one machine may share a run folder (`--run`): each writes segments of its own.
  const logDir = newRunFolder(values);
  const stop = new AbortController();
  let worker: QueueWorker | undefined;
  handleInterrupts({
    onSignal: (_signal, count) => {
      if (count > 1) worker?.handBackNow();
      stop.abort();
      return 'handled';
    },
  });
  // The dashboard listens before the worker takes a job: every job shows, and a port in use
  // stops it before any is taken. A cancel on a worker's page would not reach the producer,
  // whose own dashboard cancels.
  const relay = new SpawnObservers();
  const dashboard = dashboardChoice
    ? await startDashboard(
        {
          observe: (observer) => relay.add(observer),
          get governor() {
            return worker?.governor;
          },
          logDir,
        },
        dashboardChoice,
        'worker',
        { cancel: false },
      )
    : undefined;
  worker = await startWorker(
    defined({
      url,
      name,
      logDir,
      drainMs,
      threads,
      agentsPerThread,
      concurrency,
      mcpConfig,
      logs,
      connectTimeoutMs,
      stalledIntervalMs,
      lockDurationMs,
      maxDeliveries,
      governor: governorFlags(values),
      sharedLimits: shared === 'off' ? false : undefined,
      onWarning: noteWarning,
      ...(dashboard ? { observer: relay } : {}),
    }),
  );
  if (!quiet) {
    note(
      `cohort worker ${worker.name}: taking jobs from queue ${safeText(name)} at ${describeRedis(url)}`,
    );
    note(journalNote(logDir));
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
  await dashboard?.close();
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

function positive(values: ParsedValues, flag: CliFlag): number | undefined {
  const ms = durationFlag(values, flag);
  if (ms === 0) {
    const name = flagOf(flag);
    throw new UsageError(
      `Expected \`${name}\` to be at least 1ms, got \`${String(values[name.slice(2)])}\``,
    );
  }
  return ms;
}
