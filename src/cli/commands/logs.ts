import { ROOT_ID } from '../../main/root-journal.js';
import { defaultLogRoot } from '../../main/run-folder.js';
import { parseAge } from '../../shared/duration.js';
import { UsageError } from '../../shared/errors.js';
import { isAgentId } from '../../shared/ids.js';
import { type ParsedValues, parseCommand, stringFlag } from '../flags.js';
import { pruneLogs } from '../log-prune.js';
import { exportAgent } from '../logs/export.js';
import { runsTable, summariseRun } from '../logs/list.js';
import { printReport, pruneJson } from '../logs/prune-report.js';
import { logRootOf, runIdOf } from '../logs/run-folders.js';
import { chosenRun, findAgent, NotFoundError, runsUnder } from '../logs/runs.js';
import { historyJson, renderHistory } from '../logs/show.js';
import { tailRun } from '../logs/tail.js';
import { note, safeLabel, stderr, stdout } from '../output.js';
import { handleInterrupts } from '../process.js';

export const LOGS_USAGE = `Usage: cohort logs list [--log-dir ROOT] [--json]
       cohort logs show ID [--run RUN] [--log-dir ROOT] [--json]
       cohort logs tail [--run RUN] [--log-dir ROOT] [--follow] [--json]
       cohort logs export ID --dir DIR [--run RUN] [--log-dir ROOT]
       cohort logs prune --older-than DURATION [--log-dir ROOT] [--dry-run] [--json]

Reads back the journals of runs, and removes old ones (docs/LOGS.md). Each run keeps one
journal in its own folder under the log root: ROOT/<time>-<pid>, or ROOT/RUN when it was
started with --run RUN. ROOT is --log-dir (default: $TMPDIR/cohort), as on every command; RUN
is a run folder's name, as list prints it and as a run names it on stderr when it starts.
Without --run, tail reads the newest run, and show and export the newest run that has agent ID.

  list    the runs under the root, newest first: when each started, its agents and their
          results by outcome, its size on disk, and whether a process that writes it is alive.
          --json prints one line {"type":"runs","root","runs":[…]}.
  show    agent ID's transcript: its meta, the prompt, each step's text, tool calls and results
          (long results clipped), the reply and the outcome. ID \`root\` is a \`cohort run\`
          session's root: its whole conversation. --json prints its history as one
          line {"id","inc","meta","messages","steps","result","keep","corrupt","startedAt",
          "endedAt"}.
  tail    the run's records, a line each: the time, the agent and what happened (started,
          a step's tool calls, then their answers, the result). --follow goes on printing what is appended,
          new segments included, until Ctrl-C or SIGTERM. --json prints the records themselves.
  export  writes DIR/ID/ for tools that read files: meta.json, transcript.jsonl (one
          Messages-API message per line), reply.md or reply.json (the whole reply) and
          result.json.
  prune   removes the run folders under the root whose newest file is older than DURATION
          (90m, 36h, 30d, 2w, or whole milliseconds), and prints each one removed and the bytes
          freed. Only folders named as cohort names them (<time>-<pid>) are touched (a run
          named with --run is yours to remove); a run whose process is still alive on this
          host is kept, symbolic links are never followed, and nothing outside ROOT is removed. --dry-run lists what would go and removes
          nothing. --json prints one line {"type":"prune",…}. To keep less in the first place,
          run with --logs failed or --logs none.

What is printed is redacted of secrets, and the journal's text is shown with terminal control
characters neutralised.

Exit codes:
  0  done (also when prune found nothing old enough, list no runs, or when Ctrl-C, SIGTERM or
     SIGHUP ends tail --follow)
  1  not found (no such agent or run, no run under the root), a journal of another version, or
     a folder prune could not remove
  2  a usage error: a bad flag, a malformed ID or RUN, a --log-dir that is not a folder, a
     missing or bad --older-than
  141  stdout closed before the end (\`| head\`)`;

const SUBCOMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  list: listCommand,
  show: showCommand,
  tail: tailCommand,
  export: exportCommand,
  prune: pruneCommand,
};

/** `cohort logs SUBCOMMAND`. */
export async function logsCommand(argv: string[]): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === '--help' || subcommand === '-h' || subcommand === 'help') {
    stdout().write(`${LOGS_USAGE}\n`);
    return 0;
  }
  const run =
    subcommand !== undefined && Object.hasOwn(SUBCOMMANDS, subcommand)
      ? SUBCOMMANDS[subcommand]
      : undefined;
  if (run === undefined) {
    throw new UsageError(
      `Expected a subcommand (${Object.keys(SUBCOMMANDS).join(', ')}), got ${subcommand === undefined ? 'nothing' : `\`${safeLabel(subcommand)}\``}. See cohort logs --help`,
    );
  }
  try {
    return await run(rest);
  } catch (error) {
    // A well-formed request the journal has no answer for: said plainly, exit 1.
    if (!(error instanceof NotFoundError)) throw error;
    note(`cohort logs: ${safeLabel(error.message)}`);
    return 1;
  }
}

const ROOT_OPTION = { 'log-dir': { type: 'string' } } as const;
const RUN_OPTION = { run: { type: 'string' } } as const;
const JSON_OPTION = { json: { type: 'boolean' } } as const;
const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const;

/**
 * A subcommand's flags and its positionals, `count` of them (an agent ID, or none); `--help`
 * prints the usage and gives undefined.
 */
function parseSubcommand(
  name: string,
  argv: string[],
  options: Parameters<typeof parseCommand>[1],
  wants: 'ID' | 'nothing',
): { values: ParsedValues; id: string } | undefined {
  const { values, positionals } = parseCommand(argv, { ...options, ...HELP_OPTION });
  if (values.help) {
    stdout().write(`${LOGS_USAGE}\n`);
    return undefined;
  }
  const got = positionals.map((word) => `\`${safeLabel(word)}\``).join(' ');
  if (wants === 'nothing') {
    if (positionals.length > 0) {
      throw new UsageError(`Expected no arguments after \`${name}\`, got ${got}`);
    }
    return { values, id: '' };
  }
  if (positionals.length !== 1) {
    throw new UsageError(
      `Expected one agent ID after \`${name}\` (ag_ and 12 characters, as a result's "id", or \`root\` for a session's root), got ${positionals.length === 0 ? 'nothing' : got}`,
    );
  }
  const id = positionals[0]!;
  if (!isAgentId(id) && id !== ROOT_ID) {
    throw new UsageError(
      `Expected an agent ID (ag_ and 12 characters of a-z and 2-7, as a result's "id", or \`root\` for a session's root), got ${got}`,
    );
  }
  return { values, id };
}

async function listCommand(argv: string[]): Promise<number> {
  const parsed = parseSubcommand('list', argv, { ...ROOT_OPTION, ...JSON_OPTION }, 'nothing');
  if (!parsed) return 0;
  const root = logRootOf(parsed.values);
  const runs = await Promise.all((await runsUnder(root)).map(summariseRun));
  if (parsed.values.json) {
    stdout().write(`${JSON.stringify({ type: 'runs', root, runs })}\n`);
  } else if (runs.length === 0) {
    note(`cohort logs: no runs under ${safeLabel(root)}`);
  } else stdout().write(`${runsTable(runs)}\n`);
  return closedCode();
}

async function showCommand(argv: string[]): Promise<number> {
  const options = { ...ROOT_OPTION, ...RUN_OPTION, ...JSON_OPTION };
  const parsed = parseSubcommand('show', argv, options, 'ID');
  if (!parsed) return 0;
  const { values, id } = parsed;
  const { run, history } = await findAgent(logRootOf(values), runIdOf(values), id);
  stdout().write(values.json ? `${historyJson(history)}\n` : renderHistory(history, run));
  return closedCode();
}

async function tailCommand(argv: string[]): Promise<number> {
  const options = {
    ...ROOT_OPTION,
    ...RUN_OPTION,
    ...JSON_OPTION,
    follow: { type: 'boolean' },
  } as const;
  const parsed = parseSubcommand('tail', argv, options, 'nothing');
  if (!parsed) return 0;
  const { values } = parsed;
  const run = await chosenRun(logRootOf(values), runIdOf(values));
  const stop = new AbortController();
  // Following ends only when asked: a signal is its normal end (exit 0), as for cohort worker.
  const stopHandling = handleInterrupts({
    onSignal: (_signal, count) => {
      stop.abort();
      return count > 1 ? 'force' : 'handled';
    },
  });
  // Nobody reads any more (`| head -1`): stop following, quietly.
  stdout().onClosed(() => stop.abort());
  try {
    await tailRun({
      run,
      json: values.json === true,
      follow: values.follow === true,
      signal: stop.signal,
      write: (text) => stdout().write(text),
      warn: (line) => stderr().write(`${line}\n`),
    });
  } finally {
    stopHandling();
  }
  return closedCode();
}

async function exportCommand(argv: string[]): Promise<number> {
  const options = { ...ROOT_OPTION, ...RUN_OPTION, dir: { type: 'string' } } as const;
  const parsed = parseSubcommand('export', argv, options, 'ID');
  if (!parsed) return 0;
  const { values, id } = parsed;
  const into = stringFlag(values, 'dir');
  if (into === undefined) throw new UsageError('Expected `--dir DIR` to export into, got nothing');
  const { run, history } = await findAgent(logRootOf(values), runIdOf(values), id);
  const exported = await exportAgent(history, run, into);
  stdout().write(
    `cohort logs: exported ${id} from run ${safeLabel(run.id)} to ${safeLabel(exported.dir)} (${exported.files.join(', ')})\n`,
  );
  return closedCode();
}

/** 141 when stdout closed before the end (as `cohort run` says it), else 0. */
function closedCode(): number {
  return stdout().closed ? 141 : 0;
}

async function pruneCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, {
    'older-than': { type: 'string' },
    'log-dir': { type: 'string' },
    'dry-run': { type: 'boolean' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    stdout().write(`${LOGS_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(
      `Expected no arguments after \`prune\`, got ${positionals.map((word) => `\`${safeLabel(word)}\``).join(' ')}`,
    );
  }
  const olderThan = values['older-than'];
  if (typeof olderThan !== 'string') {
    throw new UsageError('Expected `--older-than DURATION` (like 36h or 30d), got nothing');
  }
  const report = pruneLogs({
    root: stringFlag(values, 'log-dir') ?? defaultLogRoot(),
    olderThanMs: parseAge(olderThan, '--older-than'),
    dryRun: values['dry-run'] === true,
  });
  if (values.json) stdout().write(`${JSON.stringify(pruneJson(report))}\n`);
  else printReport(report, olderThan);
  for (const failure of report.failed) {
    note(`cohort logs: could not remove ${safeLabel(failure.path)}: ${failure.error}`);
  }
  return report.failed.length === 0 ? 0 : 1;
}
