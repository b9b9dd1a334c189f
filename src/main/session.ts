import path from 'node:path';
import type { AgentEvent } from '../shared/events.js';
import { runAgentLoop } from '../shared/loop/agent-loop.js';
import { Provider } from '../shared/provider/provider.js';
import type { ContentBlockParam, MessageParam } from '../shared/provider/types.js';
import { redactEvent, redactSecrets } from '../shared/redact.js';
import { type AgentResult, type AgentUsage, emptyUsage, outcomeTag } from '../shared/result.js';
import { loadToolModule } from '../shared/tools/modules.js';
import {
  type AgentInfo,
  type AgentReceipt,
  type AgentSpawner,
  type AgentToolInput,
  spawnTools,
} from '../shared/tools/spawn-tools.js';
import type { AnyTool, ToolContext } from '../shared/tools/types.js';
import { WORKSPACE_TOOLS } from '../shared/tools/workspace.js';
import { DEFAULT_CEILING_MS, type Engine } from './engine.js';
import { EventHub } from './event-hub.js';
import { renderInbox } from './inbox.js';
import { checkInteger, checkString } from './options.js';
import { AgentRegistry } from './registry.js';

export const DEFAULT_ROOT_SYSTEM = [
  'You are the root agent of a cohort session, working for the user.',
  'You can start sub-agents with the `agent` tool. mode "sync" waits and gives you the result;',
  'mode "async" returns a receipt at once and the result arrives later as a message, so use it',
  'for independent work you can fan out. `agents` lists live background agents; `agent_cancel`',
  'stops one. A sub-agent sees only the prompt you write: make it self-contained.',
].join(' ');

export interface SessionOptions {
  /** The root's system prompt; default: a short description of the agent tools. */
  system?: string;
  /** Start a turn by itself when an async result arrives while idle (CLI default: on). */
  autoWake?: boolean;
  /** Lifetime ceiling of async agents, in ms (default one hour; per spawn too). */
  ceilingMs?: number;
  /** Steps one root turn may take (default 50). */
  maxSteps?: number;
}

/** How one root turn ended. */
export interface TurnResult {
  outcome: 'ready' | 'cancelled' | 'capped' | 'failed';
  /** The root's final text, when ready. */
  text: string;
  reason?: string;
  usage: AgentUsage;
  generation: number;
}

/** Everything a session's event stream carries. */
export type SessionEvent =
  | AgentEvent
  | { type: 'turn-start'; turn: number; generation: number; delivered: number }
  | { type: 'turn-end'; turn: number; result: TurnResult }
  | { type: 'agent-stale'; agentId: string; generation: number; current: number }
  | { type: 'session-clear'; generation: number };

/** The id the root's own events carry. */
export const ROOT_ID = 'root';

/**
 * A parent session on the main thread: the root turn loop (the same loop children run), its
 * registry of live async agents, the typed inbox, the generation, and the reaper.
 */
export class Session implements AgentSpawner {
  readonly #engine: Engine;
  readonly #options: SessionOptions;
  readonly #events = new EventHub<SessionEvent>();
  readonly #live = new AgentRegistry();
  readonly #inbox: AgentResult[] = [];
  readonly #delivered: AgentResult[] = [];
  #messages: MessageParam[] = [];
  #generation = 0;
  #turn = 0;
  #turnChain: Promise<unknown> = Promise.resolve();
  #running = 0;
  #foreground: AbortController | undefined;
  #provider: Provider;
  #tools: Map<string, AnyTool> | undefined;
  #idleWaiters: (() => void)[] = [];
  #closed = false;

  constructor(engine: Engine, options: SessionOptions = {}) {
    checkString('system', options.system, true);
    checkInteger('ceilingMs', options.ceilingMs, 1);
    checkInteger('maxSteps', options.maxSteps, 1);
    this.#engine = engine;
    this.#options = options;
    this.#provider = new Provider(engine.provider);
  }

  get generation(): number {
    return this.#generation;
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
    return [...this.#inbox];
  }

  /** Every event leaves through here, with secrets removed. */
  #emit(event: SessionEvent): void {
    this.#events.emit(redactEvent(event));
  }

  /** Live events of the session: the root's and every child's. */
  events(signal?: AbortSignal): AsyncIterableIterator<SessionEvent> {
    return this.#events.subscribe(signal);
  }

  /** Sends a user message and runs a root turn. Turns never overlap: this waits its turn. */
  send(text: string, options: { signal?: AbortSignal } = {}): Promise<TurnResult> {
    checkString('text', text);
    return this.#enqueueTurn([{ type: 'text', text }], options.signal);
  }

  /** Changes the model of the root and of children spawned afterwards. */
  setModel(model: string): void {
    this.#engine.setModel(model);
    this.#provider = new Provider(this.#engine.provider);
  }

  /** Live async agents. */
  list(): AgentInfo[] {
    return this.#live.list();
  }

  /** Cancels one async agent (reason `user`); says whether it was live. */
  cancel(id: string): { id: string; wasLive: boolean } {
    return this.#live.cancel(id);
  }

  /**
   * Cancels every live async agent (reason `clear`), empties the transcript and the inbox, and
   * increments the generation: no result of an older generation is ever delivered.
   */
  clear(): void {
    // The generation moves first: anything that settles from here on is stale, whatever order
    // the cancels and settles run in.
    this.#generation++;
    this.#inbox.length = 0;
    this.#messages = [];
    this.#foreground?.abort('clear');
    void this.#live.cancelAll('clear');
    this.#emit({ type: 'session-clear', generation: this.#generation });
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

  /** Cancels the foreground turn and every live agent, then ends the event stream. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#foreground?.abort('shutdown');
    await this.#live.cancelAll('shutdown');
    await this.#turnChain.catch(() => {});
    this.#events.close();
  }

  /** Cancels the running foreground turn (and its sync children), if any. */
  cancelTurn(reason: 'user' | 'shutdown' = 'user'): boolean {
    if (!this.#foreground || this.#foreground.signal.aborted) return false;
    this.#foreground.abort(reason);
    return true;
  }

  // ── AgentSpawner: what the root's spawn tools call ────────────────────────────────────────

  async runSync(input: AgentToolInput, context: ToolContext): Promise<string> {
    const handle = this.#engine.spawn(
      {
        prompt: input.prompt,
        title: input.title,
        ...(input.system === undefined ? {} : { system: input.system }),
        ...(input.tools === undefined ? {} : { tools: input.tools }),
        onEvent: (event) => this.#emit(event),
      },
      { depth: context.depth + 1, generation: this.#generation },
    );
    this.#emit({
      type: 'agent-start',
      agentId: handle.id,
      title: handle.title,
      depth: context.depth + 1,
      mode: 'sync',
    });
    // A sync child is bounded by its parent's turn.
    const onAbort = () => handle.cancel('parent');
    if (context.signal.aborted) onAbort();
    else context.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const result = await handle.result;
      return result.text !== '' ? result.text : outcomeTag(result);
    } finally {
      context.signal.removeEventListener('abort', onAbort);
    }
  }

  spawnAsync(input: AgentToolInput, context: ToolContext): AgentReceipt {
    const generation = this.#generation;
    const handle = this.#engine.spawn(
      {
        prompt: input.prompt,
        title: input.title,
        ...(input.system === undefined ? {} : { system: input.system }),
        ...(input.tools === undefined ? {} : { tools: input.tools }),
        // Async output goes only to the child's own log; the session sees start and settle.
        streamText: false,
      },
      { depth: context.depth + 1, generation },
    );
    const logDir = path.join(this.#engine.logDir, handle.id);
    this.#live.add(handle, {
      logDir,
      ceilingMs: this.#options.ceilingMs ?? this.#engine.ceilingMs ?? DEFAULT_CEILING_MS,
      onSettle: (result) => this.#onAsyncSettle(result, generation),
    });
    this.#emit({
      type: 'agent-start',
      agentId: handle.id,
      title: handle.title,
      depth: context.depth + 1,
      mode: 'async',
    });
    return { id: handle.id, title: handle.title, status: 'started', logDir };
  }

  #onAsyncSettle(result: AgentResult, generation: number): void {
    this.#emit({ type: 'agent-settle', agentId: result.id, result });
    if (generation !== this.#generation || result.generation !== this.#generation || this.#closed) {
      this.#emit({
        type: 'agent-stale',
        agentId: result.id,
        generation: result.generation,
        current: this.#generation,
      });
    } else {
      this.#inbox.push(result);
      if (this.#options.autoWake && this.#running === 0) {
        void this.#enqueueTurn([], undefined);
        return;
      }
    }
    this.#checkIdle();
  }

  // ── Turns ──────────────────────────────────────────────────────────────────────────────────

  #enqueueTurn(content: ContentBlockParam[], signal: AbortSignal | undefined): Promise<TurnResult> {
    this.#running++;
    const turn = this.#turnChain.then(() => this.#runTurn(content, signal));
    this.#turnChain = turn.catch(() => {});
    return turn.finally(() => {
      this.#running--;
      // Results that arrived during the turn start the next one by themselves.
      if (
        this.#options.autoWake &&
        this.#running === 0 &&
        this.#inbox.length > 0 &&
        !this.#closed
      ) {
        void this.#enqueueTurn([], undefined);
      }
      this.#checkIdle();
    });
  }

  async #runTurn(
    content: ContentBlockParam[],
    signal: AbortSignal | undefined,
  ): Promise<TurnResult> {
    const generation = this.#generation;
    const usage = emptyUsage();
    const deliver = this.#inbox.splice(0);
    const blocks = [...(deliver.length > 0 ? renderInbox(deliver) : []), ...content];
    const turn = ++this.#turn;
    if (blocks.length === 0) {
      return { outcome: 'ready', text: '', usage, generation };
    }
    this.#delivered.push(...deliver);
    this.#appendUser(blocks);
    this.#emit({ type: 'turn-start', turn, generation, delivered: deliver.length });
    const controller = new AbortController();
    this.#foreground = controller;
    const onAbort = () => controller.abort('user');
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    let result: TurnResult;
    try {
      const outcome = await runAgentLoop({
        agentId: ROOT_ID,
        depth: 0,
        maxDepth: this.#engine.maxDepth,
        system: this.#options.system ?? DEFAULT_ROOT_SYSTEM,
        messages: this.#messages,
        tools: await this.#rootTools(),
        provider: this.#provider,
        maxSteps: this.#options.maxSteps ?? 50,
        signal: controller.signal,
        workspace: this.#engine.workspace,
        usage,
        sink: {
          commit: () => {},
          stepStart: (step) => this.#emit({ type: 'step-start', agentId: ROOT_ID, step }),
          textDelta: (text) => this.#emit({ type: 'text-delta', agentId: ROOT_ID, text }),
          toolCall: (call) =>
            this.#emit({
              type: 'tool-call',
              agentId: ROOT_ID,
              callId: call.id,
              name: call.name,
              input: call.input,
            }),
          toolResult: (call, block) =>
            this.#emit({
              type: 'tool-result',
              agentId: ROOT_ID,
              callId: call.id,
              name: call.name,
              isError: block.is_error === true,
            }),
          stepEnd: (step, stepUsage) =>
            this.#emit({ type: 'step-end', agentId: ROOT_ID, step, usage: stepUsage }),
          providerRetry: (info) =>
            this.#emit({ type: 'provider-retry', agentId: ROOT_ID, ...info }),
        },
      });
      switch (outcome.kind) {
        case 'ready':
          result = { outcome: 'ready', text: redactSecrets(outcome.text), usage, generation };
          break;
        case 'cancelled':
          result = { outcome: 'cancelled', text: '', reason: outcome.reason, usage, generation };
          break;
        case 'capped':
          result = { outcome: 'capped', text: '', usage, generation };
          break;
        case 'failed':
          result = { outcome: 'failed', text: '', reason: outcome.reason, usage, generation };
          break;
        default:
          // The root is never advertised `reply` and never nudged; these cannot end a root turn.
          result = {
            outcome: 'failed',
            text: '',
            reason: `internal: ${outcome.kind}`,
            usage,
            generation,
          };
      }
    } catch (error) {
      const reason = `internal: ${error instanceof Error ? error.message : String(error)}`;
      result = { outcome: 'failed', text: '', reason, usage, generation };
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (this.#foreground === controller) this.#foreground = undefined;
    }
    this.#emit({ type: 'turn-end', turn, result });
    return result;
  }

  /** Appends user content; merges into the last message when a failed turn left a user last. */
  #appendUser(blocks: ContentBlockParam[]): void {
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
    if (this.#engine.maxDepth > 0) for (const tool of spawnTools(this)) tools.set(tool.name, tool);
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
      this.#live.size === 0 &&
      this.#running === 0 &&
      (!this.#options.autoWake || this.#inbox.length === 0)
    );
  }

  #checkIdle(): void {
    if (!this.#isIdle()) return;
    const waiters = this.#idleWaiters.splice(0);
    for (const waiter of waiters) waiter();
  }
}
