import { statSync } from 'node:fs';
import path from 'node:path';
import type { AgentFile } from '../../main/agents/definition.js';
import { defaultAgentsFolder } from '../../main/agents/resolve.js';
import { ENGINE_FIELDS } from '../../main/engine-options.js';
import { UsageError } from '../../shared/errors.js';
import { type CliFlag, parseCommand, stringFlag } from '../flags.js';
import { safeLabel, stdout } from '../output.js';
import { commandOptions, ownHelp } from './help.js';
import { prepareEngine } from './start.js';

const JSON_FLAG: CliFlag = {
  flag: '--json',
  help: 'print one JSON object: {"folder","files":[…],"good","bad"}',
};

/** `cohort agents check`'s own flags; it also takes the engine flags, as `cohort run` does. */
const OWN_FLAGS = [JSON_FLAG];

export const AGENTS_USAGE = `Usage: cohort agents check [DIR] [--json] [engine options]

Checks every agent file (NAME.md) of a folder as an engine would use it, and prints each file
with \`ok\`, or \`bad\` and its problem (FILE:LINE: Expected …, got …), then a summary. DIR is
the folder; default: --agents, else .cohort/agents under --workspace (default: the current
folder). A file is checked whole (docs/AGENTS.md): its fields, that the tools it names exist
(the workspace tools, --tools modules, and with --max-depth 2 or more the agent tools), and
that a \`usd\` limit on the model it names has a price (--prices).

\`cohort run\`, \`cohort agent\` and a program's Engine check every file of the folder before
they start, used or not, since the model may name any of them: one bad file stops them.
\`cohort batch\` checks only the files its tasks name. This command shows them all at once.

Options:
${ownHelp(OWN_FLAGS)}
  -h, --help           this help
  It takes the engine options of cohort run (cohort help run); those that change what is
  checked are --agents, --workspace, --tools, --max-depth, --prices and --budget.

With --json each file is {"name","file","ok":true,"description"} or
{"name","file","ok":false,"line","problem","message"} (message is "FILE:LINE: " and problem).

Exit codes:
  0  every file is good (also when the folder has none)
  1  some file is bad
  2  a usage error: a bad flag, a DIR that is missing or not a folder; nothing was checked`;

/** `cohort agents SUBCOMMAND`: for now `check`. */
export async function agentsCommand(argv: string[]): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === '--help' || subcommand === '-h' || subcommand === 'help') {
    stdout().write(`${AGENTS_USAGE}\n`);
    return 0;
  }
  if (subcommand !== 'check') {
    const got = subcommand === undefined ? 'nothing' : `\`${safeLabel(subcommand)}\``;
    throw new UsageError(`Expected a subcommand (check), got ${got}. See cohort agents --help`);
  }
  return checkCommand(rest);
}

async function checkCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, commandOptions(OWN_FLAGS));
  if (values.help) {
    stdout().write(`${AGENTS_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 1) {
    throw new UsageError(
      `Expected at most one DIR argument, got ${positionals.length}: ${positionals.map((word) => JSON.stringify(word)).join(' ')}`,
    );
  }
  // The workspace tools count as known: the default folder is only read under a workspace.
  const workspace = stringFlag(values, ENGINE_FIELDS.workspace) ?? '.';
  const given = positionals[0] ?? stringFlag(values, ENGINE_FIELDS.agentsDir);
  const folder = given === undefined ? defaultAgentsFolder(workspace) : path.resolve(given);
  checkFolder(folder);
  // Checked as `cohort batch` would: each bad file is kept with its error instead of stopping.
  const prepared = await prepareEngine(
    { ...values, agents: folder },
    { workspace, agentFileCheck: 'spawn' },
  );
  const files = prepared.check.agentFiles;
  const bad = files.filter((entry) => entry.error !== undefined).length;
  if (values.json) {
    const report = { folder, files: files.map(fileJson), good: files.length - bad, bad };
    stdout().write(`${JSON.stringify(report)}\n`);
  } else {
    stdout().write(`${[...fileLines(files), summary(folder, files.length, bad)].join('\n')}\n`);
  }
  return bad === 0 ? 0 : 1;
}

/** A folder named here must be one: a missing folder is not an empty one. */
function checkFolder(folder: string): void {
  let what: string;
  try {
    if (statSync(folder).isDirectory()) return;
    what = 'which is not a folder';
  } catch {
    what = 'which does not exist';
  }
  throw new UsageError(
    `Expected DIR to be a folder of agent files (NAME.md), got \`${safeLabel(folder)}\`, ${what}`,
  );
}

function fileLines(files: readonly AgentFile[]): string[] {
  const width = Math.max(0, ...files.map((entry) => entry.name.length));
  return files.map((entry) => {
    const name = safeLabel(entry.name).padEnd(width);
    return entry.error
      ? `bad  ${name}  ${safeLabel(entry.error.message)}`
      : `ok   ${name}  ${safeLabel(entry.definition.description)}`;
  });
}

function summary(folder: string, total: number, bad: number): string {
  const where = safeLabel(folder);
  if (total === 0) return `cohort agents: no agent files (NAME.md) in ${where}`;
  const files = total === 1 ? '1 agent file' : `${total} agent files`;
  if (bad === 0) return `cohort agents: ${files} in ${where}, all good`;
  return `cohort agents: ${bad} of ${files} in ${where} ${bad === 1 ? 'is' : 'are'} bad`;
}

function fileJson(entry: AgentFile): Record<string, unknown> {
  if (entry.error) {
    return {
      name: entry.name,
      file: entry.file,
      ok: false,
      line: entry.error.line,
      problem: entry.error.problem,
      message: entry.error.message,
    };
  }
  return {
    name: entry.name,
    file: entry.file,
    ok: true,
    description: entry.definition.description,
  };
}
