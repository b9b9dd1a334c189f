import { existsSync } from 'node:fs';
import { UsageError } from '../../shared/errors.js';
import {
  type CliFlag,
  flagOf,
  HELP_FLAG,
  helpLines,
  type ParsedValues,
  parseCommand,
  parseOptions,
  stringFlag,
} from '../flags.js';
import { note, safeLabel, stdout } from '../output.js';
import { exportResults } from '../results/read/export.js';
import { listFailed } from '../results/read/failed.js';
import { DEFAULT_FIELDS, parseFields } from '../results/read/fields.js';
import { formatNamed, jsonLine } from '../results/read/formats.js';
import { type ReadReport, tornNote } from '../results/read/reader.js';
import { findTask, lineJson, renderTask } from '../results/read/show.js';
import { fileSink, type Sink, stdoutSink } from '../results/read/sink.js';

const JSON_FLAG: CliFlag = {
  flag: '--json',
  help: 'for scripts: status as one JSON object, failed as JSON lines,\nexport as --format jsonl, show as the line itself',
};
const FORMAT_FLAG: CliFlag = {
  flag: '--format',
  arg: 'csv|jsonl|md',
  help: 'export: the table format (default csv)',
};
const FIELDS_FLAG: CliFlag = {
  flag: '--fields',
  arg: 'A,B.C',
  help: `export: the columns, a line's fields by name, nested ones by dotted path\n(usage.costUsd, value.title); default:\n${DEFAULT_FIELDS}`,
};
const TASKS_FLAG: CliFlag = {
  flag: '--tasks',
  arg: 'TASKS.jsonl',
  help: 'export: a row per task of this tasks file, in its order (`-` for stdin);\na task with no result line yet gets an empty outcome',
};
const OUT_FLAG: CliFlag = {
  flag: '--out',
  short: 'o',
  arg: 'OUT',
  help: 'export: write the table to OUT instead of stdout (replaced whole at the end)',
};
const FLAGS: readonly CliFlag[] = [
  JSON_FLAG,
  FORMAT_FLAG,
  FIELDS_FLAG,
  TASKS_FLAG,
  OUT_FLAG,
  HELP_FLAG,
];
const OPTIONS = parseOptions(FLAGS);

/** `cohort results --help`. */
export const RESULTS_USAGE = `Usage: cohort results FILE status [--json]
       cohort results FILE failed [--json]
       cohort results FILE export [--format csv|jsonl|md] [--fields A,B.C] [--tasks TASKS.jsonl]
                                  [--out OUT]
       cohort results FILE show ID [--json]

Reads back a results file, as \`cohort batch --out FILE\` writes it (one line per task: the
AgentResult plus "taskId"; docs/RESULTS.md). It only reads: it takes no lock and never changes
the file, so it can read a file a batch is still appending to. An incomplete last line (a write
under way) is skipped with a note; a task with more than one line counts once, by its first
line, as a rerun of the batch keeps it.

  status  the tasks and lines; outcomes with failures by code; tokens (input, the prompt
          cache's reads and writes, output), steps, dollars and the cache's hit rate, as the
          batch's summary words them; the agents' time added up and the longest; how many
          tasks a rerun runs again, and any repeated or incomplete lines. --json prints one
          object {"type":"status","file","lines","tasks","counts","failures","spent",
          "elapsedMs","rerun","duplicates","duplicateIds","tornBytes"?}.
  failed  one line per failed task, in file order: ID [CODE]: REASON, the reason on one line
          and cut at 160 characters. --json prints a JSON line {"taskId","id","code","reason"}
          each, the reason whole.
  export  a table with a row per task: csv (RFC 4180), jsonl (an object per row, keyed by
          field name, null where a line has no such field) or md (a Markdown table). In file
          order, or the tasks file's order with --tasks.
  show    task ID's result, readable; --json prints its line.

Options:
${helpLines(FLAGS, 24)}

Exit codes:
  0  done
  1  FILE changed while it was read (a batch starting on it compacts it in place: read it
     again), or a file could not be read or written
  2  a usage error: a missing FILE, a file that is not a results file, an unknown
     subcommand, field, format or ID, a bad --tasks file, a bad flag, an --out that is
     a file it reads
  141  stdout closed before the end (\`| head\`)`;

type Subcommand = (file: string, args: string[], values: ParsedValues) => Promise<number>;

/** The subcommands, with the flags each takes beside --help. */
const SUBCOMMANDS: Record<string, { run: Subcommand; flags: readonly CliFlag[] }> = {
  status: { run: statusCommand, flags: [JSON_FLAG] },
  failed: { run: failedCommand, flags: [JSON_FLAG] },
  export: {
    run: exportCommand,
    flags: [JSON_FLAG, FORMAT_FLAG, FIELDS_FLAG, TASKS_FLAG, OUT_FLAG],
  },
  show: { run: showCommand, flags: [JSON_FLAG] },
};

/** `cohort results FILE SUBCOMMAND`. */
export async function resultsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, OPTIONS);
  if (values.help || positionals[0] === 'help') {
    stdout().write(`${RESULTS_USAGE}\n`);
    return 0;
  }
  const [file, name, ...args] = positionals;
  const names = Object.keys(SUBCOMMANDS).join(', ');
  if (file === undefined) {
    throw new UsageError(
      `Expected a results FILE and a subcommand (${names}), got nothing. See cohort results --help`,
    );
  }
  const subcommand =
    name !== undefined && Object.hasOwn(SUBCOMMANDS, name) ? SUBCOMMANDS[name] : undefined;
  if (subcommand === undefined) {
    // `cohort results status r.jsonl`: the file comes first.
    const swapped = Object.hasOwn(SUBCOMMANDS, file) && !existsSync(file);
    throw new UsageError(
      `Expected a subcommand after FILE (${names}), got ${name === undefined ? 'nothing' : `\`${safeLabel(name)}\``}.${swapped ? ` The file comes first: cohort results ${safeLabel(name ?? 'FILE')} ${safeLabel(file)}.` : ''} See cohort results --help`,
    );
  }
  refuseOtherFlags(name!, values, subcommand.flags);
  return subcommand.run(file, args, values);
}

/** A flag another subcommand takes is refused, not silently ignored. */
function refuseOtherFlags(name: string, values: ParsedValues, allowed: readonly CliFlag[]): void {
  const own = new Set(allowed.map((flag) => flag.flag));
  for (const flag of FLAGS) {
    if (flag === HELP_FLAG || own.has(flag.flag)) continue;
    if (values[flagOf(flag).slice(2)] !== undefined) {
      throw new UsageError(
        `Expected only ${[...own].join(', ')} after \`${name}\`, got \`${flag.flag}\`. See cohort results --help`,
      );
    }
  }
}

function noArguments(name: string, args: string[]): void {
  if (args.length > 0) {
    throw new UsageError(
      `Expected nothing after \`${name}\`, got ${args.map((word) => `\`${safeLabel(word)}\``).join(' ')}`,
    );
  }
}

async function statusCommand(file: string, args: string[], values: ParsedValues): Promise<number> {
  noArguments('status', args);
  // Loaded only here: the batch's tally brings its progress view along.
  const { resultsStatus, statusText } = await import('../results/read/status.js');
  const read = resultsStatus(file);
  stdout().write(values.json ? `${jsonLine(read.status)}\n` : statusText(read));
  return closedCode();
}

async function failedCommand(file: string, args: string[], values: ParsedValues): Promise<number> {
  noArguments('failed', args);
  const sink = stdoutSink();
  const { report, failed } = listFailed(file, { json: values.json === true, write: sink.write });
  sink.close();
  if (failed === 0) note(`cohort results: no failed task in ${report.label}`);
  noteReport(report);
  return closedCode();
}

async function exportCommand(file: string, args: string[], values: ParsedValues): Promise<number> {
  noArguments('export', args);
  const formatName = stringFlag(values, FORMAT_FLAG);
  if (values.json && formatName !== undefined && formatName !== 'jsonl') {
    throw new UsageError(
      `Expected --json (which is --format jsonl) alone or with --format jsonl, got --format \`${safeLabel(formatName)}\``,
    );
  }
  const format = formatNamed(formatName ?? (values.json ? 'jsonl' : 'csv'));
  const fields = parseFields(stringFlag(values, FIELDS_FLAG) ?? DEFAULT_FIELDS);
  const tasks = stringFlag(values, TASKS_FLAG);
  // Loaded only for --tasks: the task line check brings the engine's option schema along.
  const order =
    tasks === undefined
      ? undefined
      : await (await import('../results/read/task-order.js')).taskOrder(tasks);
  const out = stringFlag(values, OUT_FLAG);
  const inputs = tasks === undefined || tasks === '-' ? [file] : [file, tasks];
  const sink: Sink = out === undefined ? stdoutSink() : fileSink(out, inputs);
  let exported: ReturnType<typeof exportResults>;
  try {
    exported = exportResults(file, { fields, format, sink, ...(order ? { order } : {}) });
  } catch (error) {
    sink.abort();
    throw error;
  }
  sink.close();
  noteReport(exported.report);
  if (out !== undefined) note(`cohort results: ${exported.rows} row(s) in ${safeLabel(out)}`);
  return closedCode();
}

async function showCommand(file: string, args: string[], values: ParsedValues): Promise<number> {
  if (args.length !== 1) {
    throw new UsageError(
      `Expected one task ID after \`show\` (a task line's "id", as the results' "taskId"), got ${args.length === 0 ? 'nothing' : args.map((word) => `\`${safeLabel(word)}\``).join(' ')}`,
    );
  }
  const { line, report } = findTask(file, args[0]!);
  stdout().write(values.json ? lineJson(line) : renderTask(line));
  noteReport(report);
  return closedCode();
}

/** What the read skipped, on stderr, so stdout holds only the rows. */
function noteReport(report: ReadReport): void {
  if (report.duplicates > 0) {
    note(
      `cohort results: ${report.duplicates} line(s) repeat a task already in ${report.label}; each task's first line counts`,
    );
  }
  if (report.tornBytes !== undefined) note(`cohort results: ${tornNote(report.tornBytes)}`);
}

/**
 * 141 when stdout closed before the end, as the other commands say it; else 0. The read is
 * synchronous, so a closed pipe's error has had no turn to arrive: it gets one here.
 */
async function closedCode(): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  return stdout().closed ? 141 : 0;
}
