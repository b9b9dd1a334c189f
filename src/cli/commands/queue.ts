import { checkQueueName, checkQueueUrl } from '../../main/runners/queue/connection.js';
import {
  QueueInspector,
  type QueueStatus,
  type QueueWorkerStatus,
} from '../../main/runners/queue/inspector.js';
import { DEFAULT_QUEUE_NAME, QUEUE_FIELDS } from '../../main/runners/queue/options.js';
import { clockText, formatDuration } from '../../shared/duration.js';
import { CohortError, UsageError } from '../../shared/errors.js';
import {
  type CliFlag,
  durationFlag,
  HELP_FLAG,
  type HelpRow,
  helpLines,
  parseCommand,
  parseOptions,
  stringFlag,
} from '../flags.js';
import { safeLabel, stdout } from '../output.js';
import { workerCommand } from '../queue-watch.js';
import { EXIT_CODES_HELP } from './help.js';

/** A status is asked for by hand: a Redis that does not answer is said soon. */
const DEFAULT_CONNECT_TIMEOUT_MS = 3000;

const CONNECT_TIMEOUT_FLAG: CliFlag = {
  flag: '--connect-timeout',
  arg: 'DURATION',
  help: `how long to wait for a Redis that does not answer (default ${formatDuration(DEFAULT_CONNECT_TIMEOUT_MS)});\na refused connection fails at once`,
};
const JSON_FLAG: CliFlag = { flag: '--json', help: 'one JSON object on stdout' };

/** `cohort queue status`'s flags, in the order its help lists them. */
const STATUS_FLAGS: readonly HelpRow[] = [
  { flags: [QUEUE_FIELDS.url], help: 'the Redis holding the queue (required)' },
  {
    flags: [QUEUE_FIELDS.name],
    help: `the queue (default ${DEFAULT_QUEUE_NAME}), as its producers and workers name it`,
  },
  CONNECT_TIMEOUT_FLAG,
  JSON_FLAG,
  HELP_FLAG,
];

export const QUEUE_USAGE = `Usage: cohort queue status --queue REDIS [--queue-name NAME] [--json]

Shows a queue that \`cohort batch|run|agent --queue\` put jobs on and \`cohort worker\` processes
take them from (docs/SCALE-OUT.md): its jobs by state (waiting, active, completed, failed, and
delayed when there are any) and its workers, each by its name HOST/PID, with the jobs it runs now
and for how long the oldest has run. A worker that died still holds its jobs until their locks
expire (--lock-duration of the workers): it is listed as not connected while it does. The status
is only read: nothing in the queue is changed.

REDIS is redis://[:PASSWORD@]HOST[:PORT][/DB], rediss://… (TLS), or a unix socket path; a
password is never printed.

--json prints one line {"type":"queue-status","queue","redis","paused","counts":{"waiting",
"active","completed","failed","delayed"},"workers":[{"name","connected","connectedSeconds",
"running","oldestRunningMs"}]}; when the Redis refuses to list its clients, "connected" is left
out and "workersUnknown" says why.

Options:
${helpLines(STATUS_FLAGS, 28)}
Durations: 500ms, 2s, 5m, 1h, or whole milliseconds.
${EXIT_CODES_HELP}
  0  the status was read
  2  a usage error: a bad or missing flag, or a Redis that could not be reached`;

const OPTIONS = parseOptions(STATUS_FLAGS);

/** `cohort queue SUBCOMMAND`: only `status` so far. */
export async function queueCommand(argv: string[]): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === '--help' || subcommand === '-h' || subcommand === 'help') {
    stdout().write(`${QUEUE_USAGE}\n`);
    return 0;
  }
  if (subcommand !== 'status') {
    throw new UsageError(
      `Expected a subcommand (status), got ${subcommand === undefined ? 'nothing' : `\`${safeLabel(subcommand)}\``}. See cohort queue --help`,
    );
  }
  return statusCommand(rest);
}

async function statusCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, OPTIONS);
  if (values.help) {
    stdout().write(`${QUEUE_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(
      `Expected no arguments after \`status\` (the queue is given with --queue), got \`${safeLabel(positionals[0]!)}\``,
    );
  }
  const url = stringFlag(values, QUEUE_FIELDS.url);
  if (url === undefined) throw new UsageError('Expected `--queue REDIS`, got nothing');
  checkQueueUrl('--queue', url);
  const name = stringFlag(values, QUEUE_FIELDS.name) ?? DEFAULT_QUEUE_NAME;
  checkQueueName('--queue-name', name);
  const timeoutMs = durationFlag(values, CONNECT_TIMEOUT_FLAG) ?? DEFAULT_CONNECT_TIMEOUT_MS;
  if (timeoutMs === 0) {
    throw new UsageError(
      `Expected \`--connect-timeout\` to be at least 1ms, got \`${String(values['connect-timeout'])}\``,
    );
  }
  const status = await readStatus({ url, name, timeoutMs });
  if (values.json) stdout().write(`${JSON.stringify({ type: 'queue-status', ...status })}\n`);
  else stdout().write(`${describeStatus(status, { url, name }).join('\n')}\n`);
  return 0;
}

/**
 * Reads the status in one connection. A Redis that cannot be reached is the argument's fault
 * here, as an unreadable file would be: the command has nothing else to do.
 */
async function readStatus(options: {
  url: string;
  name: string;
  timeoutMs: number;
}): Promise<QueueStatus> {
  let inspector: QueueInspector;
  try {
    inspector = await QueueInspector.open({ ...options, once: true });
  } catch (error) {
    if (error instanceof CohortError && error.code === 'queue_unreachable') {
      throw new UsageError(error.message);
    }
    throw error;
  }
  try {
    return await inspector.status();
  } finally {
    await inspector.close();
  }
}

/** The status in lines, for a person. */
function describeStatus(status: QueueStatus, queue: { url: string; name: string }): string[] {
  const paused = status.paused ? ' (paused: no worker takes a job until it is resumed)' : '';
  const { waiting, active, completed, failed, delayed } = status.counts;
  const lines = [
    `queue ${safeLabel(status.queue)} at ${safeLabel(status.redis)}${paused}`,
    `jobs: ${waiting} waiting, ${active} active, ${completed} completed, ${failed} failed${delayed > 0 ? `, ${delayed} delayed` : ''}`,
  ];
  const connected = status.workers.filter((worker) => worker.connected !== false).length;
  if (status.workersUnknown !== undefined) {
    lines.push(
      `workers: not listed (the Redis refuses CLIENT LIST: ${safeLabel(status.workersUnknown)})${status.workers.length > 0 ? '; those running jobs:' : ''}`,
    );
  } else if (status.workers.length === 0) {
    lines.push(`workers: none connected; start one with: ${safeLabel(workerCommand(queue))}`);
  } else lines.push(`workers: ${connected} connected`);
  const width = Math.max(0, ...status.workers.map((worker) => safeLabel(worker.name).length));
  for (const worker of status.workers) lines.push(`  ${describeWorker(worker, width)}`);
  return lines;
}

/** `vm/4211  running 2 jobs (the oldest for 14s), connected for 3m12s`, its name padded to `width`. */
function describeWorker(worker: QueueWorkerStatus, width: number): string {
  const doing =
    worker.running === 0
      ? 'idle'
      : `running ${worker.running} job${worker.running === 1 ? '' : 's'} (the oldest for ${clockText((worker.oldestRunningMs ?? 0) / 1000)})`;
  const link =
    worker.connected === false
      ? 'not connected: it stopped or lost Redis, and its jobs go back to the queue once their locks expire'
      : worker.connectedSeconds === undefined
        ? ''
        : `connected for ${clockText(worker.connectedSeconds)}`;
  return `${safeLabel(worker.name).padEnd(width)}  ${doing}${link === '' ? '' : `, ${link}`}`;
}

/** `14s`, `3m12s`, `2h05m`. */
