#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { CohortError, UsageError } from '../shared/errors.js';
import { redactSecrets } from '../shared/redact.js';
import { guardOutput, note, safeText, stdout } from './output.js';
import {
  handleInterrupts,
  installSignalHandlers,
  restoreTerminal,
  runCleanups,
} from './process.js';

const USAGE = `Usage: cohort COMMAND [options]

cohort runs LLM sub-agents in parallel on worker threads, many to a thread; each one returns
its result through an explicit reply tool.

Commands:
  demo [FOLDER]                 the main job, offline on the built-in scripted model
  agent PROMPT                  run one child agent; print its AgentResult
  run PROMPT                    run a root session with the agent tools until idle
  batch TASKS.jsonl --out FILE  one child per task line; resumable
  results FILE SUBCOMMAND       read a batch's results back: status, failed, export, show
  agents check [DIR]            check the agent files (NAME.md) of a folder, each ok or its error
  worker --queue REDIS          take agent jobs from a queue in Redis (a fleet; docs/SCALE-OUT.md)
  queue status --queue REDIS    a queue's jobs by state and its workers
  bench [part…]                 benchmark concurrency limits (docs/BENCHMARKS.md)
  mock                          run the built-in scripted model as a server
  logs list|show|tail|export    read runs' journals back (docs/LOGS.md)
  logs prune --older-than D     remove old run folders
  help [COMMAND]                this text, or a command's options and exit codes

Options: --version, -h/--help. Each command lists its own: cohort help COMMAND.
Without ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL every command runs on the built-in model.`;

type Command = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  agent: async () => (await import('./commands/agent.js')).agentCommand,
  mock: async () => {
    const { mockCommand } = await import('../testing/serve-command.js');
    return (argv) => {
      // The first signal stops the server cleanly (exit 0); a second forces.
      const stop = new AbortController();
      handleInterrupts({
        onSignal: (_signal, count) => {
          stop.abort();
          return count > 1 ? 'force' : 'handled';
        },
      });
      return mockCommand(argv, { signal: stop.signal });
    };
  },
  demo: async () => (await import('./commands/demo.js')).demoCommand,
  run: async () => (await import('./commands/run.js')).runCommand,
  batch: async () => (await import('./commands/batch.js')).batchCommand,
  results: async () => (await import('./commands/results.js')).resultsCommand,
  agents: async () => (await import('./commands/agents.js')).agentsCommand,
  bench: async () => (await import('./commands/bench.js')).benchCommand,
  worker: async () => (await import('./commands/worker.js')).workerCommand,
  queue: async () => (await import('./commands/queue.js')).queueCommand,
  logs: async () => (await import('./commands/logs.js')).logsCommand,
};

async function dispatch(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    note(USAGE);
    return 2;
  }
  if (name === '--help' || name === '-h') {
    stdout().write(`${USAGE}\n`);
    return 0;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    stdout().write(`${version()}\n`);
    return 0;
  }
  if (name === 'help') {
    const topic = rest[0];
    if (topic === undefined) {
      stdout().write(`${USAGE}\n`);
      return 0;
    }
    return (await commandNamed(topic))(['--help']);
  }
  return (await commandNamed(name))(rest);
}

async function commandNamed(name: string): Promise<Command> {
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    throw new UsageError(
      `Expected a command (${Object.keys(COMMANDS).join(', ')}, help), got \`${safeText(name)}\`. See cohort --help`,
    );
  }
  return load();
}

function version(): string {
  // dist/src/cli/cli.js → the package's package.json
  const file = new URL('../../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

/** Prints a failure the way a person can act on: usage errors plainly, faults with their code. */
function report(error: unknown): number {
  const message = safeText(redactSecrets(error instanceof Error ? error.message : String(error)));
  if (error instanceof UsageError) {
    note(`cohort: ${message}`);
    return 2;
  }
  const code = error instanceof CohortError ? ` [${error.code}]` : '';
  note(`cohort: error${code}: ${message}`);
  return 1;
}

/**
 * One way out for every command: whatever happened, what it started is closed, the terminal is
 * restored, and the process exits with the command's code, even if something it used forgot to
 * let go of the event loop.
 */
async function main(argv: string[]): Promise<void> {
  guardOutput();
  installSignalHandlers();
  let code: number;
  try {
    code = await dispatch(argv);
  } catch (error) {
    code = report(error);
  }
  await runCleanups();
  restoreTerminal();
  process.exitCode = code;
  // Everything is closed; a handle still open must not turn a finished command into a hang.
  setTimeout(() => process.exit(code), 2000).unref();
}

void main(process.argv.slice(2));
