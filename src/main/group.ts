import type { Budget } from '../shared/budget.js';
import { UsageError } from '../shared/errors.js';
import type { LogPolicy } from '../shared/journal/policy.js';
import type { Lane } from '../shared/lane/lane.js';
import { defined } from '../shared/option-schema.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import {
  type AgentResult,
  type CancelReason,
  cancelReasonOf,
  toCancelReason,
} from '../shared/result.js';
import type { CarriedRules } from './carried.js';
import type { AgentOptions, Carried, SpawnContext } from './engine-options.js';
import { checkGroup, type GroupOptions } from './group-options.js';
import { type MapOptions, mapAgents, type SpecValue } from './map-agents.js';
import { QueuedSpawn } from './queued-spawn.js';
import type { ChildHandle } from './runners/spawned-child.js';
import { TreeLedger } from './tree-budget.js';

export { checkGroup, type GroupOptions } from './group-options.js';

/** The cancel reason of a group's queued spawns when it drains: they never start. */
export const DRAIN_REASON = 'drain';

/** Where a group stands: taking spawns, draining, drained, or cancelled. */
export type GroupState = 'open' | 'draining' | 'drained' | 'cancelled';

/** A group's live counts, its agents' descendants and nested groups' agents included in spend. */
export interface GroupTotals {
  agents: {
    /** Handles given out: queued + running + settled. */
    spawned: number;
    /** Waiting for a slot (`maxConcurrency`). */
    queued: number;
    /** Spawned to the engine and not settled (one may still wait for a worker thread). */
    running: number;
    settled: number;
  };
  /** Input tokens of every step of its agents and their descendants, cache reads and writes included. */
  inputTokens: number;
  outputTokens: number;
  /** Dollars, by the price table; 0 for models without a price. */
  costUsd: number;
  /** Steps (provider requests) taken. */
  steps: number;
}

/** Why a group (or one above it) takes no spawn now. */
type Stopped = { cancelled: CancelReason } | { refused: string };

/** What the engine gives its groups: one object, shared by every group of the engine's tree. */
export interface GroupEngine {
  /** Spawns one child as `Engine.spawn` does. */
  spawn(options: AgentOptions, context: SpawnContext): ChildHandle;
  /** Checks a spawn as `spawn` would, without spawning it; returns the title it would have. */
  check(options: AgentOptions, context: SpawnContext): string;
  /** Why the engine takes no spawn now (it drains or closes), else undefined. */
  stopped(): Stopped | undefined;
  /** A top-level group started (true) or stopped (false) having agents queued or running. */
  active(group: Group, busy: boolean): void;
  /** The engine's provider settings now (`setModel` changes them). */
  readonly provider: ProviderConfig;
  readonly rules: CarriedRules;
  /** Throws a UsageError when a `usd` limit cannot hold for `model` (no price). */
  checkPricedBudget(budget: Budget | undefined, model: string | undefined): void;
  readonly logDir: string;
  readonly logs: LogPolicy | undefined;
}

/** The defaults a group gives its spawns, its parent's filled in under its own. */
interface Defaults {
  context?: unknown;
  apiKey?: string;
  baseURL?: string;
  model?: string;
  patienceMs?: number;
  lane?: Lane;
}

/**
 * A scope of spawns with its own signal, budget, concurrency, context and credentials
 * (docs/GROUPS.md): a job of a service, a tenant, a request. Made by `engine.group()` (an engine
 * is the outermost group) or `group.group()` (nested: it inherits its parent's defaults, budget,
 * cap and cancel, and may narrow them).
 *
 * Every agent it spawns settles exactly once, as any spawn's: a cancel reaches the running ones
 * (and, as ever, their own agents) and settles the queued ones at once.
 */
export class Group {
  /** Its name, when given. */
  readonly name: string | undefined;
  readonly #engine: GroupEngine;
  readonly #parent: Group | undefined;
  readonly #defaults: Defaults;
  readonly #cap: number | undefined;
  /** Its agents' spending, its budget's limits (none when it has no budget). */
  readonly #ledger: TreeLedger;
  /** Spawns waiting for a slot, in spawn order. */
  readonly #queue = new Set<QueuedSpawn>();
  /** Spawned to the engine (or through its parent) and not settled. */
  readonly #running = new Set<ChildHandle>();
  /** Nested groups with agents queued or running: a cancel or drain must reach them. */
  readonly #active = new Set<Group>();
  #spawned = 0;
  #settled = 0;
  #state: GroupState = 'open';
  #cancelReason: CancelReason | undefined;
  #busy = false;
  #signal: AbortSignal | undefined;
  #onAbort: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Resolves the drain's wait once nothing runs. */
  #idle: (() => void) | undefined;
  #drained: Promise<void> | undefined;

  /** Made by `Engine.group` and `Group.group`, which check `options` first (`checkGroup`). */
  constructor(engine: GroupEngine, options: GroupOptions, parent?: Group) {
    this.#engine = engine;
    this.#parent = parent;
    this.name = options.name;
    this.#cap = options.maxConcurrency;
    const above = parent ? parent.#defaults : {};
    const own = options.provider;
    this.#defaults = defined({
      context: options.context !== undefined ? options.context : above.context,
      apiKey: own?.apiKey ?? above.apiKey,
      baseURL: own?.baseURL ?? above.baseURL,
      model: own?.model ?? above.model,
      patienceMs: options.patienceMs ?? above.patienceMs,
      lane: options.lane ?? above.lane,
    });
    this.#ledger = new TreeLedger({
      budget: options.budget ?? {},
      ...(parent ? { parent: parent.#ledger } : {}),
    });
    if (options.timeout !== undefined) {
      this.#timer = setTimeout(() => this.cancel('timeout'), options.timeout);
      // A group's deadline must not keep a process alive that has nothing else to do.
      this.#timer.unref();
    }
    const signal = options.signal;
    if (signal?.aborted) this.cancel(cancelReasonOf(signal));
    else if (signal) {
      this.#signal = signal;
      this.#onAbort = () => this.cancel(cancelReasonOf(signal));
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  /** Where it stands: `open`, `draining`, `drained` or `cancelled`. */
  get state(): GroupState {
    return this.#state;
  }

  /** The reason it was cancelled with, once it was. */
  get cancelReason(): CancelReason | undefined {
    return this.#cancelReason;
  }

  /** The default `context` of its spawns. */
  get context(): unknown {
    return this.#defaults.context;
  }

  /** Its agents now, and what they (and their own agents) have spent so far. */
  get totals(): GroupTotals {
    const spent = this.#ledger.spent;
    return {
      agents: {
        spawned: this.#spawned,
        queued: this.#queue.size,
        running: this.#running.size,
        settled: this.#settled,
      },
      inputTokens: spent.inputTokens,
      outputTokens: spent.outputTokens,
      costUsd: spent.costUsd,
      steps: spent.steps,
    };
  }

  /**
   * Spawns one agent of the group and returns its handle at once: running, or queued behind
   * `maxConcurrency`. The group's `context`, `provider` and `patienceMs` are its defaults. Throws
   * a UsageError for options the engine refuses, and once the group (or one above it, or the
   * engine) drains. A spawn into a cancelled group settles at once, cancelled with its reason.
   */
  spawn<T = unknown>(options: AgentOptions<T>): ChildHandle<T> {
    // `T` is the spawn's as for `Engine.spawn`: a Standard Schema's output type, or the one named.
    return this.#admit(options as AgentOptions, this.#spawnContext()) as ChildHandle<T>;
  }

  /**
   * Runs one agent of the group and resolves with its AgentResult; never rejects for its outcome.
   * `T`, the type of its `value`, is a Standard Schema `outputSchema`'s output type, or the one named.
   */
  run<T = unknown>(options: AgentOptions<T>): Promise<AgentResult<T>> {
    return this.spawn(options).result;
  }

  /**
   * Runs many agents of the group with `mapAgents`' contract: at most `concurrency` in flight
   * (default 50; the group's own cap holds as well), each result yielded as it settles.
   */
  map<Spec extends AgentOptions>(
    specs: Iterable<Spec> | AsyncIterable<Spec>,
    options: MapOptions = {},
  ): AsyncGenerator<{ spec: Spec; result: AgentResult<SpecValue<Spec>> }> {
    return mapAgents({ spawn: (spec: AgentOptions) => this.spawn(spec) }, specs, options);
  }

  /**
   * A group inside this one: its spawns are this group's too (they count against its cap and
   * its budget, and its cancel and drain reach them), with defaults of its own over this one's.
   */
  group(options: GroupOptions = {}): Group {
    checkGroup(this.#engine, options, this.#defaults.model);
    return new Group(this.#engine, options, this);
  }

  /**
   * Cancels every agent of the group, with `reason` (any text): queued ones settle at once,
   * running ones end as soon as their worker hears (their own agents are cancelled `parent`,
   * as ever). Each result's `cancelReason` is `reason`. Later spawns settle cancelled at once.
   * A second cancel changes nothing.
   */
  cancel(reason: string = 'user'): void {
    if (this.#state === 'cancelled' || this.#state === 'drained') return;
    const why = toCancelReason(reason);
    this.#state = 'cancelled';
    this.#cancelReason = why;
    this.#release();
    for (const queued of [...this.#queue]) queued.settleCancelled(why);
    for (const group of [...this.#active]) group.cancel(why);
    for (const handle of [...this.#running]) handle.cancel(why);
    this.#update();
  }

  /**
   * Finishes what runs and starts nothing new: queued spawns settle at once, cancelled with
   * reason `drain`; later spawns throw. Resolves when every agent of the group has settled.
   */
  drain(): Promise<void> {
    if (this.#state === 'open') {
      this.#state = 'draining';
      for (const queued of [...this.#queue]) queued.settleCancelled(DRAIN_REASON);
      for (const group of [...this.#active]) void group.drain();
    }
    this.#drained ??= this.#untilIdle().then(() => {
      if (this.#state === 'draining') this.#state = 'drained';
      this.#release();
    });
    return this.#drained;
  }

  #untilIdle(): Promise<void> {
    if (this.#running.size === 0 && this.#queue.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.#idle = resolve;
    });
  }

  /** Stops listening to its signal and its timeout: it is done with both. */
  #release(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#signal && this.#onAbort) this.#signal.removeEventListener('abort', this.#onAbort);
    this.#signal = undefined;
    this.#onAbort = undefined;
  }

  /** Why this group, one above it or the engine takes no spawn now. */
  #stopped(): Stopped | undefined {
    if (this.#cancelReason !== undefined) return { cancelled: this.#cancelReason };
    if (this.#state === 'draining' || this.#state === 'drained') {
      return {
        refused: `${this.#named()} is draining: it starts no new agents (spawn into another group, or before \`drain()\`)`,
      };
    }
    return this.#parent ? this.#parent.#stopped() : this.#engine.stopped();
  }

  #named(): string {
    return this.name === undefined ? 'the group' : `group '${this.name}'`;
  }

  /** What a spawn of this group is given beside its options: its defaults and its ledger. */
  #spawnContext(): SpawnContext {
    const { context, apiKey, baseURL, model, patienceMs, lane } = this.#defaults;
    const spawnContext: SpawnContext = { tree: this.#ledger };
    if (context !== undefined || apiKey !== undefined) {
      const inherited: Carried = {};
      if (context !== undefined) inherited.context = context;
      if (apiKey !== undefined) inherited.apiKey = apiKey;
      spawnContext.inherited = inherited;
    }
    if (patienceMs !== undefined) spawnContext.patienceMs = patienceMs;
    if (lane !== undefined) spawnContext.lane = lane;
    if (baseURL !== undefined || model !== undefined) {
      spawnContext.provider = { ...this.#engine.provider, ...defined({ baseURL, model }) };
    }
    return spawnContext;
  }

  /**
   * Takes one spawn: of its own (`spawn`), or of a nested group passing through it (its cap and
   * its cancel hold for those too). The spawn context is set by the group that took the call.
   */
  #admit(options: AgentOptions, context: SpawnContext): ChildHandle {
    const stopped = this.#stopped();
    if (stopped && 'refused' in stopped) throw new UsageError(stopped.refused);
    if (stopped === undefined && (this.#cap === undefined || this.#running.size < this.#cap)) {
      // Nothing is counted before the spawn returns: a refused one leaves no trace.
      const handle = this.#spawnNow(options, context);
      this.#spawned++;
      this.#track(handle);
      return handle;
    }
    const queued = new QueuedSpawn(options, context, {
      title: this.#engine.check(options, context),
      logDir: this.#engine.logDir,
      logs: this.#engine.logs,
      // It leaves the line, counted as settled, whether it was in it or never got there.
      onCancelled: () => {
        this.#queue.delete(queued);
        this.#settled++;
        this.#update();
      },
    });
    this.#spawned++;
    if (stopped) {
      queued.settleCancelled(stopped.cancelled);
      return queued;
    }
    this.#queue.add(queued);
    this.#update();
    return queued;
  }

  #spawnNow(options: AgentOptions, context: SpawnContext): ChildHandle {
    return this.#parent
      ? this.#parent.#admit(options, context)
      : this.#engine.spawn(options, context);
  }

  #track(handle: ChildHandle): void {
    this.#running.add(handle);
    this.#update();
    void handle.result.then(() => {
      this.#running.delete(handle);
      this.#settled++;
      this.#pump();
      this.#update();
    });
  }

  /** Starts queued spawns while slots are free. */
  #pump(): void {
    while (this.#queue.size > 0 && (this.#cap === undefined || this.#running.size < this.#cap)) {
      const queued = this.#queue.values().next().value as QueuedSpawn;
      this.#queue.delete(queued);
      const stopped = this.#stopped();
      if (stopped) {
        queued.settleCancelled('cancelled' in stopped ? stopped.cancelled : DRAIN_REASON);
        continue;
      }
      let handle: ChildHandle;
      try {
        handle = this.#spawnNow(queued.options, { ...queued.context, id: queued.id });
      } catch (error) {
        // Checked when it was queued; something changed since (the engine began to drain).
        queued.settleCancelled(error instanceof UsageError ? DRAIN_REASON : 'user');
        continue;
      }
      queued.start(handle);
      this.#track(handle);
    }
  }

  /** Tells its parent when it starts or stops having agents, and wakes a drain at idle. */
  #update(): void {
    const busy = this.#running.size > 0 || this.#queue.size > 0;
    if (busy !== this.#busy) {
      this.#busy = busy;
      if (this.#parent) {
        if (busy) this.#parent.#active.add(this);
        else this.#parent.#active.delete(this);
      } else this.#engine.active(this, busy);
    }
    if (!busy && this.#idle) {
      const resolve = this.#idle;
      this.#idle = undefined;
      resolve();
    }
  }
}
