import type { LaneParams } from '../../shared/protocol.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import type { ProviderResult } from '../../shared/provider/types.js';
import type { BatchApi } from './batch-api.js';

/** One agent's step waiting for its batch. */
export interface LaneStep {
  agentId: string;
  /**
   * What names its steps' custom ids across runs: the spawn's `key` (a batch's task), so a rerun
   * finds the request a killed run sent; else the agent's id.
   */
  name: string;
  /** Its step, counted from 1: with the agent, its `custom_id`. */
  step: number;
  params: LaneParams;
  /** The child's provider settings: its server, its headers, its retries. */
  provider: ProviderConfig;
  /** Its key given in code; unset, the environment's. */
  apiKey: string | undefined;
  /** Called once with the step's result, unless it was withdrawn first or sent to `realtime`. */
  answer(result: ProviderResult): void;
  /**
   * The `auto` lane: when the step must be answered by (epoch ms). While the batch turnaround
   * and the window fit before it, the step waits for a batch; once they do not, it goes to
   * `realtime` instead. A step already in a submitted batch stays there.
   */
  deadline?: number;
  /** Called once, instead of `answer`, when the step leaves the lane for a real-time request. */
  realtime?(): void;
}

/** What a submitted step's agent can do with it. */
export interface LaneTicket {
  /** The agent was cancelled or settled: a step still to be sent is dropped, one in a batch answered to no one. */
  withdraw(): void;
  /**
   * The agent's worker was lost and its run may resume: the step stays where it is, answered to
   * no one, for the resumed run to take over when it asks for the same request.
   */
  orphan(): void;
}

/** A step in the collector, from its submit to its answer. */
export interface Entry {
  step: LaneStep;
  customId: string;
  /** A digest of its params: a rerun follows a journaled request only if it is the same. */
  digest: string;
  /** The size of its params as JSON, for a batch's byte limit. */
  bytes: number;
  /** Batches it went into that did not answer it: counted against the provider's retries. */
  retries: number;
  /** Batches it went into. */
  calls: number;
  done: boolean;
  /**
   * Where it counts as waiting: in its account's pending list, or in a batch being polled. Unset
   * while its batch is created or its results read (it is about to be answered), and once done.
   */
  counted?: 'pending' | 'sent';
  /**
   * Its agent's worker was lost: it stays in its batch, answered to no one, until the agent's
   * resumed run asks for the same step (and takes it over) or the agent settles (withdraw).
   */
  orphaned?: true;
  /** It waits on a killed run's batch: only a success is taken from it. */
  followed?: true;
}

/** Steps of one account (a server and a key): a batch holds one account's requests. */
export interface Account {
  api: BatchApi;
  pending: Entry[];
}

/** A batch the collector watches (its own, or a killed run's it follows), with its steps. */
export interface WatchedBatch {
  account: Account;
  entries: Map<string, Entry>;
}

/**
 * The collector's live steps: which are not answered yet (no two share a custom id) and where
 * each counts as waiting, kept as they move so that deciding whether every agent waits costs
 * nothing per step. A step in a batch whose results are being read is about to be answered and
 * to come back with its next step, so it does not count (a batch would go with the first few).
 */
export class EntryLedger {
  /** Live steps by where they wait (`Entry.counted`). */
  readonly count = { pending: 0, sent: 0 };
  /** Steps not answered yet, by custom id. */
  readonly #live = new Map<string, Entry>();

  get(customId: string): Entry | undefined {
    return this.#live.get(customId);
  }

  add(entry: Entry): void {
    this.#live.set(entry.customId, entry);
  }

  /** Moves a live step's count to where it waits now (`undefined`: it counts nowhere). */
  place(entry: Entry, where: Entry['counted']): void {
    if (entry.done) return;
    if (entry.counted) this.count[entry.counted]--;
    if (where) this.count[where]++;
    if (where) entry.counted = where;
    else delete entry.counted;
  }

  /** The step leaves the lane: it counts nowhere and its custom id is free again. */
  settle(entry: Entry): void {
    this.place(entry, undefined);
    entry.done = true;
    if (this.#live.get(entry.customId) === entry) this.#live.delete(entry.customId);
  }

  /** Answers a step once; an orphan's answer is no one's, and its agent's next run asks again. */
  answer(entry: Entry, result: ProviderResult): void {
    if (entry.done) return;
    this.settle(entry);
    if (!entry.orphaned) entry.step.answer(result);
  }

  /** The step waits for the next batch of its account. */
  pend(entry: Entry, account: Account): void {
    account.pending.push(entry);
    this.place(entry, 'pending');
  }
}

/** How many of a batch's steps are still waiting on it. */
export function liveCount(entries: Map<string, Entry>): number {
  let count = 0;
  for (const entry of entries.values()) if (!entry.done) count++;
  return count;
}
