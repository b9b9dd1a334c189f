import type { ModelPrice, PriceTable } from '../../shared/budget.js';
import { costUsd, priceOf } from '../../shared/prices.js';
import type { ProviderUsage } from '../../shared/provider/types.js';
import { redactSecrets } from '../../shared/redact.js';
import {
  type AgentOutcome,
  type AgentResult,
  type AgentUsage,
  emptyUsage,
} from '../../shared/result.js';
import type { ChildHandle, ChildStatus } from '../runners/spawned-child.js';
import type { ObservedSpawn } from '../spawn-observer.js';
import { FailureBook } from './failure-book.js';

/** The most rows a dashboard keeps before it drops the oldest settled ones. */
export const DEFAULT_MAX_AGENTS = 100_000;

/** The usage a row shows: the result's counts, without its dollar fields. */
export type RowUsage = Omit<AgentUsage, 'costUsd' | 'cacheSavedUsd' | 'batchSavedUsd'>;

/** An agent and everything under it. */
export interface SubtreeSums {
  agents: number;
  tokens: number;
  costUsd: number;
}

/** One agent as `/api/state` serves it (docs/DASHBOARD.md). */
export interface AgentRow {
  id: string;
  title: string;
  parent: string | null;
  depth: number;
  status: ChildStatus;
  outcome?: AgentOutcome;
  code?: string;
  reason?: string;
  usage: RowUsage;
  costUsd?: number;
  subtree: SubtreeSums;
  startedAt: number;
  endedAt?: number;
}

/** The run's sums, as `/api/state` serves them. */
export interface Totals {
  agents: number;
  queued: number;
  running: number;
  settled: number;
  outcomes: Partial<Record<AgentOutcome, number>>;
  usage: RowUsage;
  costUsd: number;
}

/** What the rates of calls and tokens are counted from, cumulative. */
export interface Counters {
  calls: number;
  /** Input the input-token limit counts: uncached input and cache writes. */
  inputTokens: number;
  outputTokens: number;
}

interface Entry {
  row: AgentRow;
  handle: ChildHandle | undefined;
  price: ModelPrice | undefined;
  /** Agents not yet settled in its subtree, itself included: a row is dropped only at 0. */
  live: number;
  /** What its earlier runs spent, when it runs again (a resumed child starts from zero). */
  base?: { usage: RowUsage; costUsd: number };
}

/**
 * Every agent a dashboard has seen, kept as the rows it serves. Each change is O(depth): a
 * row's usage and cost are added to its ancestors' subtree sums and to the totals as they
 * change, so a snapshot never sums the tree, and the rows changed since the last delta are kept
 * with their ancestors for the next one.
 */
export class AgentBook {
  readonly #entries = new Map<string, Entry>();
  /** Rows not yet settled: their status is read from their handle when a delta is made. */
  readonly #live = new Set<Entry>();
  readonly #dirty = new Set<string>();
  /** Ids of rows dropped since the last delta (`maxAgents`). */
  #removed: string[] = [];
  #settledCount = 0;
  readonly #maxAgents: number;
  readonly #prices: Readonly<PriceTable> | undefined;
  readonly failures = new FailureBook();
  readonly totals: Totals = {
    agents: 0,
    queued: 0,
    running: 0,
    settled: 0,
    outcomes: {},
    usage: emptyUsage(),
    costUsd: 0,
  };
  readonly counters: Counters = { calls: 0, inputTokens: 0, outputTokens: 0 };

  constructor(prices?: Readonly<PriceTable>, maxAgents = DEFAULT_MAX_AGENTS) {
    this.#prices = prices;
    this.#maxAgents = maxAgents;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** A spawned agent: a row from now, settled when its result arrives. */
  spawned(spawn: ObservedSpawn): void {
    const price = priceOf(spawn.model, this.#prices);
    const entry = this.#add(spawn, spawn.handle, price);
    if (!entry) return;
    void spawn.handle.result.then((result) => this.settled(spawn.id, result));
  }

  /**
   * A row for an agent that is not a spawned child, such as a session's root: running for as
   * long as the dashboard shows it, its usage told by `stepped`.
   */
  addRoot(root: { id: string; title: string; model?: string }): void {
    const price = root.model === undefined ? undefined : priceOf(root.model, this.#prices);
    this.#add({ ...root, depth: 0, parent: undefined }, undefined, price);
  }

  #add(
    spawn: { id: string; title: string; depth: number; parent: string | undefined },
    handle: ChildHandle | undefined,
    price: ModelPrice | undefined,
  ): Entry | undefined {
    // A resumed child is spawned again under its own id: it keeps its row.
    const known = this.#entries.get(spawn.id);
    if (known) {
      if (handle) this.#revive(known, handle);
      return undefined;
    }
    // A child that settled before it was seen (spawned on a closed engine) is settled by its
    // result like any other.
    const status: ChildStatus = handle?.status === 'queued' ? 'queued' : 'running';
    const row: AgentRow = {
      id: spawn.id,
      title: redactSecrets(spawn.title),
      parent: spawn.parent ?? null,
      depth: spawn.depth,
      status,
      usage: emptyUsage(),
      subtree: { agents: 0, tokens: 0, costUsd: 0 },
      startedAt: Date.now(),
    };
    if (price) row.costUsd = 0;
    const entry: Entry = { row, handle, price, live: 0 };
    this.#entries.set(row.id, entry);
    this.#live.add(entry);
    this.totals.agents++;
    this.totals[status]++;
    this.#propagate(entry, { agents: 1, tokens: 0, costUsd: 0 });
    this.#countLive(entry, 1);
    if (this.#entries.size > this.#maxAgents) this.#prune();
    return entry;
  }

  #revive(entry: Entry, handle: ChildHandle): void {
    const { row } = entry;
    entry.handle = handle;
    if (row.status === 'settled') {
      this.#settledCount--;
      this.totals.settled--;
      if (row.outcome)
        this.totals.outcomes[row.outcome] = (this.totals.outcomes[row.outcome] ?? 1) - 1;
      if (row.outcome === 'failed') this.failures.forget(row.code, row.reason, row.id);
      this.#live.add(entry);
      this.#countLive(entry, 1);
      entry.base = { usage: { ...row.usage }, costUsd: row.costUsd ?? 0 };
      row.status = handle.status === 'queued' ? 'queued' : 'running';
      this.totals[row.status]++;
      delete row.outcome;
      delete row.code;
      delete row.reason;
      delete row.endedAt;
    }
    void handle.result.then((result) => this.settled(row.id, result));
    this.#mark(row.id);
  }

  /** One step's usage, as the step ends (when the dashboard watches steps, and for a root). */
  stepped(id: string, usage: ProviderUsage): void {
    const entry = this.#entries.get(id);
    if (!entry || entry.row.status === 'settled') return;
    this.#addUsage(entry, {
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cacheReadTokens: usage.cacheReadTokens,
      cacheWriteTokens: usage.cacheWriteTokens,
      // At least one request made the step; the result's count has the retries.
      providerCalls: 1,
      steps: 1,
    });
  }

  /** An agent's one result: its row takes the result's usage, cost and outcome. */
  settled(id: string, result: AgentResult): void {
    const entry = this.#entries.get(id);
    if (!entry || entry.row.status === 'settled') return;
    const { row } = entry;
    const { costUsd: cost, batchSavedUsd, cacheSavedUsd, ...usage } = result.usage;
    void batchSavedUsd;
    void cacheSavedUsd;
    // A run after a resume counts from zero: what its earlier runs spent is added back.
    const { base } = entry;
    const whole = base ? plus(base.usage, usage) : usage;
    const wholeCost = cost === undefined ? undefined : cost + (base?.costUsd ?? 0);
    delete entry.base;
    this.#addUsage(entry, minus(whole, row.usage), wholeCost);
    this.#setStatus(entry, 'settled');
    this.#live.delete(entry);
    this.#countLive(entry, -1);
    // Its handle holds its result and spec: a long run's settled agents must not keep them.
    entry.handle = undefined;
    this.#settledCount++;
    row.outcome = result.outcome;
    row.endedAt = Date.now();
    this.totals.outcomes[result.outcome] = (this.totals.outcomes[result.outcome] ?? 0) + 1;
    if (result.code !== undefined) row.code = result.code;
    if (result.reason !== undefined) row.reason = redactSecrets(result.reason);
    if (result.outcome === 'failed') this.failures.add(row.code, row.reason, row.id);
  }

  /** Reads each live row's status from its handle (queued → running); true when one changed. */
  refreshStatuses(): void {
    for (const entry of this.#live) {
      const status = entry.handle?.status;
      if (status !== undefined && status !== 'settled') this.#setStatus(entry, status);
    }
  }

  #setStatus(entry: Entry, status: ChildStatus): void {
    const { row } = entry;
    if (row.status === status) return;
    this.totals[row.status]--;
    this.totals[status]++;
    row.status = status;
    this.#mark(row.id);
  }

  /**
   * Adds `usage` to the row, its ancestors' subtrees and the totals. Its cost is `setCost` when
   * given (a result's own), else the usage priced at the row's model.
   */
  #addUsage(entry: Entry, usage: RowUsage, setCost?: number): void {
    const { row } = entry;
    addRowUsage(row.usage, usage);
    addRowUsage(this.totals.usage, usage);
    let cost = 0;
    if (setCost !== undefined) {
      cost = setCost - (row.costUsd ?? 0);
      row.costUsd = setCost;
    } else if (entry.price) {
      cost = costUsd(usage, entry.price);
      row.costUsd = (row.costUsd ?? 0) + cost;
    }
    this.totals.costUsd += cost;
    this.counters.calls += usage.providerCalls;
    this.counters.inputTokens += usage.inputTokens + usage.cacheWriteTokens;
    this.counters.outputTokens += usage.outputTokens;
    this.#propagate(entry, { agents: 0, tokens: tokensOf(usage), costUsd: cost });
  }

  /** Adds `sums` to the row's subtree and every ancestor's it knows, marking each changed. */
  #propagate(entry: Entry, sums: SubtreeSums): void {
    let at: Entry | undefined = entry;
    // A parent is spawned before its children, so the walk ends at a root; the bound is a guard.
    for (let hops = 0; at && hops < 1_000; hops++) {
      const { subtree } = at.row;
      subtree.agents += sums.agents;
      subtree.tokens += sums.tokens;
      subtree.costUsd += sums.costUsd;
      this.#dirty.add(at.row.id);
      at = at.row.parent === null ? undefined : this.#entries.get(at.row.parent);
    }
  }

  /** Adds `change` to the live count of the row and each ancestor it still has. */
  #countLive(entry: Entry, change: number): void {
    let at: Entry | undefined = entry;
    for (let hops = 0; at && hops < 1_000; hops++) {
      at.live += change;
      at = at.row.parent === null ? undefined : this.#entries.get(at.row.parent);
    }
  }

  #mark(id: string): void {
    this.#dirty.add(id);
  }

  /** Every row, in the order the agents were first seen. */
  rows(): AgentRow[] {
    return [...this.#entries.values()].map((entry) => entry.row);
  }

  row(id: string): AgentRow | undefined {
    return this.#entries.get(id)?.row;
  }

  handle(id: string): ChildHandle | undefined {
    return this.#entries.get(id)?.handle;
  }

  /**
   * The rows changed since the last call, ancestors included, none repeated; and the ids of
   * the rows dropped since then.
   */
  takeChanged(): { rows: AgentRow[]; removed: string[] } {
    const rows: AgentRow[] = [];
    for (const id of this.#dirty) {
      const row = this.#entries.get(id)?.row;
      if (row) rows.push(row);
    }
    this.#dirty.clear();
    const removed = this.#removed;
    this.#removed = [];
    return { rows, removed };
  }

  /**
   * Drops the oldest settled rows, a tenth of `maxAgents` at a time, so that a worker that runs
   * for days shows its latest agents in bounded memory. The totals and the subtree sums of the
   * rows kept still count them.
   */
  /** A row changed, or one was dropped, since the last `takeChanged`. */
  get changed(): boolean {
    return this.#dirty.size > 0 || this.#removed.length > 0;
  }

  #prune(): void {
    // A walk finds nothing while too few rows have settled: it waits for a tenth of the cap.
    const step = Math.ceil(this.#maxAgents / 10);
    if (this.#settledCount < step && this.#entries.size < this.#maxAgents + step) return;
    let drop = Math.min(step, this.#settledCount);
    for (const [id, entry] of this.#entries) {
      if (drop === 0) break;
      // A row with agents still running below it stays: their spend goes up through it.
      if (entry.live > 0) continue;
      this.#entries.delete(id);
      this.#dirty.delete(id);
      this.#removed.push(id);
      this.#settledCount--;
      drop--;
    }
  }
}

function addRowUsage(into: RowUsage, more: RowUsage): void {
  into.inputTokens += more.inputTokens;
  into.outputTokens += more.outputTokens;
  into.cacheReadTokens += more.cacheReadTokens;
  into.cacheWriteTokens += more.cacheWriteTokens;
  into.providerCalls += more.providerCalls;
  into.steps += more.steps;
}

function plus(a: RowUsage, b: RowUsage): RowUsage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
    providerCalls: a.providerCalls + b.providerCalls,
    steps: a.steps + b.steps,
  };
}

function minus(a: RowUsage, b: RowUsage): RowUsage {
  return {
    inputTokens: a.inputTokens - b.inputTokens,
    outputTokens: a.outputTokens - b.outputTokens,
    cacheReadTokens: a.cacheReadTokens - b.cacheReadTokens,
    cacheWriteTokens: a.cacheWriteTokens - b.cacheWriteTokens,
    providerCalls: a.providerCalls - b.providerCalls,
    steps: a.steps - b.steps,
  };
}

function tokensOf(usage: RowUsage): number {
  return usage.inputTokens + usage.outputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
}
