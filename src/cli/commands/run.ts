import path from 'node:path';
import { ROOT_ID, Session, type SessionEvent, type TurnResult } from '../../main/session.js';
import { UsageError } from '../../shared/errors.js';
import { defined } from '../../shared/option-schema.js';
import type { AgentResult } from '../../shared/result.js';
import { emptyUsage } from '../../shared/result.js';
import type { ScriptedModelOptions } from '../../testing/index.js';
import { DASHBOARD_FLAGS } from '../dashboard-flags.js';
import { type CliFlag, type ParsedValues, parseCommand, stringFlag } from '../flags.js';
import { readPrompt } from '../input.js';
import { note, safeLabel, safeText, stdout } from '../output.js';
import {
  handleInterrupts,
  type InterruptHandler,
  onCleanup,
  type StopSignal,
  signalExitCode,
  stopSignal,
} from '../process.js';
import { acquireLock } from '../results/lock.js';
import { LiveView } from '../views/live-view.js';
import { RunStatus } from '../views/run-status.js';
import { StatusLine } from '../views/status-line.js';
import { COMMON_HELP, commandOptions, EXIT_CODES_HELP, ownHelp } from './help.js';
import { announceRun, lastAssistantText, resumeValues } from './run-resume.js';
import { type PreparedEngine, prepareEngine, startEngine } from './start.js';

const SYSTEM_FLAG: CliFlag = { flag: '--system', arg: 'S', help: "the root's system prompt" };

/** `--json` of `cohort run` and `cohort demo`. */
export const EVENTS_JSON_FLAG: CliFlag = { flag: '--json', help: 'JSONL events and a final line' };

const RESUME_FLAG: CliFlag = {
  flag: '--resume',
  arg: 'ID',
  help: 'go on with the stopped run ROOT/ID instead of a new one (no PROMPT)',
};

/** `cohort run`'s own flags, in the order its help lists them. */
const OWN_FLAGS = [SYSTEM_FLAG, EVENTS_JSON_FLAG, RESUME_FLAG, ...DASHBOARD_FLAGS];

export const RUN_USAGE = `Usage: cohort run PROMPT [options]
       cohort run --resume ID [options]

Runs a root session turn with the agent tools, then stays alive through inbox deliveries
until no async agent is live and the root is ready. PROMPT is the text itself, \`-\` to read
it from stdin, or @FILE to read it from a file (@@… for a literal prompt that starts with @).
Without --json it shows the root's streamed text, a line per agent as it starts and settles
(✓ complete, ✗ failed, ⊘ cancelled, – empty or capped) and each result; when stderr is a
terminal, a status line below them says how long the run has gone, the agents running and done
(by outcome), tokens, dollars and the governor's window. With --json it prints one event per
line (JSONL), ending with a line {"type":"final",…}.

Every run prints its id and the command that resumes it (stderr; with --json the first line is
{"type":"run","id":…,"logDir":…}). If the run stops for any reason (a kill -9, a crash, a second
Ctrl-C), \`cohort run --resume ID\` with the same --log-dir and provider options takes it up again:
the root's conversation comes back from the run's journal, agents that were running go on from
their last committed step (no step the model already answered is asked again, no agent starts
twice), and results that settled while nothing ran are delivered to the root once.

Ctrl-C cancels the foreground turn; async agents go on. A second Ctrl-C, or SIGTERM or SIGHUP,
cancels everything and still prints every settled result and the final line. One more signal
stops at once. If stdout closes (\`| head -1\`), everything is cancelled quietly.

Options:
${ownHelp(OWN_FLAGS)}
${COMMON_HELP}
${EXIT_CODES_HELP}
  0  the root's last turn ended ready
  1  it ended otherwise (cancelled, capped, failed) or an error
  2  a usage error: a bad flag, a missing file or folder, a --resume of an unknown run, of one
     still running, or of another version's journal; nothing ran
  130/143/129  a signal ended the run: a second Ctrl-C, SIGTERM or SIGHUP, or a first Ctrl-C
               whose cancelled turn was the end of it. The summary is still printed.
  141  stdout closed before the end`;

/** The final line of `cohort run --json` and the summary of a run. */
export interface RunSummary {
  type: 'final';
  outcome: TurnResult['outcome'];
  text: string;
  reason?: string;
  generation: number;
  agents: { total: number; byOutcome: Record<string, number> };
  /** The run's log folder; absent when it keeps nothing (`--logs none`, or `failed` and none failed). */
  logDir?: string;
}

export async function runCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, commandOptions(OWN_FLAGS));
  if (values.help) {
    stdout().write(`${RUN_USAGE}\n`);
    return 0;
  }
  const resume = stringFlag(values, RESUME_FLAG);
  if (resume !== undefined) {
    // The stopped run's folder is checked before anything starts.
    const resumed = await resumeValues(resume, positionals.length, values);
    return runSession({
      prepared: await prepareEngine(resumed),
      values: resumed,
      json: values.json === true,
      system: stringFlag(values, SYSTEM_FLAG),
      resume: true,
    });
  }
  if (positionals.length !== 1) {
    throw new UsageError(`Expected exactly one PROMPT argument, got ${positionals.length}`);
  }
  const system = stringFlag(values, SYSTEM_FLAG);
  // Flags first: a mistake is reported before anything waits on stdin.
  const prepared = await prepareEngine(values);
  return runSession({
    prepared,
    prompt: await readPrompt(positionals[0]!),
    values,
    json: values.json === true,
    system,
  });
}

export interface RunSessionOptions {
  /** The root's first message; unset with `resume`. */
  prompt?: string;
  /** Go on with the stopped run in the run folder the flags name (`--resume`). */
  resume?: boolean;
  /**
   * Say on stderr how to resume the run (default: yes). The demo does not: its workspace and
   * its model's latency come from the demo, not from flags a resume could repeat.
   */
  resumeHint?: boolean;
  values: ParsedValues;
  /** The flags, already checked (`run` checks them before it reads a prompt from stdin). */
  prepared?: PreparedEngine | undefined;
  json: boolean;
  system?: string | undefined;
  /** Folder the workspace tools read (the demo's survey root). */
  workspace?: string | undefined;
  /** Printed before the run starts (not in JSON mode). */
  banner?: string;
  /** Latency of the in-process scripted model, when it is the provider. */
  mockLoad?: ScriptedModelOptions;
}

/** Runs a session to idle with the live view or JSONL, and handles signals. Shared with `demo`. */
export async function runSession(options: RunSessionOptions): Promise<number> {
  const { engine, dashboard } = await startEngine(options.values, {
    prepared: options.prepared,
    workspace: options.workspace,
    mockLoad: options.mockLoad,
  });
  const lock = acquireLock(`${engine.logDir}.lock`, {
    command: options.resume ? `cohort run --resume ${path.basename(engine.logDir)}` : 'cohort run',
    what: {
      subject: `run ${safeLabel(path.basename(engine.logDir))}`,
      noun: 'run',
      fix: 'Pick a --log-dir you can write to.',
    },
  });
  onCleanup(() => lock.release());
  const sessionOptions = { autoWake: true, ...defined({ system: options.system }) };
  const session = options.resume
    ? await Session.resume(engine, sessionOptions)
    : new Session(engine, sessionOptions);
  const out = stdout();
  announceRun(engine.logDir, options.json, session, options.resumeHint ?? true);
  const view = new LiveView({ write: (text: string) => out.write(text) });
  const status = new RunStatus();
  // On a terminal, below the scrolling lines: what runs, what is done, what it cost.
  const statusLine = options.json ? undefined : StatusLine.onTerminal(() => status.text());
  if (statusLine) onCleanup(() => statusLine.stop());
  statusLine?.start();
  const record = new RunRecord();
  // The root is no spawned child: its row is made here, and its steps told as they end.
  dashboard?.addRoot({ id: ROOT_ID, title: 'root', model: engine.provider.model });
  const consume = (async () => {
    for await (const event of session.events()) {
      record.handle(event);
      if (dashboard && event.type === 'step-end' && event.agentId === ROOT_ID) {
        dashboard.rootStepped(ROOT_ID, event.usage);
      }
      if (options.json) out.write(`${JSON.stringify(event satisfies SessionEvent)}\n`);
      else {
        view.handle(event);
        status.handle(event);
      }
    }
  })();
  let stdoutClosed = false;
  // Nobody reads the run any more: stop it rather than pay for agents whose output is lost.
  out.onClosed(() => {
    stdoutClosed = true;
    void session.close();
  });
  const printSummary = () =>
    writeSummary(
      options.json,
      summarise({ ...record.snapshot(), session, logDir: engine.keptLogDir }),
    );
  const interrupts = sessionInterrupts(session, printSummary);
  const stopHandling = handleInterrupts(interrupts);
  try {
    if (options.banner && !options.json) out.write(`${safeText(options.banner)}\n`);
    const resumed = session.resumed;
    if (resumed?.ended && resumed.resumed + resumed.undelivered === 0) {
      record.lastTurn = {
        outcome: 'ready',
        text: '',
        usage: emptyUsage(),
        generation: session.generation,
      };
      record.lastRootText = lastAssistantText(session.transcript);
      // Its answer again, as the run that ended showed it.
      if (!options.json && record.lastRootText !== '')
        out.write(`${safeText(record.lastRootText)}\n`);
    }
    if (options.prompt !== undefined) await session.send(options.prompt);
    await session.waitIdle();
  } finally {
    await session.close();
    await consume;
    // Gone before the summary, and before anything after the run is said.
    statusLine?.stop();
    stopHandling();
    // Its journal is whole before another process may take the run up.
    await engine.close();
    lock.release();
  }
  const summary = printSummary();
  // A first Ctrl-C only cancels the foreground turn: the run goes on and its end decides. If
  // the run ended on that cancelled turn, it was the Ctrl-C that ended it.
  const signal =
    interrupts.stoppedBy ?? (summary.outcome === 'cancelled' ? stopSignal() : undefined);
  if (signal) return signalExitCode(signal);
  if (stdoutClosed) return 141;
  return summary.outcome === 'ready' ? 0 : 1;
}

/**
 * Signals for a session: the first Ctrl-C cancels the foreground turn (async agents go on); a
 * second, or a first SIGTERM/SIGHUP, closes the session, which cancels everything and lets the
 * run print what settled. Any signal after that forces.
 */
function sessionInterrupts(
  session: Session,
  printSummary: () => unknown,
): InterruptHandler & { readonly stoppedBy: StopSignal | undefined } {
  let stoppedBy: StopSignal | undefined;
  return {
    get stoppedBy() {
      return stoppedBy;
    },
    onSignal: (signal, count) => {
      if (stoppedBy) return 'force';
      if (signal === 'SIGINT' && count === 1) {
        const cancelled = session.cancelTurn('user');
        note(
          cancelled
            ? 'cohort: cancelled the foreground turn; async agents go on (Ctrl-C again cancels everything)'
            : 'cohort: no foreground turn; async agents go on (Ctrl-C again cancels everything)',
        );
        return 'handled';
      }
      stoppedBy = signal;
      note('cohort: cancelling every agent (one more signal stops at once)');
      void session.close();
      return 'handled';
    },
    onForce: () => {
      printSummary();
    },
  };
}

/** What the run has seen, for the summary: settled agents and the root's last turn. */
class RunRecord {
  readonly settled = new Map<string, AgentResult>();
  lastTurn: TurnResult | undefined;
  lastRootText = '';

  handle(event: SessionEvent): void {
    if (event.type === 'agent-settle' && event.agentId !== ROOT_ID)
      this.settled.set(event.agentId, event.result);
    if (event.type === 'turn-end') {
      this.lastTurn = event.result;
      if (event.result.outcome === 'ready' && event.result.text !== '')
        this.lastRootText = event.result.text;
    }
  }

  snapshot(): Pick<SummaryInput, 'settled' | 'lastTurn' | 'lastRootText'> {
    return { settled: this.settled, lastTurn: this.lastTurn, lastRootText: this.lastRootText };
  }
}

function writeSummary(json: boolean, summary: RunSummary): RunSummary {
  const out = stdout();
  if (json) {
    out.write(`${JSON.stringify(summary)}\n`);
    return summary;
  }
  const counts = Object.entries(summary.agents.byOutcome)
    .map(([outcome, count]) => `${count} ${outcome}`)
    .join(', ');
  out.write(
    `\n── done: root ${summary.outcome}; ${summary.agents.total} agent(s)${counts ? `: ${counts}` : ''}\n`,
  );
  if (summary.logDir !== undefined) out.write(`   logs: ${safeLabel(summary.logDir)}\n`);
  return summary;
}

interface SummaryInput {
  settled: ReadonlyMap<string, AgentResult>;
  lastTurn: TurnResult | undefined;
  lastRootText: string;
  session: Session;
  logDir: string | undefined;
}

function summarise(input: SummaryInput): RunSummary {
  const byOutcome: Record<string, number> = {};
  for (const result of input.settled.values())
    byOutcome[result.outcome] = (byOutcome[result.outcome] ?? 0) + 1;
  const lastTurn = input.lastTurn;
  return defined({
    type: 'final' as const,
    outcome: lastTurn?.outcome ?? 'cancelled',
    text: input.lastRootText,
    reason: lastTurn?.reason,
    generation: input.session.generation,
    agents: { total: input.settled.size, byOutcome },
    logDir: input.logDir,
  });
}
