import { excerpt } from '../../shared/provider/classify.js';
import { BatchApiError, type BatchRequest, type MessageBatch } from './batch-api.js';
import { pollBatch } from './batch-poll.js';
import { aborted, createFailure, failed, messageOf } from './batch-result.js';
import { backoff, CANCEL_TIMEOUT_MS, type CollectorCore, wait } from './collector-core.js';
import type { Account, Entry } from './lane-entry.js';

/** The API's limits of one batch: requests, and bytes of the create's body. */
export const MAX_BATCH_REQUESTS = 100_000;
export const MAX_BATCH_BYTES = 256 * 1024 * 1024;
/** What a chunk's estimate keeps clear of the byte limit: the envelope, escapes. */
const BYTE_MARGIN = 1024 * 1024;
/** How long creates refused for a full processing queue are tried again (default). */
const DEFAULT_QUEUE_PATIENCE_MS = 15 * 60_000;

/** The steps, in batches within the API's limits (requests and an estimate of the bytes). */
export function* chunks(entries: Entry[]): Generator<Entry[]> {
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

/** One batch: created (with retries), journaled, polled to its end, its results dispatched. */
export async function runBatch(
  core: CollectorCore,
  account: Account,
  chunk: Entry[],
): Promise<void> {
  const signal = core.closing;
  const started = Date.now();
  const batch = await create(core, account, chunk);
  if (batch === undefined) return;
  core.countBatch();
  if (signal.aborted) {
    // Made while the collector closed: no one waits on it, so it is cancelled, not paid for.
    for (const entry of chunk) core.ledger.answer(entry, aborted('shutdown'));
    try {
      await account.api.cancel(batch.id, AbortSignal.timeout(CANCEL_TIMEOUT_MS));
    } catch (error) {
      core.options.warn(`could not cancel Message Batch ${batch.id}: ${messageOf(error)}`);
    }
    return;
  }
  for (const entry of chunk) {
    entry.calls++;
    core.ledger.place(entry, 'sent');
  }
  const entries = new Map(chunk.map((entry) => [entry.customId, entry]));
  core.open.set(batch.id, { account, entries });
  try {
    await core.options.submitted?.({
      batchId: batch.id,
      endpoint: account.api.endpoint,
      customIds: [...entries.keys()],
      digests: [...entries.values()].map((entry) => entry.digest),
    });
    await pollBatch(core, { account, batch, entries, followed: false, started });
  } catch (error) {
    // Whatever went wrong, no step of the batch is left waiting, and the batch is not paid for.
    abandon(core, account, batch.id, entries, error);
  } finally {
    core.open.delete(batch.id);
    core.consider();
  }
}

/**
 * Creates the chunk's batch, with the provider's retries; a 429 for a full processing queue is
 * waited out (or the chunk halved), a 413 halves it. Undefined when no batch of the whole chunk
 * is to be polled: its halves ran on their own, its steps were answered, or the collector closed.
 */
async function create(
  core: CollectorCore,
  account: Account,
  chunk: Entry[],
): Promise<MessageBatch | undefined> {
  const signal = core.closing;
  const requests: BatchRequest[] = chunk.map((entry) => ({
    custom_id: entry.customId,
    params: entry.step.params,
  }));
  const config = chunk[0]!.step.provider;
  let refusals = 0;
  let refusedSince: number | undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      return await account.api.create(requests, core.creating);
    } catch (error) {
      if (signal.aborted) return undefined;
      if (error instanceof BatchApiError && error.failure.error.code === 'rate_limited') {
        // The processing queue is full (the tier's limit of requests in batches in progress),
        // or the batch routes' request rate: not a failure of these steps, so no retry is
        // spent. While a batch of this account is open, it waits for room; with none open, a
        // chunk larger than the queue could never go whole, so it is halved first.
        if (chunk.length > 1 && !hasOpen(core, account)) {
          await halves(core, account, chunk);
          return undefined;
        }
        refusedSince ??= Date.now();
        const patience = core.options.patienceMs ?? DEFAULT_QUEUE_PATIENCE_MS;
        const left = patience - (Date.now() - refusedSince);
        if (left > 0) {
          core.countRefusal();
          // The last try comes when the patience runs out, however long retry-after said.
          const ms = Math.min(error.retryAfterMs ?? backoff(config, refusals), left);
          refusals++;
          attempt--;
          if (!(await wait(ms, signal))) return undefined;
          continue;
        }
        // Past the patience: the steps fail `rate_limited`, as a real-time request would.
        const failure = createFailure(error, refusals + 1);
        for (const entry of chunk)
          core.ledger.answer(entry, { ...failure, calls: entry.calls + 1 });
        core.consider();
        return undefined;
      }
      if (error instanceof BatchApiError && error.status === 413 && chunk.length > 1) {
        // Larger than the server takes: each half goes on its own.
        await halves(core, account, chunk);
        return undefined;
      }
      const retry = error instanceof BatchApiError ? error.retry : false;
      if (!retry || attempt >= config.maxRetries) {
        const failure = createFailure(error, attempt + 1);
        for (const entry of chunk)
          core.ledger.answer(entry, { ...failure, calls: entry.calls + 1 });
        core.consider();
        return undefined;
      }
      if (!(await wait(backoff(config, attempt, error), signal))) return undefined;
    }
  }
}

/** Each half of the chunk runs as a batch of its own. */
async function halves(core: CollectorCore, account: Account, chunk: Entry[]): Promise<void> {
  const half = Math.ceil(chunk.length / 2);
  await Promise.all([
    runBatch(core, account, chunk.slice(0, half)),
    runBatch(core, account, chunk.slice(half)),
  ]);
}

/** Whether a batch of `account` is open (created and not yet read): the queue will drain. */
function hasOpen(core: CollectorCore, account: Account): boolean {
  for (const open of core.open.values()) if (open.account === account) return true;
  return false;
}

/** A batch the lane cannot go on with: its steps fail, and it is cancelled. */
function abandon(
  core: CollectorCore,
  account: Account,
  batchId: string,
  entries: Map<string, Entry>,
  error: unknown,
): void {
  const message = `the batches lane could not go on with Message Batch ${batchId}: ${excerpt(messageOf(error))}`;
  core.options.warn(message);
  let waiting = false;
  for (const entry of entries.values()) {
    if (entry.done) continue;
    waiting = true;
    core.ledger.answer(entry, failed({ code: 'server_error', message }, entry.calls));
  }
  if (waiting && !core.closing.aborted) {
    void account.api.cancel(batchId, AbortSignal.timeout(CANCEL_TIMEOUT_MS)).catch(() => {});
  }
}
