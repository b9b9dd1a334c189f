/**
 * Where runs' journals are, as the CLI names them. `--log-dir ROOT` means one thing on every
 * command: the log root that holds run folders. A run's folder is `ROOT/<time>-<pid>`, or
 * `ROOT/ID` when `--run ID` names it; the library's `logDir` is that folder, made here.
 */
import path from 'node:path';
import { defaultLogRoot, runFolderName } from '../../main/run-folder.js';
import { UsageError } from '../../shared/errors.js';
import { type CliFlag, type ParsedValues, stringFlag } from '../flags.js';
import { safeLabel, shellQuote } from '../output.js';

/** `--log-dir ROOT` of the commands that start a run. */
export const LOG_ROOT_FLAG: CliFlag = {
  flag: '--log-dir',
  arg: 'ROOT',
  help: "the log root: the run's journal goes in a folder under it,\nROOT/<time>-<pid> (default: $TMPDIR/cohort)",
};

/** `--run ID` of the commands that start a run. */
export const RUN_FLAG: CliFlag = {
  flag: '--run',
  arg: 'ID',
  help: "the run's folder is ROOT/ID instead: a plain folder name (one\nthat exists is added to)",
};

/**
 * A plain folder name: no separator, no `.` or `..`, nothing hidden, nothing a shell or a
 * terminal would read as more than a name.
 */
const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Checks `--run`'s value: a folder name directly under the root, never a path. */
export function checkRunId(value: string, flag = '--run'): string {
  if (!RUN_ID.test(value) || value.includes('..')) {
    throw new UsageError(
      `Expected \`${flag}\` to be a plain folder name under the log root (letters, digits, \`.\`, \`_\` and \`-\`, starting with a letter or digit, no \`..\`), got \`${safeLabel(value)}\``,
    );
  }
  return value;
}

/** The log root `--log-dir` names, resolved; the default root without it. */
export function logRootOf(values: ParsedValues): string {
  return path.resolve(stringFlag(values, LOG_ROOT_FLAG) ?? defaultLogRoot());
}

/** The run `--run` names, checked; undefined without it. */
export function runIdOf(values: ParsedValues): string | undefined {
  const run = stringFlag(values, RUN_FLAG);
  return run === undefined ? undefined : checkRunId(run);
}

/** The folder of a run a command starts: `ROOT/ID` with `--run`, else a new `ROOT/<time>-<pid>`. */
export function newRunFolder(values: ParsedValues): string {
  const run = runIdOf(values);
  return path.join(logRootOf(values), run ?? runFolderName());
}

/**
 * The line a command that starts a run prints on stderr: where its journal is, and how to read
 * it back (with `--log-dir` only when the root is not the default one).
 */
export function journalNote(runFolder: string): string {
  const root = path.dirname(runFolder);
  const run = path.basename(runFolder);
  const elsewhere = root === path.resolve(defaultLogRoot()) ? '' : ` --log-dir ${shellQuote(root)}`;
  return safeLabel(
    `cohort: journal in ${runFolder} (cohort logs show ID --run ${shellQuote(run)}${elsewhere})`,
  );
}
