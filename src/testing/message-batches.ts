/**
 * The Message Batches the server holds, per API key, and the lifecycle of each: created
 * `in_progress`, then `ended`, or `canceling` and then `ended` after a cancel. A batch's
 * state is worked out from the clock whenever it is read, so a batch needs no timer, and a
 * test that moves the server's clock forward moves its batches too.
 *
 * Every request's answer is decided when the batch is created (batch-answers.ts); time
 * decides only how many of them were processed when the batch ended. The requests are
 * processed one after another, evenly over the batch's processing time, in the order sent;
 * the batch ends when the last is done, or at its deadline (`expires_at`), or on a cancel,
 * whichever comes first. A request not processed by then is `expired` (the deadline) or
 * `canceled` (a cancel).
 */
import type { BatchAnswer } from './batch-answers.js';

/** 24 hours: the real API's deadline for a batch, counted from its creation. */
export const BATCH_DEADLINE_MS = 24 * 60 * 60 * 1000;

/** `processing_status` of a batch. */
export type ProcessingStatus = 'in_progress' | 'canceling' | 'ended';

/** The four results a request can end with. */
export type ResultType = 'succeeded' | 'errored' | 'canceled' | 'expired';

/** One request of a batch, with the answer decided at creation. */
export interface BatchEntry {
  customId: string;
  answer: BatchAnswer;
}

/** How long a batch takes, and whether it is one that expires. */
export interface BatchTiming {
  latencyMs: number;
  /**
   * The expiry fault: the batch's deadline comes at `latencyMs` instead of 24 hours, and its
   * requests take twice as long, so half of them are processed when it runs out.
   */
  expiring: boolean;
}

/** `request_counts` of a batch. */
export interface RequestCounts {
  processing: number;
  succeeded: number;
  errored: number;
  canceled: number;
  expired: number;
}

/** A batch as the server holds it. Times are the server clock's, in ms. */
export class StoredBatch {
  readonly id: string;
  readonly entries: readonly BatchEntry[];
  readonly createdAt: number;
  /** When the batch runs out of time: `expires_at`. */
  readonly deadline: number;
  /** How long processing every request takes. */
  readonly #processingMs: number;
  readonly #expiring: boolean;
  #cancelAt: number | undefined;

  constructor(id: string, entries: readonly BatchEntry[], createdAt: number, timing: BatchTiming) {
    this.id = id;
    this.entries = entries;
    this.createdAt = createdAt;
    const { latencyMs, expiring } = timing;
    this.deadline = createdAt + (expiring ? latencyMs : BATCH_DEADLINE_MS);
    this.#processingMs = expiring ? 2 * latencyMs : latencyMs;
    this.#expiring = expiring;
  }

  /** When cancellation was initiated, if it was. */
  get cancelAt(): number | undefined {
    return this.#cancelAt;
  }

  /** When the batch ends, or ended, unless it is canceled before. */
  get #naturalEnd(): number {
    return Math.min(this.createdAt + this.#processingMs, this.deadline);
  }

  /**
   * The status at `now`. A canceled batch is `canceling` at the moment of its cancel, and
   * ended as soon as the clock has moved past it: no request of the scripted model is ever
   * in the middle of being processed, so there is nothing to wait for.
   */
  status(now: number): ProcessingStatus {
    if (this.#cancelAt !== undefined) return now > this.#cancelAt ? 'ended' : 'canceling';
    return now >= this.#naturalEnd ? 'ended' : 'in_progress';
  }

  /** When it ends unless it is cancelled first (or when its cancel ends it). */
  get endsAt(): number {
    return this.#cancelAt ?? this.#naturalEnd;
  }

  /** When processing ended, once it has. */
  endedAt(now: number): number | undefined {
    if (this.status(now) !== 'ended') return undefined;
    return this.#cancelAt ?? this.#naturalEnd;
  }

  /** Starts cancellation at `now`; the caller checks that the batch is still in progress. */
  cancel(now: number): void {
    this.#cancelAt ??= now;
  }

  /** The result type of each request, in request order, once the batch has ended. */
  resultTypes(now: number): ResultType[] | undefined {
    const endedAt = this.endedAt(now);
    if (endedAt === undefined) return undefined;
    // The expiry fault runs out at half its processing time by definition: half its
    // requests, whatever the latency (of 0 too, where time cannot say so).
    const processed =
      this.#cancelAt === undefined && this.#expiring
        ? Math.floor(this.entries.length / 2)
        : this.#processedBy(endedAt);
    const rest: ResultType = this.#cancelAt === undefined ? 'expired' : 'canceled';
    return this.entries.map((entry, index) => (index < processed ? entry.answer.outcome : rest));
  }

  /** `request_counts` at `now`: every request `processing` until the batch has ended. */
  counts(now: number): RequestCounts {
    const counts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 };
    const types = this.resultTypes(now);
    if (types === undefined) counts.processing = this.entries.length;
    else for (const type of types) counts[type]++;
    return counts;
  }

  /** How many requests, from the first, were processed by `time`. */
  #processedBy(time: number): number {
    const count = this.entries.length;
    if (time >= this.createdAt + this.#processingMs) return count;
    // The epsilon keeps a share that is whole on paper from rounding down below it.
    const share = ((time - this.createdAt) * count) / this.#processingMs;
    return Math.min(count, Math.floor(share + 1e-9));
  }
}

/** The `MessageBatch` object the routes answer with. */
export interface MessageBatchJson {
  id: string;
  type: 'message_batch';
  processing_status: ProcessingStatus;
  request_counts: RequestCounts;
  created_at: string;
  ended_at: string | null;
  expires_at: string;
  cancel_initiated_at: string | null;
  archived_at: null;
  results_url: string | null;
}

/**
 * `batch` as the API shows it at `now`. `dateOf` turns a clock time into RFC 3339;
 * `resultsUrl` is where its results are, given once it has ended.
 */
export function batchJson(
  batch: StoredBatch,
  now: number,
  dateOf: (time: number) => string,
  resultsUrl: string,
): MessageBatchJson {
  const endedAt = batch.endedAt(now);
  const { cancelAt } = batch;
  return {
    id: batch.id,
    type: 'message_batch',
    processing_status: batch.status(now),
    request_counts: batch.counts(now),
    created_at: dateOf(batch.createdAt),
    ended_at: endedAt === undefined ? null : dateOf(endedAt),
    expires_at: dateOf(batch.deadline),
    cancel_initiated_at: cancelAt === undefined ? null : dateOf(cancelAt),
    // Results stay until the batch is deleted: nothing is archived.
    archived_at: null,
    results_url: endedAt === undefined ? null : resultsUrl,
  };
}

/**
 * The batches of every API key, newest first per key. They last until deleted or until
 * the server closes: the scripted model archives nothing.
 */
export class BatchStore {
  readonly #byKey = new Map<string, StoredBatch[]>();
  #sequence = 0;

  /** A new batch id, `msgbatch_cohort_…`. */
  newId(): string {
    return `msgbatch_cohort_${(++this.#sequence).toString(36).padStart(8, '0')}`;
  }

  /** Holds `batch` for `key`, as its newest. */
  add(key: string, batch: StoredBatch): void {
    const batches = this.#byKey.get(key) ?? [];
    batches.unshift(batch);
    this.#byKey.set(key, batches);
  }

  /** The batch `id` of `key`, or undefined: another key's batch is not found either. */
  find(key: string, id: string): StoredBatch | undefined {
    return this.#byKey.get(key)?.find((batch) => batch.id === id);
  }

  /** The batches of `key`, most recently created first, as the real API lists them. */
  list(key: string): readonly StoredBatch[] {
    return this.#byKey.get(key) ?? [];
  }

  /** Forgets a batch. */
  delete(key: string, id: string): void {
    const batches = this.#byKey.get(key);
    if (batches === undefined) return;
    const kept = batches.filter((batch) => batch.id !== id);
    if (kept.length === 0) this.#byKey.delete(key);
    else this.#byKey.set(key, kept);
  }
}
