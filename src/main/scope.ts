import type { Context } from '@opentelemetry/api';
import type { AgentEvent } from '../shared/events.js';
import type { Lane } from '../shared/lane/lane.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import { type AgentResult, type CancelReason, outcomeTag } from '../shared/result.js';
import type {
  AgentInfo,
  AgentReceipt,
  AgentSpawner,
  AgentToolInput,
} from '../shared/tools/spawn-tools.js';
import type { ToolContext } from '../shared/tools/types.js';
import type { TraceSpanId } from '../shared/trace/types.js';
import type { AgentOptions, SpawnContext } from './engine.js';
import type { Carried } from './engine-options.js';
import { DETACHED } from './host-bridge.js';
import { AgentRegistry } from './registry.js';
import type { ChildHandle } from './runners/local/pool.js';
import type { TreeLedger } from './tree-budget.js';

export interface ScopeOptions {
  /** Spawns one child (the engine's `spawn`). */
  spawn(options: AgentOptions, context: SpawnContext): ChildHandle;
  /** The id of the agent that owns the scope (`root` for a session's root). */
  owner: string;
  /** Depth of the agent that owns the scope: 0 for the root. Its children are one deeper. */
  ownerDepth: number;
  /** The generation the scope starts at. */
  generation: number;
  /** Lifetime ceiling of async agents, in ms. */
  ceilingMs: number;
  logDirOf(id: string): string;
  /** Provider settings for children; unset, the engine's current ones at each spawn. */
  provider?: ProviderConfig;
  /** The owner's patience (`patienceMs`), which its children inherit unless they have their own. */
  patienceMs?: number | undefined;
  /** The owner's lane, which its children inherit. */
  lane?: Lane | undefined;
  /** The owner's deadline (epoch ms, the `auto` lane), which its children inherit. */
  deadline?: number | undefined;
  /**
   * Where the scope's events go: agent start and async settle and stale. Sync children stream
   * their own events here too when it is set.
   */
  emit?: (event: AgentEvent) => void;
  /** Called after an async agent settled and was queued or dropped as stale. */
  onSettle?: (result: AgentResult, delivered: boolean) => void;
  /**
   * The trace context of the owner's tool call `span` (its `execute_tool` span), to hang a
   * child's `invoke_agent` span under; only when the engine traces.
   */
  traceContextOf?: (span: TraceSpanId | undefined) => Context;
  /** The tree budget the owner belongs to: its children's spending counts against it. */
  tree?: TreeLedger | undefined;
  /** The owner's tools' `context` and its API key, which its children inherit. */
  carried?: Carried | undefined;
}

/**
 * A child of a stopped run, handed back to its parent's scope when the run resumes: one that goes
 * on (`handle`), or one that had settled (`result`), delivered already or not.
 */
export interface Adoption {
  id: string;
  title: string;
  mode: 'sync' | 'async';
  /** The tool_use id of the call that spawned it: that call run again finds it. */
  callId?: string | undefined;
  generation: number;
  handle?: ChildHandle;
  result?: AgentResult;
  /** Its result is in its parent's transcript already. */
  delivered?: boolean;
}

/** A child as the call that spawned it finds it again. */
interface Spawned {
  result: Promise<AgentResult>;
  /** Unset for a child that had settled before its run resumed. */
  handle?: ChildHandle;
  receipt?: AgentReceipt;
}

/**
 * The agents one agent has spawned: its registry of live async agents with their reaper, its
 * inbox, its generation, and the mapping from the `agent` tool's input to a spawn. The root
 * session and every child that may spawn (through its host bridge) each own one, so depth ≥ 2
 * follows the root's rules exactly.
 *
 * A result is queued only if it belongs to the scope's current generation and the scope is open;
 * anything else is reported `agent-stale` and dropped.
 */
export class AgentScope implements AgentSpawner {
  readonly #options: ScopeOptions;
  readonly #live = new AgentRegistry();
  /** Sync children, cancelled with the scope. */
  readonly #sync = new Set<ChildHandle>();
  readonly #inbox: AgentResult[] = [];
  /**
   * Its spawns by the tool_use id that made them: the same call run again (its owner resumed on
   * a fresh worker runs its last step's tools again) finds the child it started. Only a child's
   * scope keeps its own; the root's owner never resumes on another worker. Both keep the ones
   * adopted from a stopped run (`adopt`).
   */
  readonly #byCall = new Map<string, Spawned>();
  #waiters: (() => void)[] = [];
  #generation: number;
  #closed = false;

  constructor(options: ScopeOptions) {
    this.#options = options;
    this.#generation = options.generation;
  }

  get generation(): number {
    return this.#generation;
  }

  /** Live async agents. */
  get liveCount(): number {
    return this.#live.size;
  }

  /** Results waiting for delivery, in settle order (a copy). */
  get pending(): AgentResult[] {
    return [...this.#inbox];
  }

  get closed(): boolean {
    return this.#closed;
  }

  async runSync(input: AgentToolInput, context: ToolContext): Promise<string> {
    const emit = this.#options.emit;
    const known = this.#known(context.callId);
    if (known && !known.handle) return textOf(await known.result);
    const handle = known?.handle ?? this.#spawn(input, 'sync', emit, context);
    if (!known) this.#remember(context.callId, { handle, result: handle.result });
    this.#sync.add(handle);
    // A sync child is bounded by its parent's turn (or its parent's cancelled call). A call
    // whose bridge went with its worker is not a cancel: the parent comes back for the child.
    const onAbort = () => {
      if (context.signal.reason !== DETACHED) handle.cancel('parent');
    };
    if (context.signal.aborted) onAbort();
    else context.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return textOf(await handle.result);
    } finally {
      context.signal.removeEventListener('abort', onAbort);
      this.#sync.delete(handle);
    }
  }

  spawnAsync(input: AgentToolInput, context?: Pick<ToolContext, 'span' | 'callId'>): AgentReceipt {
    const known = this.#known(context?.callId)?.receipt;
    if (known) return known;
    const generation = this.#generation;
    const handle = this.#spawn(input, 'async', undefined, context);
    const receipt = this.#watch(handle, generation);
    this.#remember(context?.callId, { handle, result: handle.result, receipt });
    return receipt;
  }

  /** Registers a live async child, with its reaper; its result goes to the inbox. */
  #watch(handle: ChildHandle, generation: number): AgentReceipt {
    const logDir = this.#options.logDirOf(handle.id);
    this.#live.add(handle, {
      logDir,
      ceilingMs: this.#options.ceilingMs,
      onSettle: (result) => this.#onAsyncSettle(result, generation),
    });
    return { id: handle.id, title: handle.title, status: 'started', logDir };
  }

  /**
   * Takes back a child of a stopped run (`Session.resume`): one that goes on is live again, and
   * its call, run again, finds it; one that settled and was not delivered is delivered now
   * (or dropped as stale, by the usual rule).
   */
  adopt(child: Adoption): void {
    const { handle, result, callId } = child;
    const receipt: AgentReceipt = {
      id: child.id,
      title: child.title,
      status: 'started',
      logDir: this.#options.logDirOf(child.id),
    };
    if (handle) {
      const depth = this.#options.ownerDepth + 1;
      this.#options.emit?.({
        type: 'agent-start',
        agentId: handle.id,
        title: handle.title,
        depth,
        mode: child.mode,
      });
      if (child.mode === 'async') this.#watch(handle, child.generation);
      if (callId !== undefined)
        this.#byCall.set(callId, { handle, result: handle.result, receipt });
      return;
    }
    if (!result) return;
    if (callId !== undefined)
      this.#byCall.set(callId, { result: Promise.resolve(result), receipt });
    if (child.mode === 'async' && !child.delivered) this.#onAsyncSettle(result, child.generation);
  }

  #known(callId: string | undefined): Spawned | undefined {
    return callId === undefined ? undefined : this.#byCall.get(callId);
  }

  #remember(callId: string | undefined, spawned: Spawned): void {
    if (callId !== undefined && this.#options.ownerDepth > 0) this.#byCall.set(callId, spawned);
  }

  list(): AgentInfo[] {
    return this.#live.list();
  }

  /** Cancels one async agent (reason `user`); says whether it was live. */
  cancel(id: string): { id: string; wasLive: boolean } {
    return this.#live.cancel(id);
  }

  /** Takes every pending result, in settle order. */
  takeInbox(): AgentResult[] {
    return this.#inbox.splice(0);
  }

  /**
   * Resolves true once a result is pending; false at once when no async agent is live (none can
   * come) or the scope is closed, and false when `signal` aborts.
   */
  waitForResult(signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const check = (): boolean => {
        if (this.#inbox.length > 0) resolve(true);
        else if (this.#live.size === 0 || this.#closed || signal.aborted) resolve(false);
        else return false;
        return true;
      };
      if (check()) return;
      const onAbort = () => {
        this.#waiters = this.#waiters.filter((waiter) => waiter !== wake);
        resolve(false);
      };
      const wake = () => {
        if (check()) signal.removeEventListener('abort', onAbort);
        else this.#waiters.push(wake);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(wake);
    });
  }

  /**
   * Moves to a new generation: pending results are dropped as stale, and every live async agent
   * is cancelled with reason `clear`. Results of the old generation are never delivered.
   */
  clear(): void {
    // The generation moves first: anything that settles from here on is stale, whatever order
    // the cancels and settles run in.
    this.#generation++;
    for (const result of this.#inbox.splice(0)) this.#reportStale(result);
    void this.#live.cancelAll('clear');
    this.#wake();
  }

  /**
   * Closes the scope: no more results are queued, every sync and async child is cancelled with
   * `reason`, and this resolves when each has its result.
   */
  async close(reason: CancelReason): Promise<void> {
    this.#closed = true;
    for (const handle of this.#sync) handle.cancel(reason);
    const results = [...this.#sync].map((handle) => handle.result);
    await Promise.all([...results, this.#live.cancelAll(reason)]);
    this.#wake();
  }

  #spawn(
    input: AgentToolInput,
    mode: 'sync' | 'async',
    onEvent: ((event: AgentEvent) => void) | undefined,
    call: Pick<ToolContext, 'span' | 'callId'> | undefined,
  ): ChildHandle {
    const span = call?.span;
    const { traceContextOf, tree, patienceMs, carried, lane, deadline } = this.#options;
    const handle = this.#options.spawn(
      {
        prompt: input.prompt,
        title: input.title,
        system: input.system,
        tools: input.tools,
        agent: input.agent,
        outputSchema: input.outputSchema,
        // Sync children stream to the scope's events; async ones only to their own logs.
        onEvent,
        streamText: onEvent !== undefined,
      },
      {
        depth: this.#options.ownerDepth + 1,
        generation: this.#generation,
        mode,
        parent: this.#options.owner,
        ...(call?.callId === undefined ? {} : { callId: call.callId }),
        ...(this.#options.provider ? { provider: this.#options.provider } : {}),
        ...(traceContextOf ? { traceParent: traceContextOf(span) } : {}),
        ...(tree ? { tree } : {}),
        ...(patienceMs === undefined ? {} : { patienceMs }),
        ...(lane === undefined ? {} : { lane }),
        ...(deadline === undefined ? {} : { deadline }),
        ...(carried ? { inherited: carried } : {}),
      },
    );
    // A spawn that races the scope's close still gets its one result: cancelled at once.
    if (this.#closed) handle.cancel('parent');
    this.#options.emit?.({
      type: 'agent-start',
      agentId: handle.id,
      title: handle.title,
      depth: this.#options.ownerDepth + 1,
      mode,
    });
    return handle;
  }

  #onAsyncSettle(result: AgentResult, generation: number): void {
    this.#options.emit?.({ type: 'agent-settle', agentId: result.id, result });
    const current =
      !this.#closed && generation === this.#generation && result.generation === this.#generation;
    if (current) this.#inbox.push(result);
    else this.#reportStale(result);
    this.#wake();
    this.#options.onSettle?.(result, current);
  }

  #reportStale(result: AgentResult): void {
    this.#options.emit?.({
      type: 'agent-stale',
      agentId: result.id,
      generation: result.generation,
      current: this.#generation,
    });
  }

  #wake(): void {
    const waiters = this.#waiters.splice(0);
    for (const wake of waiters) wake();
  }
}

/** What a sync child's call answers: its text, or its outcome's tag when it has none. */
function textOf(result: AgentResult): string {
  return result.text !== '' ? result.text : outcomeTag(result);
}
