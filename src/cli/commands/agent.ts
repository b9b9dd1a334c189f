import { MAX_STEPS } from '../../main/engine-options.js';
import { UsageError } from '../../shared/errors.js';
import { type CliFlag, parseCommand, stringFlag, wholeNumberFlag } from '../flags.js';
import { readPrompt } from '../input.js';
import { stdout } from '../output.js';
import { handleInterrupts, signalExitCode, stopSignal } from '../process.js';
import { formatResult } from '../views/render-result.js';
import { COMMON_HELP, commandOptions, EXIT_CODES_HELP, ownHelp } from './help.js';
import { prepareEngine, startEngine } from './start.js';

const SYSTEM_FLAG: CliFlag = {
  flag: '--system',
  arg: 'S',
  help: 'system prompt (the reply rules are always added)',
};
const TITLE_FLAG: CliFlag = {
  flag: '--title',
  arg: 'T',
  help: "the agent's title (default: the prompt's first 60 characters)",
};
const JSON_FLAG: CliFlag = { flag: '--json', help: 'print the AgentResult as one JSON line' };

/** `cohort agent`'s own flags, in the order its help lists them. */
const OWN_FLAGS = [SYSTEM_FLAG, TITLE_FLAG, MAX_STEPS, JSON_FLAG];

export const AGENT_USAGE = `Usage: cohort agent PROMPT [options]

Runs one child agent under the reply contract and prints its AgentResult.
PROMPT is the text itself, \`-\` to read it from stdin, or @FILE to read it from a file
(@@… for a literal prompt that starts with @).

Options:
${ownHelp(OWN_FLAGS)}
${COMMON_HELP}
${EXIT_CODES_HELP}
  0  the outcome is complete
  1  any other outcome (empty, capped, failed, cancelled) or an error
  2  a usage error: a bad flag, a missing file; nothing ran
  130/143/129  stopped by SIGINT/SIGTERM/SIGHUP (the cancelled result is still printed)`;

export async function agentCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, commandOptions(OWN_FLAGS));
  if (values.help) {
    stdout().write(`${AGENT_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) {
    throw new UsageError(
      `Expected exactly one PROMPT argument, got ${positionals.length}${positionals.length ? `: ${positionals.map((p) => JSON.stringify(p)).join(' ')}` : ''}`,
    );
  }
  const maxSteps = wholeNumberFlag(values, MAX_STEPS);
  const system = stringFlag(values, SYSTEM_FLAG);
  const title = stringFlag(values, TITLE_FLAG);
  // Flags first: a mistake is reported before anything waits on stdin.
  const prepared = await prepareEngine(values);
  const prompt = await readPrompt(positionals[0]!);
  const { engine } = await startEngine(values, { prepared });
  const controller = new AbortController();
  const stopHandling = handleInterrupts({
    // The first signal cancels the agent; its cancelled result is still printed. A second forces.
    onSignal: (signal, count) => {
      if (count > 1) return 'force';
      controller.abort(signal === 'SIGINT' ? 'user' : 'shutdown');
      return 'handled';
    },
  });
  try {
    const result = await engine.run({ prompt, signal: controller.signal, maxSteps, system, title });
    if (values.json) stdout().write(`${JSON.stringify(result)}\n`);
    else stdout().write(`${formatResult(result)}\n`);
    const signal = stopSignal();
    if (signal) return signalExitCode(signal);
    return result.outcome === 'complete' ? 0 : 1;
  } finally {
    stopHandling();
  }
}
