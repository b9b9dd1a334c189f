import type { MessageBatch } from './batch-api.js';
import { pollBatch, requeue } from './batch-poll.js';
import type { CollectorCore } from './collector-core.js';
import type { Account, Entry } from './lane-entry.js';

/**
 * A step of a killed run's batch (journaled, never read) waits on that batch instead of being
 * sent again: the batch is polled once for all the steps that follow it. Only a success is taken
 * from it; whatever it does not answer is sent afresh, as is every step of it if it cannot be read.
 */
export function follow(core: CollectorCore, account: Account, batchId: string, entry: Entry): void {
  entry.calls++;
  entry.followed = true;
  core.ledger.place(entry, 'sent');
  const followed = core.followed.get(batchId);
  if (followed) {
    followed.entries.set(entry.customId, entry);
    return;
  }
  const entries = new Map([[entry.customId, entry]]);
  core.followed.set(batchId, { account, entries });
  const batch: MessageBatch = { id: batchId, processing_status: 'in_progress', results_url: null };
  core.track(
    pollBatch(core, { account, batch, entries, followed: true })
      .catch((error: unknown) => {
        for (const entry of entries.values()) if (!entry.done) requeue(core, entry, account);
        throw error;
      })
      .finally(() => {
        core.followed.delete(batchId);
        core.consider();
      }),
  );
}
