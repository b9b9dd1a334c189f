import { delay } from 'abort-controller-x';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { backoffMs } from '../../shared/provider/retry.js';
import { BatchApiError } from './batch-api.js';
import type { BatchCollectorOptions } from './collector-options.js';
import type { Account, Entry, EntryLedger, WatchedBatch } from './lane-entry.js';

/** How long a cancel the lane sends on its own may take. */
export const CANCEL_TIMEOUT_MS = 10_000;

/**
 * What a batch's run, its polling and a followed batch share with their collector: its options,
 * its steps, its batches and its signals. The collector makes one and keeps the rest to itself.
 */
export interface CollectorCore {
  readonly options: BatchCollectorOptions;
  readonly ledger: EntryLedger;
  /** This run's open batches (created and not yet read), by id. */
  readonly open: Map<string, WatchedBatch>;
  /** Steps a rerun follows in a killed run's batches, by batch id. */
  readonly followed: Map<string, WatchedBatch>;
  /** Aborts when the collector begins to close. */
  readonly closing: AbortSignal;
  /** Aborts the creates under way, a grace after the collector began to close. */
  readonly creating: AbortSignal;
  /** A step goes to wait for the next batch, or, with no room before its deadline, to real time. */
  enqueue(account: Account, entry: Entry): void;
  /** Sends what waits if every agent of the lane waits, else arms the window. */
  consider(): void;
  /** A batch ended this long after its create began (the `auto` lane's turnaround). */
  observe(ms: number): void;
  /** Keeps `work` until the collector has closed; a failure of it is a warning. */
  track(work: Promise<void>): void;
  /** A batch was created. */
  countBatch(): void;
  /** A create was refused for a full processing queue and will be tried again. */
  countRefusal(): void;
}

/** Waits `ms`; false when the collector closed meanwhile. */
export async function wait(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await delay(signal, ms);
    return true;
  } catch {
    return false;
  }
}

/** The wait before another try: the server's `retry-after` when its answer had one. */
export function backoff(config: ProviderConfig, retry: number, error?: unknown): number {
  const headers = error instanceof BatchApiError ? error.failure.headers : undefined;
  return backoffMs({ retry, baseMs: config.backoffBaseMs, maxMs: config.backoffMaxMs, headers });
}
