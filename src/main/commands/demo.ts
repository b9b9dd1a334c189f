import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { COMMON_OPTIONS, parseCommand, stringFlag } from '../cli-options.js';
import { runSession } from './run.js';

export const DEMO_USAGE = `cohort demo [FOLDER] [--json] [common options]

The main job, offline on the scripted model (or on the real API when a key is set): a parent
surveys FOLDER (default: this project's src/), fans out one async sub-agent per file, shows live
progress, and composes a final report from the sub-agents' replies.`;

export const DEMO_PROMPT = [
  'Survey the files of the workspace. List them with list_files, then start one async',
  'sub-agent per file (mode "async", title = the file path) that reads the file with read_file',
  'and replies with a short digest of it. When every result has arrived, compose a final report',
  'in markdown with one line per file.',
].join(' ');

export async function demoCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, { ...COMMON_OPTIONS });
  if (values.help) {
    process.stdout.write(`${DEMO_USAGE}\n`);
    return 0;
  }
  const folder = path.resolve(positionals[0] ?? stringFlag(values, 'workspace') ?? defaultFolder());
  return runSession({
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
  // dist/src/main/commands/demo.js → the project's src/
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../src');
}
