import { context as otelContext } from '@opentelemetry/api';
import { DEFAULT_MAX_STEPS } from '../shared/child-spec.js';
import { UsageError } from '../shared/errors.js';
import type { AgentEvent } from '../shared/events.js';
import { PATIENCE_MS } from '../shared/governor/options.js';
import type { GovernorState } from '../shared/governor/types.js';
import {
  anyString,
  checkOption,
  checkOptions,
  custom,
  durationMs,
  type Fields,
  nonEmptyString,
  type OptionsOf,
} from '../shared/option-schema.js';
import { Provider } from '../shared/provider/provider.js';
import type { ContentBlockParam, MessageParam, ToolCall } from '../shared/provider/types.js';
import { redactEvent } from '../shared/redact.js';
import { type AgentResult, emptyUsage } from '../shared/result.js';
import { loadToolModule } from '../shared/tools/modules.js';
import type { AgentInfo, AgentReceipt, AgentToolInput } from '../shared/tools/spawn-tools.js';
import { spawnTools } from '../shared/tools/spawn-tools.js';
import type { AnyTool } from '../shared/tools/types.js';
import { WORKSPACE_TOOLS } from '../shared/tools/workspace.js';
import type { Engine } from './engine.js';
import { DEFAULT_CEILING_MS, MAX_STEPS } from './engine-options.js';
import { EventHub } from './event-hub.js';
import { renderInbox } from './inbox.js';
import { RootJournal } from './root-journal.js';
import { ROOT_ID, runRootTurn, type TurnResult } from './root-turn.js';
import { type ResumeCounts, resumeAgents } from './run-resume.js';
import { AgentScope } from './scope.js';
import { readStoppedRun, type StoppedRoot } from './stopped-run.js';
import { type RootTrace, traceRootTurn } from './tracing/agent-trace.js';
import type { OtelSpans } from './tracing/otel-spans.js';

export const DEFAULT_ROOT_SYSTEM = [
  'You are the root agent of a cohort session, working for the user.',
  'You can start sub-agents with the `agent` tool. mode "sync" waits and gives you the result;',
  'mode "async" returns a receipt at once and the result arrives later as a message, so use it',
  'for independent work you can fan out. `agents` lists live background agents; `agent_cancel`',
  'stops one. A sub-agent sees only the prompt you write: make it self-contained.',
].join(' ');

/** A session's options, in the order the constructor checks them. */
export const SESSION_FIELDS = {
  /** The root's system prompt; default: a short description of the agent tools. */
  system: anyString(),
  /**
   * Start a turn by itself when an async result arrives while idle (CLI default: on). Taken for
   * its truth, as it always was: no value is refused.
   */
  autoWake: custom<boolean>('a boolean', () => true),
  /** Lifetime ceiling of async agents, in ms (default one hour; per spawn too). */
  ceilingMs: durationMs(1, { default: DEFAULT_CEILING_MS }),
  /** Steps one root turn may take (default 50). */
  maxSteps: MAX_STEPS,
  /**
   * How long one of the root's requests may keep being refused (429/529) before its turn fails,
   * in ms; its agents inherit it unless their agent file sets one. Default: the engine's
   * `governor.patienceMs`.
   */
  patienceMs: PATIENCE_MS,
} as const satisfies Fields;

export type SessionOptions = OptionsOf<typeof SESSION_FIELDS>;

/** Everything a session's event stream carries. */
export type SessionEvent =
  | AgentEvent
  | { type: 'turn-start'; turn: number; generation: number; delivered: number }
  | { type: 'turn-end'; turn: number; result: TurnResult }
  | { type: 'session-clear'; generation: number }
  /** The rate-limit governor's state of one key changed (at most every 250 ms per key). */
  | { type: 'governor-update'; state: GovernorState }
  /** A subscriber that fell behind lost this many of its oldest queued events. */
  | { type: 'events-dropped'; count: number };

export { ROOT_ID, type TurnResult };

/**
 * A parent session on the main thread: the root turn loop (the same loop children run) and the
 * root's `AgentScope` (live async agents, reaper, typed inbox, generation).
 *
 * Turns never overlap. After `close()` no turn runs: turns still queued end `cancelled`
 * (reason `shutdown`) without a step, and `send` is refused.
 */
export class Session {
  readonly #engine: Engine;
  readonly #options: SessionOptions;
  readonly #events = new EventHub<SessionEvent>({
    overflow: (count) => ({ type: 'events-dropped', count }),
  });
  readonly #scope: AgentScope;
  readonly #delivered: AgentResult[] = [];
  #messages: MessageParam[] = [];
  #turn = 0;
  #turnChain: Promise<unknown> = Promise.resolve();
  #running = 0;
  #foreground: AbortController | undefined;
  #provider: Provider;
  #tools: Map<string, AnyTool> | undefined;
  #idleWaiters: (() => void)[] = [];
  #closed = false;
  /** The running turn's spans, when the engine traces: a spawn hangs under its tool call's. */
  #turnSpans: OtelSpans | undefined;
  readonly #unsubscribeGovernor: (() => void) | undefined;
  /** The root's records in the run journal. */
  readonly #journal: RootJournal;
  /** How the last turn ended, for the root's result record at close. */
  #lastTurn: TurnResult | undefined;
  /** What a resume found and did, for `Session.resume`'s caller. */
  #resumed: (ResumeCounts & { ended: boolean }) | undefined;

  /**
   * Resumes the session whose run is in `engine.logDir` after its process stopped (a kill, a
   * crash, a signal): its root's transcript and generation are read back from the run journal;
   * every agent that was running goes on from its last committed step under its own id; results
   * that settled and never reached the root are delivered once; a turn that was under way goes
   * on (its committed calls run again, its committed requests do not). Throws a UsageError when
   * the folder holds no session's journal, a JournalVersionError for another version's.
   * `options.system` defaults to the stopped session's.
   */
  static async resume(engine: Engine, options: SessionOptions = {}): Promise<Session> {
    checkOptions(SESSION_FIELDS, options);
    const run = await readStoppedRun(engine.logDir);
    const system = options.system ?? run.root.system;
    const session = new Session(
      engine,
      { ...options, ...(system === undefined ? {} : { system }) },
      run.root,
    );
    session.#continue(run.root);
    const counts = resumeAgents(engine, session.#scope, run, (event) => session.#emit(event));
    session.#resumed = { ...counts, ended: run.root.ended };
    if (session.#options.autoWake && session.#running === 0 && session.#scope.pending.length > 0) {
      void session.#enqueueTurn([], undefined);
    }
    return session;
  }

  constructor(engine: Engine, options: SessionOptions = {}, stopped?: StoppedRoot) {
    checkOptions(SESSION_FIELDS, options);
    this.#engine = engine;
    this.#options = options;
    this.#provider = new Provider(engine.provider);
    this.#journal = new RootJournal(engine.logDir, stopped ? stopped.inc + 1 : 0);
    if (stopped) {
      this.#messages = structuredClone(stopped.messages);
      this.#journal.start(this.#rootMeta(stopped.generation), this.#messages);
    }
    this.#scope = new AgentScope({
      spawn: (agent, context) => engine.spawn(agent, context),
      owner: ROOT_ID,
      ownerDepth: 0,
      generation: stopped?.generation ?? 0,
      ceilingMs: options.ceilingMs ?? engine.ceilingMs ?? DEFAULT_CEILING_MS,
      logDirOf: () => engine.logDir,
      patienceMs: options.patienceMs,
      emit: (event) => this.#emit(event),
      onSettle: (_result, delivered) => this.#onAsyncSettle(delivered),
      ...(engine.tracer
        ? {
            traceContextOf: (span) =>
              span !== undefined && this.#turnSpans
                ? this.#turnSpans.contextOf(span)
                : otelContext.active(),
          }
        : {}),
    });
    this.#unsubscribeGovernor = engine.governor?.subscribe((state) =>
      this.#emit({ type: 'governor-update', state }),
    );
  }

  get generation(): number {
    return this.#scope.generation;
  }

  /**
   * For a session made by `Session.resume`: agents that went on, results delivered that had not
   * been, agents failed for a corrupt record, and whether the stopped session had ended.
   */
  get resumed(): (ResumeCounts & { ended: boolean }) | undefined {
    return this.#resumed === undefined ? undefined : { ...this.#resumed };
  }

  /** The root's meta in its journal's start records. */
  #rootMeta(generation: number): Record<string, unknown> {
    return {
      id: ROOT_ID,
      title: ROOT_ID,
      depth: 0,
      generation,
      model: this.#engine.provider.model,
      session: true,
      ...(this.#options.system === undefined ? {} : { system: this.#options.system }),
    };
  }

  /** The root's transcript (a copy). */
  get transcript(): MessageParam[] {
    return structuredClone(this.#messages);
  }

  /** Results delivered to the root so far, in delivery order (a copy). */
  get delivered(): AgentResult[] {
    return [...this.#delivered];
  }

  /** Results waiting for the next turn boundary (a copy). */
  get pending(): AgentResult[] {
    return this.#scope.pending;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Every event leaves through here, with secrets removed. */
  #emit(event: SessionEvent): void {
    this.#events.emit(redactEvent(event));
  }

  /**
   * Live events of the session: the root's and every child's. A subscriber that falls more than
   * 10,000 events behind loses the oldest and is told so by an `events-dropped` event.
   */
  events(signal?: AbortSignal): AsyncIterableIterator<SessionEvent> {
    return this.#events.subscribe(signal);
  }

  /**
   * Sends a user message and runs a root turn. Turns never overlap: this waits its turn.
   * Rejects with a UsageError once the session is closed.
   */
  send(text: string, options: { signal?: AbortSignal } = {}): Promise<TurnResult> {
    checkOption('text', nonEmptyString(), text);
    if (this.#closed) {
      return Promise.reject(
        new UsageError('Expected an open session for `send`, got one that was closed'),
      );
    }
    return this.#enqueueTurn([{ type: 'text', text }], options.signal);
  }

  /** Changes the model of the root and of children spawned afterwards. */
  setModel(model: string): void {
    this.#engine.setModel(model);
    this.#provider = new Provider(this.#engine.provider);
  }

  /**
   * Starts an async agent as if the root had called `agent` with mode `async`: its result
   * arrives in this session's inbox, under the same generation and ceiling rules.
   */
  spawnAsync(input: AgentToolInput): AgentReceipt {
    if (this.#closed) {
      throw new UsageError('Expected an open session for `spawnAsync`, got one that was closed');
    }
    return this.#scope.spawnAsync(input);
  }

  /** Live async agents. */
  list(): AgentInfo[] {
    return this.#scope.list();
  }

  /** Cancels one async agent (reason `user`); says whether it was live. */
  cancel(id: string): { id: string; wasLive: boolean } {
    return this.#scope.cancel(id);
  }

  /**
   * Cancels the foreground turn and every live async agent (reason `clear`), empties the
   * transcript and the inbox, and increments the generation: no result of an older generation is
   * ever delivered; each one dropped is reported by an `agent-stale` event.
   */
  clear(): void {
    this.#scope.clear();
    this.#messages = [];
    if (this.#journal.started) this.#journal.start(this.#rootMeta(this.#scope.generation), []);
    this.#foreground?.abort('clear');
    this.#emit({ type: 'session-clear', generation: this.#scope.generation });
  }

  /**
   * Resolves when no async agent is live, no turn runs, and (with autoWake) the inbox is empty.
   */
  waitIdle(options: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const signal = options.signal;
      const onAbort = () => {
        this.#idleWaiters = this.#idleWaiters.filter((waiter) => waiter !== done);
        reject(signal?.reason);
      };
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#idleWaiters.push(done);
    });
  }

  /**
   * Cancels the foreground turn and every live agent (reason `shutdown`); turns still queued end
   * without running. Resolves when every agent has its result and the event stream has ended.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Closed with work still going: the run was stopped, and a resume takes it up again.
    const stopped = !this.#isIdle() || this.#scope.pending.length > 0;
    this.#foreground?.abort('shutdown');
    await this.#scope.close('shutdown');
    await this.#turnChain.catch(() => {});
    await this.#journal.end(this.#lastTurn, {
      stopped,
      generation: this.#scope.generation,
      policy: this.#engine.logPolicy,
    });
    this.#checkIdle();
    this.#unsubscribeGovernor?.();
    this.#events.close();
  }

  /** Cancels the running foreground turn (and its sync children), if any. */
  cancelTurn(reason: 'user' | 'shutdown' = 'user'): boolean {
    if (!this.#foreground || this.#foreground.signal.aborted) return false;
    this.#foreground.abort(reason);
    return true;
  }

  /** Takes up the stopped root's turn when one was under way. */
  #continue(stopped: StoppedRoot): void {
    if (stopped.pending || stopped.underWay) {
      void this.#enqueueTurn([], undefined, stopped.pending ? { pending: stopped.pending } : {});
    }
  }

  #onAsyncSettle(delivered: boolean): void {
    if (delivered && this.#options.autoWake && this.#running === 0 && !this.#closed) {
      void this.#enqueueTurn([], undefined);
      return;
    }
    this.#checkIdle();
  }

  // ── Turns ──────────────────────────────────────────────────────────────────────────────────

  #enqueueTurn(
    content: ContentBlockParam[],
    signal: AbortSignal | undefined,
    resume?: { pending?: ToolCall[] },
  ): Promise<TurnResult> {
    this.#running++;
    const turn = this.#turnChain.then(() => this.#runTurn(content, signal, resume));
    this.#turnChain = turn.catch(() => {});
    return turn.finally(() => {
      this.#running--;
      // Results that arrived during the turn start the next one by themselves.
      if (
        this.#options.autoWake &&
        this.#running === 0 &&
        this.#scope.pending.length > 0 &&
        !this.#closed
      ) {
        void this.#enqueueTurn([], undefined);
      }
      this.#checkIdle();
    });
  }

  /**
   * Runs one turn. `resume` takes up a stopped run's turn: it runs with nothing new to say, and
   * with `pending` calls it answers those first (no delivery may come between a call and its
   * answer: results wait for the next turn).
   */
  async #runTurn(
    content: ContentBlockParam[],
    signal: AbortSignal | undefined,
    resume?: { pending?: ToolCall[] },
  ): Promise<TurnResult> {
    const generation = this.#scope.generation;
    const usage = emptyUsage();
    // A turn queued before close() never runs: it could spawn agents nobody will collect.
    if (this.#closed) {
      return { outcome: 'cancelled', text: '', reason: 'shutdown', usage, generation };
    }
    const deliver = resume?.pending ? [] : this.#scope.takeInbox();
    const blocks = [...(deliver.length > 0 ? renderInbox(deliver) : []), ...content];
    const turn = ++this.#turn;
    if (blocks.length === 0 && !resume) return { outcome: 'ready', text: '', usage, generation };
    this.#delivered.push(...deliver);
    if (blocks.length > 0) this.#appendUser(blocks);
    this.#emit({ type: 'turn-start', turn, generation, delivered: deliver.length });
    const controller = new AbortController();
    this.#foreground = controller;
    const onAbort = () => controller.abort('user');
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    let traced: RootTrace | undefined;
    let result: TurnResult;
    try {
      const tools = await this.#rootTools();
      // Opened once nothing before the turn can throw: every span opened is ended below.
      traced = this.#traceTurn();
      result = await runRootTurn({
        maxDepth: this.#engine.maxDepth,
        system: this.#options.system ?? DEFAULT_ROOT_SYSTEM,
        messages: this.#messages,
        tools,
        provider: this.#provider,
        gate: this.#engine.governor,
        patienceMs: this.#options.patienceMs,
        cache: this.#engine.cacheSettings(),
        maxSteps: this.#options.maxSteps ?? DEFAULT_MAX_STEPS,
        signal: controller.signal,
        workspace: this.#engine.workspace,
        usage,
        generation,
        emit: (event) => this.#emit(event),
        trace: traced?.spans,
        toolTimeoutMs: this.#engine.toolTimeoutMs,
        commit: (messages) => this.#journal.step(messages),
        resumeFrom: resume?.pending
          ? { steps: 0, counted: 0, nextStepFree: false, pending: resume.pending }
          : undefined,
      });
      this.#lastTurn = result;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (this.#foreground === controller) this.#foreground = undefined;
    }
    traced?.end(result);
    this.#emit({ type: 'turn-end', turn, result });
    return result;
  }

  /** A turn's `invoke_agent root` span and the sink of its steps, when the engine traces. */
  #traceTurn(): RootTrace | undefined {
    const tracer = this.#engine.tracer;
    if (!tracer) return undefined;
    const traced = traceRootTurn(tracer, this.#engine.provider.model);
    this.#turnSpans = traced.spans;
    return {
      spans: traced.spans,
      end: (result) => {
        if (this.#turnSpans === traced.spans) this.#turnSpans = undefined;
        traced.end(result);
      },
    };
  }

  /** Appends user content; merges into the last message when a failed turn left a user last. */
  #appendUser(blocks: ContentBlockParam[]): void {
    if (!this.#journal.started)
      this.#journal.start(this.#rootMeta(this.#scope.generation), this.#messages);
    this.#journal.step([{ role: 'user', content: blocks }]);
    const last = this.#messages.at(-1);
    if (last?.role === 'user') {
      const existing =
        typeof last.content === 'string'
          ? [{ type: 'text' as const, text: last.content }]
          : last.content;
      last.content = [...existing, ...blocks];
      return;
    }
    this.#messages.push({ role: 'user', content: blocks });
  }

  async #rootTools(): Promise<Map<string, AnyTool>> {
    if (this.#tools) return this.#tools;
    const tools = new Map<string, AnyTool>();
    if (this.#engine.maxDepth > 0) {
      const agents = this.#engine.agents.map(({ name, description }) => ({ name, description }));
      for (const tool of spawnTools(this.#scope, agents)) tools.set(tool.name, tool);
    }
    if (this.#engine.workspace) for (const tool of WORKSPACE_TOOLS) tools.set(tool.name, tool);
    for (const modulePath of this.#engine.toolModules) {
      for (const tool of await loadToolModule(modulePath)) tools.set(tool.name, tool);
    }
    for (const tool of this.#engine.hostTools) tools.set(tool.name, tool);
    this.#tools = tools;
    return tools;
  }

  #isIdle(): boolean {
    return (
      this.#scope.liveCount === 0 &&
      this.#running === 0 &&
      (!this.#options.autoWake || this.#scope.pending.length === 0 || this.#closed)
    );
  }

  #checkIdle(): void {
    if (!this.#isIdle()) return;
    const waiters = this.#idleWaiters.splice(0);
    for (const waiter of waiters) waiter();
  }
}
