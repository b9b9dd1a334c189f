#!/usr/bin/env node
import { CohortError, UsageError } from '../shared/errors.js';
import { redactSecrets } from '../shared/redact.js';
import { AGENT_USAGE, agentCommand } from './commands/agent.js';

const USAGE = `cohort — run LLM sub-agents in parallel on worker threads

Commands:
  cohort demo                         the main job, offline on the scripted model
  cohort agent PROMPT [options]       run one child agent; print its AgentResult
  cohort run PROMPT [options]         run a root session with the agent tools until idle
  cohort batch TASKS.jsonl --out RESULTS.jsonl [--concurrency N]
                                      one child per task line; resumable
  cohort bench [part…] [options]      benchmark concurrency limits (docs/BENCHMARKS.md)
  cohort mock [--port P] [load flags] run the scripted model server on its own

Common options: --provider anthropic|mock, --model, --base-url, --threads,
  --agents-per-thread, --ceiling, --log-dir, --max-depth, --workspace, --tools MODULE,
  --worker-heap-mb N, --cancel-grace DURATION, --json

${AGENT_USAGE}`;

type Command = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  agent: async () => agentCommand,
  mock: async () => (await import('../testing/serve-command.js')).mockCommand,
  demo: async () => (await import('./commands/demo.js')).demoCommand,
  run: async () => (await import('./commands/run.js')).runCommand,
  batch: async () => (await import('./commands/batch.js')).batchCommand,
  bench: async () => (await import('./commands/bench.js')).benchCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return name === undefined ? 2 : 0;
  }
  const load = COMMANDS[name];
  if (!load) {
    throw new UsageError(
      `Expected a command (${Object.keys(COMMANDS).join(', ')}), got \`${name}\`. See cohort --help`,
    );
  }
  return (await load())(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const message = redactSecrets(error instanceof Error ? error.message : String(error));
    if (error instanceof UsageError) {
      process.stderr.write(`cohort: ${message}\n`);
      process.exitCode = 2;
    } else {
      const code = error instanceof CohortError ? ` [${error.code}]` : '';
      process.stderr.write(`cohort: error${code}: ${message}\n`);
      process.exitCode = 1;
    }
  },
);
