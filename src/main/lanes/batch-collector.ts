import { createHash } from 'node:crypto';
import { customIdOf } from '../../shared/lane/lane.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { AutoRoom } from './auto-room.js';
import { BatchApi } from './batch-api.js';
import { follow } from './batch-follow.js';
import { aborted, messageOf } from './batch-result.js';
import { chunks, runBatch } from './batch-run.js';
import { CANCEL_TIMEOUT_MS, type CollectorCore } from './collector-core.js';
import type { BatchCollectorOptions } from './collector-options.js';
import {
  type Account,
  type Entry,
  EntryLedger,
  type LaneStep,
  type LaneTicket,
  type WatchedBatch,
} from './lane-entry.js';

/**
 * How long a create under way when the collector closes may still answer: the server may have
 * made the batch already, and only its answer says which one to cancel.
 */
const CREATE_GRACE_MS = 5_000;

/**
 * The batches lane's main-thread half, one per engine: it gathers the steps its agents wait on
 * into Message Batches, polls each batch until it has ended, and hands each result back to its
 * agent as that step's response (docs/LANES.md). A batch goes when every agent of the lane is
 * waiting on one (none can add a step), or `windowMs` after the first step waited; it holds at
 * most the API's 100,000 requests and 256 MB. Nothing here paces by the real-time rate limits.
 * One batch's life is `batch-run.ts` and `batch-poll.ts`, a killed run's batch `batch-follow.ts`,
 * and the `auto` lane's deadlines `auto-room.ts`.
 */
export class BatchCollector {
  readonly #options: BatchCollectorOptions;
  readonly #accounts = new Map<string, Account>();
  /** Open batches, by id, with their steps not yet answered. */
  readonly #open = new Map<string, WatchedBatch>();
  /** Steps a rerun follows in a killed run's batches, by batch id. */
  readonly #followed = new Map<string, WatchedBatch>();
  readonly #ledger = new EntryLedger();
  readonly #closing = new AbortController();
  /** Aborts the creates under way: `CREATE_GRACE_MS` after the collector began to close. */
  readonly #creating = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #room: AutoRoom;
  readonly #core: CollectorCore;
  /** Agents in the lane: spawned and not settled. */
  #members = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: BatchCollectorOptions) {
    this.#options = options;
    this.#room = new AutoRoom({
      windowMs: options.windowMs,
      ...(options.turnaroundMs === undefined ? {} : { turnaroundMs: options.turnaroundMs }),
      ledger: this.#ledger,
      accounts: this.#accounts,
      closing: this.#closing.signal,
      consider: () => this.#consider(),
    });
    this.#core = {
      options,
      ledger: this.#ledger,
      open: this.#open,
      followed: this.#followed,
      closing: this.#closing.signal,
      creating: this.#creating.signal,
      enqueue: (account, entry) => this.#room.enqueue(account, entry),
      consider: () => this.#consider(),
      observe: (ms) => this.#room.observe(ms),
      track: (work) => this.#track(work),
      countBatch: () => {
        this.batches++;
      },
      countRefusal: () => {
        this.queueRefusals++;
      },
    };
  }

  /** Batches created so far, for a summary and tests. */
  batches = 0;

  /** Creates refused 429 (a full processing queue) and tried again, for a summary and tests. */
  queueRefusals = 0;

  /** Steps of the `auto` lane that left it for a real-time request, for a summary and tests. */
  get movedToRealtime(): number {
    return this.#room.moved;
  }

  /**
   * What a batch is taken to need from its create to its end: the longest of the last few this
   * collector saw end, else the assumption it was given.
   */
  get turnaroundMs(): number {
    return this.#room.turnaroundMs;
  }

  /** An agent joins the lane; the function it gets back is its leave (when it settles). */
  join(): () => void {
    this.#members++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.#members--;
      this.#consider();
    };
  }

  /** A step waits for the next batch. Returns what its agent may do with it later. */
  submit(step: LaneStep): LaneTicket {
    let customId = customIdOf(step.name, step.step);
    const json = JSON.stringify(step.params);
    const digest = createHash('sha256').update(json).digest('base64url').slice(0, 22);
    const orphan = this.#ledger.get(customId);
    if (orphan?.orphaned && orphan.step.agentId === step.agentId && orphan.digest === digest) {
      // The same agent, resumed on a fresh worker, asks again for the step its lost run sent:
      // it takes over the request already out instead of paying for a second one.
      orphan.step = step;
      delete orphan.orphaned;
      return this.#ticket(orphan);
    }
    // Two spawns given one key: the second is named by its agent id instead.
    if (this.#ledger.get(customId)) customId = customIdOf(step.agentId, step.step);
    const entry: Entry = {
      step,
      customId,
      digest,
      bytes: Buffer.byteLength(json),
      retries: 0,
      calls: 0,
      done: false,
    };
    this.#ledger.add(entry);
    if (this.#closing.signal.aborted) {
      this.#ledger.answer(entry, aborted('the engine is closing'));
      return { withdraw: () => {}, orphan: () => {} };
    }
    const account = this.#account(step.provider, step.apiKey);
    const journaled = this.#options.inFlight?.get(entry.customId);
    // Only the same request on the same server: a step whose transcript changed since (its tools
    // answered otherwise, another model) must not take an answer made for another one.
    if (
      journaled !== undefined &&
      journaled.endpoint === account.api.endpoint &&
      journaled.digest === entry.digest
    ) {
      follow(this.#core, account, journaled.batchId, entry);
    } else this.#room.enqueue(account, entry);
    this.#consider();
    return this.#ticket(entry);
  }

  #ticket(entry: Entry): LaneTicket {
    return {
      withdraw: () => {
        // Left in its pending list, done: a batch skips it, and the next flush drops it.
        this.#ledger.settle(entry);
        this.#consider();
      },
      orphan: () => {
        if (!entry.done) entry.orphaned = true;
      },
    };
  }

  /**
   * Stops: open batches are cancelled (their steps answered `aborted`), waiting steps answered
   * `aborted`, and the collector's connections closed.
   */
  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#room.stop();
    this.#closing.abort('shutdown');
    const grace = setTimeout(() => this.#creating.abort('shutdown'), CREATE_GRACE_MS);
    for (const account of this.#accounts.values()) {
      for (const entry of account.pending.splice(0)) {
        this.#ledger.answer(entry, aborted('shutdown'));
      }
    }
    // A killed run's batches too: what they hold was this batch's to run, and it stops.
    const cancels = [...this.#open, ...this.#followed].map(async ([id, { account, entries }]) => {
      for (const entry of entries.values()) this.#ledger.answer(entry, aborted('shutdown'));
      try {
        await account.api.cancel(id, AbortSignal.timeout(CANCEL_TIMEOUT_MS));
      } catch (error) {
        this.#options.warn(`could not cancel Message Batch ${id}: ${messageOf(error)}`);
      }
    });
    await Promise.all([...cancels, ...this.#running]);
    clearTimeout(grace);
    await Promise.all([...this.#accounts.values()].map((account) => account.api.close()));
  }

  #account(provider: ProviderConfig, apiKey: string | undefined): Account {
    // Requests of one server, key and headers may share a batch: the key itself stays in memory.
    const key = JSON.stringify([
      provider.baseURL ?? null,
      provider.headers ?? null,
      apiKey ?? null,
    ]);
    let account = this.#accounts.get(key);
    if (!account) {
      account = { api: new BatchApi(provider, apiKey), pending: [] };
      this.#accounts.set(key, account);
    }
    return account;
  }

  /** Sends what waits when no agent of the lane can add a step, else after the window. */
  #consider(): void {
    const count = this.#ledger.count;
    if (count.pending === 0) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = undefined;
      return;
    }
    if (count.pending + count.sent >= this.#members) {
      this.#flush();
      return;
    }
    this.#timer ??= setTimeout(() => this.#flush(), this.#options.windowMs);
  }

  #flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#room.sweep();
    for (const account of this.#accounts.values()) {
      const entries = account.pending.splice(0);
      for (const entry of entries) this.#ledger.place(entry, undefined);
      for (const chunk of chunks(entries)) this.#track(runBatch(this.#core, account, chunk));
    }
  }

  #track(work: Promise<void>): void {
    const running = work.catch((error: unknown) => {
      this.#options.warn(`the batches lane failed: ${messageOf(error)}`);
    });
    this.#running.add(running);
    void running.finally(() => this.#running.delete(running));
  }
}
