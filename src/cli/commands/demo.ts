import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ENGINE_FIELDS } from '../../main/engine-options.js';
import { UsageError } from '../../shared/errors.js';
import { parseCommand, stringFlag } from '../flags.js';
import { stdout } from '../output.js';
import { COMMON_HELP, commandOptions, EXIT_CODES_HELP, ownHelp } from './help.js';
import { EVENTS_JSON_FLAG, runSession } from './run.js';

export const DEMO_USAGE = `Usage: cohort demo [FOLDER] [options]

The main job, offline on the built-in scripted model (or on the real API when a key is set): a
parent surveys FOLDER (default: cohort's own src/), fans out one async sub-agent per file, shows
live progress, and composes a final report from the sub-agents' replies. Signals and output
work as in \`cohort run\`.

Options:
${ownHelp([EVENTS_JSON_FLAG])}
${COMMON_HELP}
${EXIT_CODES_HELP}
  0  the report was composed
  1  the root's turn ended otherwise, or an error
  2  a usage error: a bad flag, FOLDER missing or not a folder; nothing ran
  130/143/129  everything was stopped by a signal, as in cohort run
  141  stdout closed before the end`;

export const DEMO_PROMPT = [
  'Survey the files of the workspace. List them with list_files, then start one async',
  'sub-agent per file (mode "async", title = the file path) that reads the file with read_file',
  'and replies with a short digest of it. When every result has arrived, compose a final report',
  'in markdown with one line per file.',
].join(' ');

export async function demoCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, commandOptions([EVENTS_JSON_FLAG]));
  if (values.help) {
    stdout().write(`${DEMO_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 1) {
    throw new UsageError(`Expected at most one FOLDER, got ${positionals.length}`);
  }
  const folder = path.resolve(
    positionals[0] ?? stringFlag(values, ENGINE_FIELDS.workspace) ?? defaultFolder(),
  );
  return runSession({
    resumeHint: false,
    prompt: DEMO_PROMPT,
    values,
    json: values.json === true,
    workspace: folder,
    banner: `cohort demo: surveying ${folder}`,
    // Offline, the scripted model answers with a realistic latency so the fan-out is visible.
    mockLoad: { ttftMs: 300, tokensPerSecond: 600, jitter: 0.5, seed: 7 },
  });
}

function defaultFolder(): string {
  // dist/src/cli/commands/demo.js → the package's src/, shipped with it (package.json `files`).
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../src');
}
