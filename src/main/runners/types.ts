import type { MessagePort } from 'node:worker_threads';
import type { ChildSpec } from '../../shared/child-spec.js';
import type { AgentEvent } from '../../shared/events.js';
import type { ChildPrivate } from '../../shared/protocol.js';
import type { CancelReason } from '../../shared/result.js';
import type { ChildCapabilities } from './capabilities.js';
import type { ChildHandle, PoolStats } from './spawned-child.js';

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
  /** Cancels every child with `reason`, waits for every result, then lets go of what it holds. */
  close(reason?: CancelReason): Promise<void>;
}

/** What a spawn may carry beside the spec. */
export interface SpawnExtras {
  onEvent?: ((event: AgentEvent) => void) | undefined;
  /**
   * The queue job's id (queue mode): the same id twice is one job, so a batch rerun re-adds
   * only what is missing. Default: the agent's id. The local pool ignores it.
   */
  jobId?: string | undefined;
  /**
   * Its wall-clock limit in ms from this spawn (the `timeout` option): past it the child is
   * cancelled with reason `timeout`, wherever it is (queued, running, resumed).
   */
  timeoutMs?: number | undefined;
  /** Makes the worker end of a fresh host bridge; called at each start (and resume). */
  makeBridge?: (() => MessagePort) | undefined;
  /**
   * The per-child capabilities the child is given, each with what serves it (`CAPABILITIES`). The
   * spec must carry their flags (`capabilityFlags`); a runner serves what it can of them.
   */
  capabilities?: ChildCapabilities | undefined;
  /**
   * What its task carries beside its spec (its tools' `context`, its API key): never in the
   * spec, so never journaled. The queue runner is never given it (the engine refuses both).
   */
  private?: ChildPrivate | undefined;
}
