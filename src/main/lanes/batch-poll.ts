import { excerpt } from '../../shared/provider/classify.js';
import type { ProviderErrorCode } from '../../shared/provider/types.js';
import { BatchApiError, type MessageBatch } from './batch-api.js';
import {
  createFailure,
  failed,
  messageOf,
  type ResultLine,
  resultOutcome,
} from './batch-result.js';
import { backoff, CANCEL_TIMEOUT_MS, type CollectorCore, wait } from './collector-core.js';
import { type Account, type Entry, liveCount } from './lane-entry.js';

const POLL_GROWTH = 1.5;
const POLL_GROWTH_CAP = 8;

/** A batch to poll to its end and read: this run's own, or a killed run's that steps follow. */
export interface PolledBatch {
  account: Account;
  batch: MessageBatch;
  /** Its steps still to be answered, by custom id. */
  entries: Map<string, Entry>;
  /** A killed run's batch: read at once, only its successes taken, never cancelled. */
  followed: boolean;
  /** When its create began: its turnaround is observed when it ends. */
  started?: number;
}

/** Polls the batch, each wait 1.5× longer, until it has ended, then dispatches its results. */
export async function pollBatch(core: CollectorCore, polled: PolledBatch): Promise<void> {
  const { account, entries, followed, started } = polled;
  const signal = core.closing;
  const config = [...entries.values()][0]!.step.provider;
  let interval = core.options.pollMs;
  let failures = 0;
  let now = polled.batch;
  // A killed run's batch is read at once: it may have ended while no one polled.
  let first = followed;
  while (now.processing_status !== 'ended') {
    if (liveCount(entries) === 0) {
      // No agent waits on it any more. This run's own is cancelled, so its steps are not paid
      // for; a killed run's may hold steps of tasks not started yet, which may follow it still.
      if (!followed) await account.api.cancel(now.id, signal).catch(() => {});
      return;
    }
    if (!first && !(await wait(interval, signal))) return;
    first = false;
    try {
      now = await account.api.retrieve(now.id, signal);
      failures = 0;
      interval = Math.min(interval * POLL_GROWTH, core.options.pollMs * POLL_GROWTH_CAP);
    } catch (error) {
      if (signal.aborted) return;
      failures++;
      if (error instanceof BatchApiError && error.retry) {
        // The batch runs on whatever its poll met: it is polled again, however long that takes.
        if (!(await wait(backoff(config, Math.min(failures - 1, 10), error), signal))) {
          return;
        }
        continue;
      }
      if (followed) {
        // The killed run's batch cannot be read: its steps go into a batch of their own.
        core.options.warn(
          `Message Batch ${now.id} of an earlier run could not be read (${messageOf(error)}); its steps are sent again`,
        );
        for (const entry of entries.values()) if (!entry.done) requeue(core, entry, account);
        return;
      }
      const failure = createFailure(error, failures);
      for (const entry of entries.values())
        core.ledger.answer(entry, { ...failure, calls: entry.calls });
      // Its steps failed: it is not paid for either, if the server still takes a cancel.
      await account.api.cancel(now.id, AbortSignal.timeout(CANCEL_TIMEOUT_MS)).catch(() => {});
      return;
    }
  }
  if (started !== undefined) core.observe(Date.now() - started);
  const answered = new Set<string>();
  if (now.results_url === null) {
    core.options.warn(`Message Batch ${now.id} ended without a results_url; its steps are retried`);
  } else {
    for (const entry of entries.values()) core.ledger.place(entry, undefined);
    await dispatch(core, { ...polled, batch: now }, answered);
    if (signal.aborted) return;
    core.options.read?.({ batchId: now.id, endpoint: account.api.endpoint });
  }
  for (const entry of entries.values()) {
    if (!entry.done && !answered.has(entry.customId)) {
      if (entry.followed) requeue(core, entry, account);
      else retry(core, entry, account, `Message Batch ${now.id} had no result for it`);
    }
  }
}

/**
 * Reads the batch's results file line by line and answers each line's step; `answered` gets
 * each step a line was handled for (answered, or sent again).
 */
async function dispatch(
  core: CollectorCore,
  { batch, entries, account, followed }: PolledBatch,
  answered: Set<string>,
): Promise<void> {
  const signal = core.closing;
  const warn = core.options.warn;
  let line = 0;
  try {
    for await (const text of account.api.results(batch.results_url!, signal)) {
      line++;
      if (text.trim() === '') continue;
      let parsed: ResultLine;
      try {
        parsed = JSON.parse(text) as ResultLine;
      } catch {
        warn(
          `line ${line} of Message Batch ${batch.id}'s results is not whole JSON (cut mid-line?): ${excerpt(text, 80)}; its step is retried`,
        );
        continue;
      }
      const entry =
        typeof parsed?.custom_id === 'string' ? entries.get(parsed.custom_id) : undefined;
      // A killed run's batch holds other steps too: those that were read then, or are no more.
      if (entry === undefined && followed) continue;
      if (entry === undefined) {
        warn(
          `line ${line} of Message Batch ${batch.id}'s results names a custom_id no step of it has (${excerpt(JSON.stringify(String(parsed?.custom_id)), 80)}); ignored`,
        );
        continue;
      }
      if (entry.done || answered.has(entry.customId)) continue;
      try {
        take(core, entry, parsed.result, account, batch.id);
      } catch (error) {
        // One line the lane cannot take costs its own step a retry, not the rest of the file.
        retry(
          core,
          entry,
          account,
          `Message Batch ${batch.id} answered a result that could not be read (${excerpt(messageOf(error))})`,
        );
      }
      answered.add(entry.customId);
    }
  } catch (error) {
    if (signal.aborted) return;
    warn(
      `the results of Message Batch ${batch.id} could not be read whole (${excerpt(messageOf(error))}); the steps without a result are retried`,
    );
  }
}

/** A results line's step gets its turn, another try, or its failure. */
function take(
  core: CollectorCore,
  entry: Entry,
  result: ResultLine['result'],
  account: Account,
  batchId: string,
): void {
  if (entry.followed && result?.type !== 'succeeded') {
    // What an earlier run's batch did not answer is sent again, as if it had never been sent:
    // a step that expired or errored then may well succeed now (`--retry-failed`).
    requeue(core, entry, account);
    return;
  }
  const outcome = resultOutcome(result, batchId, entry.calls);
  if ('retry' in outcome) retry(core, entry, account, outcome.retry, outcome.code);
  else core.ledger.answer(entry, outcome.answer);
}

/**
 * A step of a killed run's batch that batch did not answer: it is sent afresh, as if it had
 * never been sent (not counted as a retry), and no longer follows anything.
 */
export function requeue(core: CollectorCore, entry: Entry, account: Account): void {
  if (entry.done) return;
  if (entry.followed) {
    delete entry.followed;
    entry.calls--;
  }
  core.enqueue(account, entry);
}

/** The step goes into the next batch, as a failed attempt is retried; past its retries, it fails. */
function retry(
  core: CollectorCore,
  entry: Entry,
  account: Account,
  why: string,
  code: ProviderErrorCode = 'server_error',
): void {
  if (entry.done) return;
  if (entry.retries >= entry.step.provider.maxRetries) {
    const message = `${why} (after ${entry.calls} batches)`;
    core.ledger.answer(entry, failed({ code, message }, entry.calls));
    return;
  }
  entry.retries++;
  core.enqueue(account, entry);
}
