import { createHash } from 'node:crypto';
import { delay } from 'abort-controller-x';
import { customIdOf, DEFAULT_BATCH_TURNAROUND_MS } from '../../shared/lane/lane.js';
import type { LaneParams } from '../../shared/protocol.js';
import { excerpt } from '../../shared/provider/classify.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { backoffMs } from '../../shared/provider/retry.js';
import type { ProviderErrorCode, ProviderResult } from '../../shared/provider/types.js';
import { BatchApi, BatchApiError, type BatchRequest, type MessageBatch } from './batch-api.js';
import {
  aborted,
  createFailure,
  failed,
  messageOf,
  type ResultLine,
  resultOutcome,
} from './batch-result.js';

/** The API's limits of one batch: requests, and bytes of the create's body. */
export const MAX_BATCH_REQUESTS = 100_000;
export const MAX_BATCH_BYTES = 256 * 1024 * 1024;
/** What a chunk's estimate keeps clear of the byte limit: the envelope, escapes. */
const BYTE_MARGIN = 1024 * 1024;

/** How long the collector waits for more steps after the first one waits (default). */
export const DEFAULT_BATCH_WINDOW_MS = 10_000;
/** The first wait between two polls of a batch (default); it grows to `POLL_GROWTH_CAP` times. */
export const DEFAULT_BATCH_POLL_MS = 30_000;
const POLL_GROWTH = 1.5;
const POLL_GROWTH_CAP = 8;
/** How long creates refused for a full processing queue are tried again (default). */
const DEFAULT_QUEUE_PATIENCE_MS = 15 * 60_000;
/** How many of the last batches' turnarounds the `auto` lane goes by (the longest of them). */
const TURNAROUNDS_KEPT = 8;
/** How long a cancel the lane sends on its own may take. */
const CANCEL_TIMEOUT_MS = 10_000;
/**
 * How long a create under way when the collector closes may still answer: the server may have
 * made the batch already, and only its answer says which one to cancel.
 */
const CREATE_GRACE_MS = 5_000;

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

/** A batch submitted: what the run journal keeps, before its polling starts. */
export interface SubmittedBatch {
  batchId: string;
  /** Its server (without credentials): a rerun against another one never follows the batch. */
  endpoint: string;
  customIds: string[];
  /** A digest of each request's params, in the order of `customIds`. */
  digests: string[];
}

/** A batch whose results were read: its answers are spent, no rerun follows it. */
export interface ReadBatch {
  batchId: string;
  endpoint: string;
}

/**
 * A step a killed run sent in a batch it never read: a rerun's step of the same custom id
 * follows that batch, if it goes to the same server with the same request (digest).
 */
export interface JournaledStep {
  batchId: string;
  endpoint: string;
  digest: string;
}

export interface BatchCollectorOptions {
  /** How long to gather after the first step waits, when not every agent of the lane waits. */
  windowMs: number;
  /** The first wait between polls of a batch. */
  pollMs: number;
  /** What a batch is taken to need from create to end until one has ended (the `auto` lane). */
  turnaroundMs?: number;
  /**
   * How long creates of one batch may keep being refused 429 (a full processing queue) before
   * its steps fail `rate_limited`; default 15 minutes, the governor's patience.
   */
  patienceMs?: number;
  /** Something the collector met and went on past (an unknown custom id, a cut results line). */
  warn(message: string): void;
  /** A batch was created: called, and awaited, before it is polled (the run journal). */
  submitted?(batch: SubmittedBatch): Promise<void> | void;
  /** A batch's results were read (the run journal), so no rerun follows it. */
  read?(batch: ReadBatch): void;
  /**
   * Batches a killed run submitted and never read, by custom id: a step whose id is among them,
   * on the same server and with the same request, follows that batch instead of being sent again.
   */
  inFlight?: ReadonlyMap<string, JournaledStep>;
}

/** A step in the collector, from its submit to its answer. */
interface Entry {
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
interface Account {
  api: BatchApi;
  pending: Entry[];
}

/**
 * The batches lane's main-thread half, one per engine: it gathers the steps its agents wait on
 * into Message Batches, polls each batch until it has ended, and hands each result back to its
 * agent as that step's response (docs/LANES.md). A batch goes when every agent of the lane is
 * waiting on one (none can add a step), or `windowMs` after the first step waited; it holds at
 * most the API's 100,000 requests and 256 MB. Nothing here paces by the real-time rate limits.
 */
export class BatchCollector {
  readonly #options: BatchCollectorOptions;
  readonly #accounts = new Map<string, Account>();
  /** Open batches, by id, with their steps not yet answered. */
  readonly #open = new Map<string, { account: Account; entries: Map<string, Entry> }>();
  /** Steps a rerun follows in a killed run's batches, by batch id. */
  readonly #followed = new Map<string, { account: Account; entries: Map<string, Entry> }>();
  /**
   * Live steps by where they wait (`Entry.counted`), kept as they move so that deciding whether
   * every agent waits costs nothing per step. A step in a batch whose results are being read is
   * about to be answered and to come back with its next step, so it does not count (a batch would
   * go with the first few).
   */
  readonly #count = { pending: 0, sent: 0 };
  /** Steps not answered yet, by custom id: no two of them may share one. */
  readonly #live = new Map<string, Entry>();
  readonly #closing = new AbortController();
  /** Aborts the creates under way: `CREATE_GRACE_MS` after the collector began to close. */
  readonly #creating = new AbortController();
  readonly #running = new Set<Promise<void>>();
  /** Agents in the lane: spawned and not settled. */
  #members = 0;
  #timer: NodeJS.Timeout | undefined;
  /** When the next waiting step with a deadline runs out of room for a batch. */
  #roomTimer: NodeJS.Timeout | undefined;
  /** When `#roomTimer` fires. */
  #roomAt = 0;
  /** How long the last batches took from create to end, most recent last. */
  readonly #turnarounds: number[] = [];

  constructor(options: BatchCollectorOptions) {
    this.#options = options;
  }

  /** Batches created so far, for a summary and tests. */
  batches = 0;

  /** Creates refused 429 (a full processing queue) and tried again, for a summary and tests. */
  queueRefusals = 0;

  /** Steps of the `auto` lane that left it for a real-time request, for a summary and tests. */
  movedToRealtime = 0;

  /**
   * What a batch is taken to need from its create to its end: the longest of the last
   * `TURNAROUNDS_KEPT` this collector saw end, else the assumption it was given.
   */
  get turnaroundMs(): number {
    if (this.#turnarounds.length === 0) {
      return this.#options.turnaroundMs ?? DEFAULT_BATCH_TURNAROUND_MS;
    }
    return Math.max(...this.#turnarounds);
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
    const orphan = this.#live.get(customId);
    if (orphan?.orphaned && orphan.step.agentId === step.agentId && orphan.digest === digest) {
      // The same agent, resumed on a fresh worker, asks again for the step its lost run sent:
      // it takes over the request already out instead of paying for a second one.
      orphan.step = step;
      delete orphan.orphaned;
      return this.#ticket(orphan);
    }
    // Two spawns given one key: the second is named by its agent id instead.
    if (this.#live.has(customId)) customId = customIdOf(step.agentId, step.step);
    const entry: Entry = {
      step,
      customId,
      digest,
      bytes: Buffer.byteLength(json),
      retries: 0,
      calls: 0,
      done: false,
    };
    this.#live.set(customId, entry);
    if (this.#closing.signal.aborted) {
      this.#answer(entry, aborted('the engine is closing'));
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
      this.#follow(account, journaled.batchId, entry);
    } else this.#enqueue(account, entry);
    this.#consider();
    return this.#ticket(entry);
  }

  #ticket(entry: Entry): LaneTicket {
    return {
      withdraw: () => {
        // Left in its pending list, done: a batch skips it, and the next flush drops it.
        this.#settle(entry);
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
    if (this.#roomTimer) clearTimeout(this.#roomTimer);
    this.#roomTimer = undefined;
    this.#closing.abort('shutdown');
    const grace = setTimeout(() => this.#creating.abort('shutdown'), CREATE_GRACE_MS);
    for (const account of this.#accounts.values()) {
      for (const entry of account.pending.splice(0)) this.#answer(entry, aborted('shutdown'));
    }
    // A killed run's batches too: what they hold was this batch's to run, and it stops.
    const cancels = [...this.#open, ...this.#followed].map(async ([id, { account, entries }]) => {
      for (const entry of entries.values()) this.#answer(entry, aborted('shutdown'));
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

  /** A step goes to wait for the next batch, or, with no room left before its deadline, to real time. */
  #enqueue(account: Account, entry: Entry): void {
    const now = Date.now();
    if (!this.#hasRoom(entry, now)) {
      this.#toRealtime(entry);
      return;
    }
    this.#pend(entry, account);
    const { deadline } = entry.step;
    if (deadline !== undefined) this.#armRoom(deadline - this.#need(), now);
  }

  /** Sweeps the waiting steps when the first of them runs out of room (earliest wins). */
  #armRoom(at: number, now: number): void {
    if (this.#roomTimer !== undefined && this.#roomAt <= at) return;
    if (this.#roomTimer) clearTimeout(this.#roomTimer);
    this.#roomAt = at;
    this.#roomTimer = setTimeout(
      () => {
        this.#roomTimer = undefined;
        this.#sweep();
        this.#consider();
      },
      Math.max(0, at - now) + 1,
    );
  }

  /** Whether a batch still fits before the step's deadline: the window, then the turnaround. */
  #hasRoom(entry: Entry, now: number): boolean {
    const { deadline } = entry.step;
    return deadline === undefined || now + this.#need() <= deadline;
  }

  #need(): number {
    return this.#options.windowMs + this.turnaroundMs;
  }

  #toRealtime(entry: Entry): void {
    if (entry.done) return;
    this.#settle(entry);
    this.movedToRealtime++;
    entry.step.realtime?.();
  }

  /**
   * Waiting steps whose room has run out go to real time; the timer is set for the next one's.
   * (Not at close: a closing collector answers every step `aborted`.)
   */
  #sweep(): void {
    if (this.#roomTimer) clearTimeout(this.#roomTimer);
    this.#roomTimer = undefined;
    if (this.#closing.signal.aborted) return;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const account of this.#accounts.values()) {
      account.pending = account.pending.filter((entry) => {
        if (entry.step.deadline === undefined) return true;
        if (this.#hasRoom(entry, now)) {
          next = Math.min(next, entry.step.deadline - this.#need());
          return true;
        }
        this.#toRealtime(entry);
        return false;
      });
    }
    if (next < Number.POSITIVE_INFINITY) {
      this.#armRoom(next, now);
    }
  }

  /** Sends what waits when no agent of the lane can add a step, else after the window. */
  #consider(): void {
    if (this.#count.pending === 0) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = undefined;
      return;
    }
    if (this.#count.pending + this.#count.sent >= this.#members) {
      this.#flush();
      return;
    }
    this.#timer ??= setTimeout(() => this.#flush(), this.#options.windowMs);
  }

  #flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#sweep();
    for (const account of this.#accounts.values()) {
      const entries = account.pending.splice(0);
      for (const entry of entries) this.#place(entry, undefined);
      for (const chunk of chunks(entries)) this.#track(this.#run(account, chunk));
    }
  }

  #track(work: Promise<void>): void {
    const running = work.catch((error: unknown) => {
      this.#options.warn(`the batches lane failed: ${messageOf(error)}`);
    });
    this.#running.add(running);
    void running.finally(() => this.#running.delete(running));
  }

  /** One batch: created (with retries), journaled, polled to its end, its results dispatched. */
  async #run(account: Account, chunk: Entry[]): Promise<void> {
    const signal = this.#closing.signal;
    const started = Date.now();
    const requests: BatchRequest[] = chunk.map((entry) => ({
      custom_id: entry.customId,
      params: entry.step.params,
    }));
    const config = chunk[0]!.step.provider;
    let batch: MessageBatch | undefined;
    let refusals = 0;
    let refusedSince: number | undefined;
    for (let attempt = 0; batch === undefined; attempt++) {
      try {
        batch = await account.api.create(requests, this.#creating.signal);
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof BatchApiError && error.failure.error.code === 'rate_limited') {
          // The processing queue is full (the tier's limit of requests in batches in progress),
          // or the batch routes' request rate: not a failure of these steps, so no retry is
          // spent. While a batch of this account is open, it waits for room; with none open, a
          // chunk larger than the queue could never go whole, so it is halved first.
          if (chunk.length > 1 && !this.#hasOpen(account)) {
            const half = Math.ceil(chunk.length / 2);
            await Promise.all([
              this.#run(account, chunk.slice(0, half)),
              this.#run(account, chunk.slice(half)),
            ]);
            return;
          }
          refusedSince ??= Date.now();
          const patience = this.#options.patienceMs ?? DEFAULT_QUEUE_PATIENCE_MS;
          const left = patience - (Date.now() - refusedSince);
          if (left > 0) {
            this.queueRefusals++;
            // The last try comes when the patience runs out, however long retry-after said.
            const wait = Math.min(error.retryAfterMs ?? backoff(config, refusals), left);
            refusals++;
            attempt--;
            if (!(await this.#wait(wait, signal))) return;
            continue;
          }
          // Past the patience: the steps fail `rate_limited`, as a real-time request would.
          const failure = createFailure(error, refusals + 1);
          for (const entry of chunk) this.#answer(entry, { ...failure, calls: entry.calls + 1 });
          this.#consider();
          return;
        }
        if (error instanceof BatchApiError && error.status === 413 && chunk.length > 1) {
          // Larger than the server takes: each half goes on its own.
          const half = Math.ceil(chunk.length / 2);
          await Promise.all([
            this.#run(account, chunk.slice(0, half)),
            this.#run(account, chunk.slice(half)),
          ]);
          return;
        }
        const retry = error instanceof BatchApiError ? error.retry : false;
        if (!retry || attempt >= config.maxRetries) {
          const failure = createFailure(error, attempt + 1);
          for (const entry of chunk) this.#answer(entry, { ...failure, calls: entry.calls + 1 });
          this.#consider();
          return;
        }
        if (!(await this.#wait(backoff(config, attempt, error), signal))) return;
      }
    }
    this.batches++;
    if (signal.aborted) {
      // Made while the collector closed: no one waits on it, so it is cancelled, not paid for.
      for (const entry of chunk) this.#answer(entry, aborted('shutdown'));
      try {
        await account.api.cancel(batch.id, AbortSignal.timeout(CANCEL_TIMEOUT_MS));
      } catch (error) {
        this.#options.warn(`could not cancel Message Batch ${batch.id}: ${messageOf(error)}`);
      }
      return;
    }
    for (const entry of chunk) {
      entry.calls++;
      this.#place(entry, 'sent');
    }
    const entries = new Map(chunk.map((entry) => [entry.customId, entry]));
    this.#open.set(batch.id, { account, entries });
    try {
      await this.#options.submitted?.({
        batchId: batch.id,
        endpoint: account.api.endpoint,
        customIds: [...entries.keys()],
        digests: [...entries.values()].map((entry) => entry.digest),
      });
      await this.#finish(account, batch, entries, false, started);
    } catch (error) {
      // Whatever went wrong, no step of the batch is left waiting, and the batch is not paid for.
      this.#abandon(account, batch.id, entries, error);
    } finally {
      this.#open.delete(batch.id);
      this.#consider();
    }
  }

  /** A batch the lane cannot go on with: its steps fail, and it is cancelled. */
  #abandon(account: Account, batchId: string, entries: Map<string, Entry>, error: unknown): void {
    const message = `the batches lane could not go on with Message Batch ${batchId}: ${excerpt(messageOf(error))}`;
    this.#options.warn(message);
    let waiting = false;
    for (const entry of entries.values()) {
      if (entry.done) continue;
      waiting = true;
      this.#answer(entry, failed({ code: 'server_error', message }, entry.calls));
    }
    if (waiting && !this.#closing.signal.aborted) {
      void account.api.cancel(batchId, AbortSignal.timeout(CANCEL_TIMEOUT_MS)).catch(() => {});
    }
  }

  /** A step of a killed run's batch: it waits on that batch, polled once for all its steps. */
  #follow(account: Account, batchId: string, entry: Entry): void {
    entry.calls++;
    entry.followed = true;
    this.#place(entry, 'sent');
    const followed = this.#followed.get(batchId);
    if (followed) {
      followed.entries.set(entry.customId, entry);
      return;
    }
    const entries = new Map([[entry.customId, entry]]);
    this.#followed.set(batchId, { account, entries });
    this.#track(
      this.#finish(
        account,
        { id: batchId, processing_status: 'in_progress', results_url: null },
        entries,
        true,
      )
        .catch((error: unknown) => {
          for (const entry of entries.values()) if (!entry.done) this.#requeue(entry, account);
          throw error;
        })
        .finally(() => {
          this.#followed.delete(batchId);
          this.#consider();
        }),
    );
  }

  /** Polls `batch` until it has ended, then dispatches its results to `entries`. */
  async #finish(
    account: Account,
    batch: MessageBatch,
    entries: Map<string, Entry>,
    followed = false,
    started?: number,
  ): Promise<void> {
    const signal = this.#closing.signal;
    const config = [...entries.values()][0]!.step.provider;
    let interval = this.#options.pollMs;
    let failures = 0;
    let now = batch;
    // A killed run's batch is read at once: it may have ended while no one polled.
    let first = followed;
    while (now.processing_status !== 'ended') {
      if (liveCount(entries) === 0) {
        // No agent waits on it any more. This run's own is cancelled, so its steps are not paid
        // for; a killed run's may hold steps of tasks not started yet, which may follow it still.
        if (!followed) await account.api.cancel(now.id, signal).catch(() => {});
        return;
      }
      if (!first && !(await this.#wait(interval, signal))) return;
      first = false;
      try {
        now = await account.api.retrieve(now.id, signal);
        failures = 0;
        interval = Math.min(interval * POLL_GROWTH, this.#options.pollMs * POLL_GROWTH_CAP);
      } catch (error) {
        if (signal.aborted) return;
        failures++;
        if (error instanceof BatchApiError && error.retry) {
          // The batch runs on whatever its poll met: it is polled again, however long that takes.
          if (!(await this.#wait(backoff(config, Math.min(failures - 1, 10), error), signal))) {
            return;
          }
          continue;
        }
        if (followed) {
          // The killed run's batch cannot be read: its steps go into a batch of their own.
          this.#options.warn(
            `Message Batch ${now.id} of an earlier run could not be read (${messageOf(error)}); its steps are sent again`,
          );
          for (const entry of entries.values()) if (!entry.done) this.#requeue(entry, account);
          return;
        }
        const failure = createFailure(error, failures);
        for (const entry of entries.values())
          this.#answer(entry, { ...failure, calls: entry.calls });
        // Its steps failed: it is not paid for either, if the server still takes a cancel.
        await account.api.cancel(now.id, AbortSignal.timeout(CANCEL_TIMEOUT_MS)).catch(() => {});
        return;
      }
    }
    if (started !== undefined) this.#observe(Date.now() - started);
    const answered = new Set<string>();
    if (now.results_url === null) {
      this.#options.warn(
        `Message Batch ${now.id} ended without a results_url; its steps are retried`,
      );
    } else {
      for (const entry of entries.values()) this.#place(entry, undefined);
      await this.#dispatch(now, entries, account, answered, followed);
      if (signal.aborted) return;
      this.#options.read?.({ batchId: now.id, endpoint: account.api.endpoint });
    }
    for (const entry of entries.values()) {
      if (!entry.done && !answered.has(entry.customId)) {
        if (entry.followed) this.#requeue(entry, account);
        else this.#retry(entry, account, `Message Batch ${now.id} had no result for it`);
      }
    }
  }

  /** Whether a batch of `account` is open (created and not yet read): the queue will drain. */
  #hasOpen(account: Account): boolean {
    for (const open of this.#open.values()) if (open.account === account) return true;
    return false;
  }

  /** A batch ended this long after its create began: what the `auto` lane expects next. */
  #observe(ms: number): void {
    this.#turnarounds.push(ms);
    if (this.#turnarounds.length > TURNAROUNDS_KEPT) this.#turnarounds.shift();
    // A longer turnaround leaves less room: steps waiting with a deadline are judged again.
    this.#sweep();
  }

  /**
   * Reads the batch's results file line by line and answers each line's step; `answered` gets
   * each step a line was handled for (answered, or sent again).
   */
  async #dispatch(
    batch: MessageBatch,
    entries: Map<string, Entry>,
    account: Account,
    answered: Set<string>,
    followed: boolean,
  ): Promise<void> {
    const signal = this.#closing.signal;
    let line = 0;
    try {
      for await (const text of account.api.results(batch.results_url!, signal)) {
        line++;
        if (text.trim() === '') continue;
        let parsed: ResultLine;
        try {
          parsed = JSON.parse(text) as ResultLine;
        } catch {
          this.#options.warn(
            `line ${line} of Message Batch ${batch.id}'s results is not whole JSON (cut mid-line?): ${excerpt(text, 80)}; its step is retried`,
          );
          continue;
        }
        const entry =
          typeof parsed?.custom_id === 'string' ? entries.get(parsed.custom_id) : undefined;
        // A killed run's batch holds other steps too: those that were read then, or are no more.
        if (entry === undefined && followed) continue;
        if (entry === undefined) {
          this.#options.warn(
            `line ${line} of Message Batch ${batch.id}'s results names a custom_id no step of it has (${excerpt(JSON.stringify(String(parsed?.custom_id)), 80)}); ignored`,
          );
          continue;
        }
        if (entry.done || answered.has(entry.customId)) continue;
        try {
          this.#result(entry, parsed.result, account, batch.id);
        } catch (error) {
          // One line the lane cannot take costs its own step a retry, not the rest of the file.
          this.#retry(
            entry,
            account,
            `Message Batch ${batch.id} answered a result that could not be read (${excerpt(messageOf(error))})`,
          );
        }
        answered.add(entry.customId);
      }
    } catch (error) {
      if (signal.aborted) return;
      this.#options.warn(
        `the results of Message Batch ${batch.id} could not be read whole (${excerpt(messageOf(error))}); the steps without a result are retried`,
      );
    }
  }

  #result(entry: Entry, result: ResultLine['result'], account: Account, batchId: string): void {
    if (entry.followed && result?.type !== 'succeeded') {
      // What an earlier run's batch did not answer is sent again, as if it had never been sent:
      // a step that expired or errored then may well succeed now (`--retry-failed`).
      this.#requeue(entry, account);
      return;
    }
    const outcome = resultOutcome(result, batchId, entry.calls);
    if ('retry' in outcome) this.#retry(entry, account, outcome.retry, outcome.code);
    else this.#answer(entry, outcome.answer);
  }

  /**
   * A step of a killed run's batch that batch did not answer: it is sent afresh, as if it had
   * never been sent (not counted as a retry), and no longer follows anything.
   */
  #requeue(entry: Entry, account: Account): void {
    if (entry.done) return;
    if (entry.followed) {
      delete entry.followed;
      entry.calls--;
    }
    this.#enqueue(account, entry);
  }

  /** The step goes into the next batch, as a failed attempt is retried; past its retries, it fails. */
  #retry(
    entry: Entry,
    account: Account,
    why: string,
    code: ProviderErrorCode = 'server_error',
  ): void {
    if (entry.done) return;
    if (entry.retries >= entry.step.provider.maxRetries) {
      const message = `${why} (after ${entry.calls} batches)`;
      this.#answer(entry, failed({ code, message }, entry.calls));
      return;
    }
    entry.retries++;
    this.#enqueue(account, entry);
  }

  #answer(entry: Entry, result: ProviderResult): void {
    if (entry.done) return;
    this.#settle(entry);
    // An orphan's run is gone: its answer is no one's, and its agent's next run asks again.
    if (!entry.orphaned) entry.step.answer(result);
  }

  /** The step waits for the next batch of its account. */
  #pend(entry: Entry, account: Account): void {
    account.pending.push(entry);
    this.#place(entry, 'pending');
  }

  /** Moves a live step's count to where it waits now (`undefined`: it counts nowhere). */
  #place(entry: Entry, where: Entry['counted']): void {
    if (entry.done) return;
    if (entry.counted) this.#count[entry.counted]--;
    if (where) this.#count[where]++;
    if (where) entry.counted = where;
    else delete entry.counted;
  }

  #settle(entry: Entry): void {
    this.#place(entry, undefined);
    entry.done = true;
    if (this.#live.get(entry.customId) === entry) this.#live.delete(entry.customId);
  }

  /** Waits `ms`; false when the collector closed meanwhile. */
  async #wait(ms: number, signal: AbortSignal): Promise<boolean> {
    try {
      await delay(signal, ms);
      return true;
    } catch {
      return false;
    }
  }
}

function liveCount(entries: Map<string, Entry>): number {
  let count = 0;
  for (const entry of entries.values()) if (!entry.done) count++;
  return count;
}

/** The steps, in batches within the API's limits (requests and an estimate of the bytes). */
function* chunks(entries: Entry[]): Generator<Entry[]> {
  let chunk: Entry[] = [];
  let bytes = 0;
  // A custom id is unique within a batch: a step sent twice goes once.
  const ids = new Set<string>();
  for (const entry of entries) {
    if (entry.done || ids.has(entry.customId)) continue;
    ids.add(entry.customId);
    const size = entry.bytes + 100;
    if (
      chunk.length > 0 &&
      (chunk.length >= MAX_BATCH_REQUESTS || bytes + size > MAX_BATCH_BYTES - BYTE_MARGIN)
    ) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(entry);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}

/** The wait before another try: the server's `retry-after` when its answer had one. */
function backoff(config: ProviderConfig, retry: number, error?: unknown): number {
  const headers = error instanceof BatchApiError ? error.failure.headers : undefined;
  return backoffMs({ retry, baseMs: config.backoffBaseMs, maxMs: config.backoffMaxMs, headers });
}
