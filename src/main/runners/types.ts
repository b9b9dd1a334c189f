import type { BudgetKind } from '../../shared/budget.js';
import type { ChildSpec } from '../../shared/child-spec.js';
import type { CancelReason } from '../../shared/result.js';
import type { ChildHandle } from './local/child-handle.js';
import type { PoolStats, SpawnExtras } from './local/pool-entry.js';

/**
 * How the engine runs children: on this machine's worker threads (`local`), or as jobs on a
 * BullMQ queue that `cohort worker` processes take (`queue`). Results, cancel, generations and
 * the reaper sit above it and are the same for both; a runner's one duty is that every spawned
 * child's handle settles exactly once, whatever happens to where it ran.
 */
export interface ChildRunner {
  /** Worker threads on this machine (0 for the queue: its threads are the workers'). */
  readonly threads: number;
  /** Children spawned and not yet settled. */
  readonly liveCount: number;
  /** Counts independent of the exactly-once guard (see PoolStats). */
  readonly stats: PoolStats;
  /** Resolves when the runner can take children (threads warm, or Redis reached). */
  warm(): Promise<void>;
  spawn(spec: ChildSpec, extras?: SpawnExtras): ChildHandle;
  /** A tree budget the child belongs to is spent: it takes its last turn. */
  budgetSpent(handle: ChildHandle, which: BudgetKind): void;
  /** Reads what the child's worker has posted and main has not read yet (tracing). */
  readUplinkOf(handle: ChildHandle): void;
  /** Cancels every child with `reason`, waits for every result, then lets go of what it holds. */
  close(reason?: CancelReason): Promise<void>;
}
