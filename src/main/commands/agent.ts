import { UsageError } from '../../shared/errors.js';
import { COMMON_OPTIONS, intFlag, parseCommand, stringFlag } from '../cli-options.js';
import { Engine } from '../engine.js';
import { selectProvider } from '../provider-select.js';
import { formatResult } from '../render-result.js';
import { engineOptionsFrom } from './common.js';

export const AGENT_USAGE = `cohort agent PROMPT [--system S] [--title T] [--max-steps N] [--json]
             [--log-dir D] [--tools MODULE…] [--workspace DIR] [common options]

Runs one child agent under the reply contract and prints its AgentResult.
Exit code 0 when the outcome is complete, 1 otherwise, 2 for a usage error.`;

export async function agentCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, {
    ...COMMON_OPTIONS,
    system: { type: 'string' },
    title: { type: 'string' },
    'max-steps': { type: 'string' },
  });
  if (values.help) {
    process.stdout.write(`${AGENT_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) {
    throw new UsageError(
      `Expected exactly one PROMPT argument, got ${positionals.length}${positionals.length ? `: ${positionals.map((p) => JSON.stringify(p)).join(' ')}` : ''}`,
    );
  }
  const prompt = positionals[0]!;
  const maxSteps = intFlag(values, 'max-steps', 1);
  const system = stringFlag(values, 'system');
  const title = stringFlag(values, 'title');
  const engineOptions = engineOptionsFrom(values, {});
  const provider = await selectProvider(values);
  const engine = await Engine.start({ ...engineOptions, provider: provider.config });
  try {
    const controller = new AbortController();
    const onSigint = () => controller.abort('user');
    process.once('SIGINT', onSigint);
    const result = await engine.run({
      prompt,
      signal: controller.signal,
      ...(maxSteps === undefined ? {} : { maxSteps }),
      ...(system === undefined ? {} : { system }),
      ...(title === undefined ? {} : { title }),
    });
    process.removeListener('SIGINT', onSigint);
    if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else process.stdout.write(`${formatResult(result)}\n`);
    return result.outcome === 'complete' ? 0 : 1;
  } finally {
    await engine.close();
    await provider.close();
  }
}
