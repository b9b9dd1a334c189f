import { UsageError } from '../../shared/errors.js';
import type { AgentResult } from '../../shared/result.js';
import type { ScriptedModelOptions } from '../../testing/index.js';
import { COMMON_OPTIONS, parseCommand, stringFlag } from '../cli-options.js';
import { Engine } from '../engine.js';
import { LiveView } from '../live-view.js';
import { selectProvider } from '../provider-select.js';
import { ROOT_ID, Session, type SessionEvent, type TurnResult } from '../session.js';
import { engineOptionsFrom } from './common.js';

export const RUN_USAGE = `cohort run PROMPT [--json] [--system S] [--ceiling DURATION] [--max-depth N] [common options]

Runs a root session turn with the agent tools, then stays alive through inbox deliveries
until no async agent is live and the root is ready. --json prints one event per line (JSONL),
ending with a line {"type":"final",…}. Ctrl-C cancels the foreground turn; a second Ctrl-C
cancels everything and still prints every settled result.`;

/** The final line of `cohort run --json` and the summary of a run. */
export interface RunSummary {
  type: 'final';
  outcome: TurnResult['outcome'];
  text: string;
  reason?: string;
  generation: number;
  agents: { total: number; byOutcome: Record<string, number> };
  logDir: string;
}

export async function runCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, {
    ...COMMON_OPTIONS,
    system: { type: 'string' },
  });
  if (values.help) {
    process.stdout.write(`${RUN_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) {
    throw new UsageError(`Expected exactly one PROMPT argument, got ${positionals.length}`);
  }
  const system = stringFlag(values, 'system');
  return runSession({
    prompt: positionals[0]!,
    values,
    json: values.json === true,
    ...(system === undefined ? {} : { system }),
  });
}

export interface RunSessionOptions {
  prompt: string;
  values: Parameters<typeof engineOptionsFrom>[0];
  json: boolean;
  system?: string;
  /** Folder the workspace tools read (the demo's survey root). */
  workspace?: string;
  /** Printed before the run starts (not in JSON mode). */
  banner?: string;
  /** Latency of the in-process scripted model, when it is the provider. */
  mockLoad?: ScriptedModelOptions;
}

/** Runs a session to idle with the live view or JSONL, and handles Ctrl-C. Shared with `demo`. */
export async function runSession(options: RunSessionOptions): Promise<number> {
  // Options are checked before anything starts, so a bad one leaves nothing running.
  const engineOptions = engineOptionsFrom(options.values, {});
  const provider = await selectProvider(
    options.values,
    options.mockLoad ? { mockLoad: options.mockLoad } : {},
  );
  const engine = await Engine.start({
    ...engineOptions,
    provider: provider.config,
    ...(options.workspace === undefined ? {} : { workspace: options.workspace }),
  });
  const session = new Session(engine, {
    autoWake: true,
    ...(options.system === undefined ? {} : { system: options.system }),
  });
  const write = (text: string) => process.stdout.write(text);
  const view = new LiveView({ write });
  const settled = new Map<string, AgentResult>();
  let lastRootText = '';
  let lastTurn: TurnResult | undefined;
  const consume = (async () => {
    for await (const event of session.events()) {
      if (event.type === 'agent-settle' && event.agentId !== ROOT_ID)
        settled.set(event.agentId, event.result);
      if (event.type === 'turn-end') {
        lastTurn = event.result;
        if (event.result.outcome === 'ready' && event.result.text !== '')
          lastRootText = event.result.text;
      }
      if (options.json) write(`${JSON.stringify(event satisfies SessionEvent)}\n`);
      else view.handle(event);
    }
  })();

  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts === 1) {
      const cancelled = session.cancelTurn('user');
      process.stderr.write(
        cancelled
          ? 'cohort: cancelled the foreground turn; async agents go on (Ctrl-C again cancels everything)\n'
          : 'cohort: no foreground turn; async agents go on (Ctrl-C again cancels everything)\n',
      );
    } else {
      process.stderr.write('cohort: cancelling every agent\n');
      void session.close();
    }
  };
  process.on('SIGINT', onSigint);
  try {
    if (options.banner && !options.json) write(`${options.banner}\n`);
    lastTurn = await session.send(options.prompt);
    await session.waitIdle();
  } finally {
    process.removeListener('SIGINT', onSigint);
    await session.close();
    await consume;
    await engine.close();
    await provider.close();
  }
  const summary = summarise({ settled, lastTurn, lastRootText, session, logDir: engine.logDir });
  if (options.json) write(`${JSON.stringify(summary)}\n`);
  else {
    const counts = Object.entries(summary.agents.byOutcome)
      .map(([outcome, count]) => `${count} ${outcome}`)
      .join(', ');
    write(
      `\n── done: root ${summary.outcome}; ${settled.size} agent(s)${counts ? `: ${counts}` : ''}\n`,
    );
    write(`   logs: ${engine.logDir}\n`);
  }
  return summary.outcome === 'ready' ? 0 : 1;
}

function summarise(input: {
  settled: ReadonlyMap<string, AgentResult>;
  lastTurn: TurnResult | undefined;
  lastRootText: string;
  session: Session;
  logDir: string;
}): RunSummary {
  const byOutcome: Record<string, number> = {};
  for (const result of input.settled.values())
    byOutcome[result.outcome] = (byOutcome[result.outcome] ?? 0) + 1;
  const lastTurn = input.lastTurn;
  return {
    type: 'final',
    outcome: lastTurn?.outcome ?? 'cancelled',
    text: input.lastRootText,
    ...(lastTurn?.reason === undefined ? {} : { reason: lastTurn.reason }),
    generation: input.session.generation,
    agents: { total: input.settled.size, byOutcome },
    logDir: input.logDir,
  };
}
