import { journalFor } from '../../shared/journal/writer.js';
import { DEFAULT_BATCH_TURNAROUND_MS } from '../../shared/lane/lane.js';
import { type EngineOptions, warner } from '../engine-options.js';
import { BatchCollector } from './batch-collector.js';
import { DEFAULT_BATCH_POLL_MS, DEFAULT_BATCH_WINDOW_MS } from './collector-options.js';

/**
 * An engine's batches lane collector (docs/LANES.md), wired to its options and its run journal:
 * each batch is journaled before its first poll (a rerun of a killed run follows it) and marked
 * read once its results are (a rerun never replays them); its warnings are `batches` ones. A full
 * processing queue is waited out as long as a refused real-time request would be (`patienceMs`).
 */
export function engineCollector(
  options: EngineOptions,
  logDir: string,
  patienceMs: number | undefined,
): BatchCollector {
  const warn = warner(options.onWarning, 'batches');
  return new BatchCollector({
    windowMs: options.batchWindowMs ?? DEFAULT_BATCH_WINDOW_MS,
    pollMs: options.batchPollMs ?? DEFAULT_BATCH_POLL_MS,
    turnaroundMs: options.batchTurnaroundMs ?? DEFAULT_BATCH_TURNAROUND_MS,
    ...(patienceMs === undefined ? {} : { patienceMs }),
    warn,
    submitted: async ({ batchId, endpoint, customIds, digests }) => {
      const segment = journalFor(logDir);
      segment.append({
        k: 'batch',
        b: batchId,
        at: Date.now(),
        url: endpoint,
        c: customIds,
        d: digests,
      });
      await segment.flushed();
      if (segment.failed) {
        warn(
          `the run journal could not record Message Batch ${batchId} (${segment.failed.message}); a rerun after a kill sends its steps again`,
        );
      }
    },
    read: ({ batchId, endpoint }) => {
      journalFor(logDir).append({ k: 'batch-read', b: batchId, at: Date.now(), url: endpoint });
    },
    ...(options.batchesInFlight ? { inFlight: options.batchesInFlight } : {}),
  });
}
