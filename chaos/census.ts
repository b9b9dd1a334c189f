import type { AgentOptions, Engine, SpawnContext } from '../src/main/engine.js';
import type { ChildHandle } from '../src/main/runners/local/pool.js';
import type { AgentResult } from '../src/shared/result.js';
import {
  addFaults,
  type FaultCounts,
  type FaultKind,
  modeOf,
  type PlanBook,
  parentBase,
  type SpawnMode,
  titleBase,
} from './scripts.js';

const CANCEL_BY_DEPTH: Readonly<Record<number, FaultKind | undefined>> = {
  1: 'cancel-depth-1',
  2: 'cancel-depth-2',
  3: 'cancel-depth-3',
};

/** One spawned agent, at any depth, as the census saw it. */
export interface AgentRecord {
  readonly id: string;
  readonly title: string;
  readonly depth: number;
  readonly mode: SpawnMode | 'direct';
  readonly handle: ChildHandle;
  readonly parent: AgentRecord | undefined;
  readonly children: AgentRecord[];
  /** Set when the handle's result arrives. */
  result?: AgentResult;
  /** A cancel to schedule when this agent's first child spawns. */
  cancelOnChild?: number;
}

/**
 * Every agent the engine spawns, at every depth. It wraps the engine's `spawn`, which is the one
 * door to the pool: the sessions, `mapAgents`, and every child's host bridge (its `AgentScope`)
 * spawn through it. So an agent the session's event stream never sees — an async agent's own
 * agents, which have no listener — is still counted, and its handle's result is watched.
 *
 * It also applies the plan of each scripted agent as it spawns: its faults are counted, and a
 * planned cancel is scheduled.
 */
export class Census {
  readonly agents = new Map<string, AgentRecord>();
  readonly #byBase = new Map<string, AgentRecord[]>();
  readonly #book: PlanBook;
  readonly #faults: FaultCounts;
  readonly #timers = new Set<NodeJS.Timeout>();
  /** When an agent last settled (performance.now()): the engine's sign of progress. */
  lastSettleAt = 0;

  constructor(book: PlanBook, faults: FaultCounts) {
    this.#book = book;
    this.#faults = faults;
  }

  install(engine: Engine): void {
    const spawn = engine.spawn.bind(engine);
    engine.spawn = <T>(options: AgentOptions<T>, context: SpawnContext = {}) => {
      const handle = spawn(options, context);
      this.#record(handle, context.depth ?? 1);
      return handle;
    };
  }

  #record(handle: ChildHandle, depth: number): void {
    const title = handle.title;
    const base = titleBase(title);
    const parentKey = parentBase(title);
    // A parent resumed after a crash spawns its children again under the same titles: the
    // parent is the latest agent with that title.
    const parent = parentKey === undefined ? undefined : this.#byBase.get(parentKey)?.at(-1);
    const record: AgentRecord = {
      id: handle.id,
      title,
      depth,
      mode: modeOf(title),
      handle,
      parent,
      children: [],
    };
    this.agents.set(handle.id, record);
    const sameTitle = this.#byBase.get(base);
    if (sameTitle) sameTitle.push(record);
    else this.#byBase.set(base, [record]);
    parent?.children.push(record);
    if (parent?.cancelOnChild !== undefined) {
      const delayMs = parent.cancelOnChild;
      delete parent.cancelOnChild;
      this.schedule(delayMs, () => this.cancel(parent, () => parent.handle.cancel('user')));
    }
    const plan = this.#book.get(title);
    if (plan) {
      addFaults(this.#faults, plan.faults);
      if (plan.cancel?.trigger === 'spawn') {
        this.schedule(plan.cancel.delayMs, () =>
          this.cancel(record, () => record.handle.cancel('user')),
        );
      } else if (plan.cancel) record.cancelOnChild = plan.cancel.delayMs;
    }
    void handle.result.then((result) => {
      record.result = result;
      this.lastSettleAt = performance.now();
      // Its children still running now are cancelled `parent` when its host bridge shuts.
      const outlived = record.children.filter((child) => child.handle.status !== 'settled');
      this.#faults['outlived-parent'] += outlived.length;
    });
  }

  /** Runs `action` after `delayMs`, unless `stop()` comes first. */
  schedule(delayMs: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      action();
    }, delayMs);
    timer.unref();
    this.#timers.add(timer);
  }

  /**
   * Cancels an agent as the harness, through `how` (its handle, or its session), and counts the
   * cancel by depth when it reached a live agent.
   */
  cancel(record: AgentRecord, how: () => boolean, route: 'handle' | 'session' = 'handle'): void {
    if (record.handle.status === 'settled') return;
    const hadLiveAgents = this.#liveDescendants(record) > 0;
    if (!how()) return;
    const kind = CANCEL_BY_DEPTH[record.depth];
    if (kind) this.#faults[kind]++;
    if (hadLiveAgents) this.#faults['cancel-ancestor']++;
    if (route === 'session') this.#faults['session-cancel']++;
  }

  #liveDescendants(record: AgentRecord): number {
    let live = 0;
    for (const child of record.children) {
      if (child.handle.status !== 'settled') live++;
      live += this.#liveDescendants(child);
    }
    return live;
  }

  /**
   * Whether the census knows an agent's parent for sure: a parent resumed after a crash may
   * spawn a child again under the same title, and then the title names two agents.
   */
  parentKnown(record: AgentRecord): boolean {
    const key = parentBase(record.title);
    return key === undefined || (this.#byBase.get(key)?.length ?? 0) === 1;
  }

  /** Agents whose result has not arrived (yet). */
  unsettled(): AgentRecord[] {
    return [...this.agents.values()].filter((record) => record.result === undefined);
  }

  /** Resolves when every agent spawned so far has its result. */
  async settled(): Promise<void> {
    for (;;) {
      const waiting = this.unsettled();
      if (waiting.length === 0) return;
      await Promise.all(waiting.map((record) => record.handle.result));
    }
  }

  /** Stops the planned cancels not yet due. */
  stop(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }
}
