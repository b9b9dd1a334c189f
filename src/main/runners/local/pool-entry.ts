import type { MessagePort } from 'node:worker_threads';
import type { BudgetKind, StepSpend } from '../../../shared/budget.js';
import type { ChildSpec } from '../../../shared/child-spec.js';
import type { AgentEvent } from '../../../shared/events.js';
import type { Failure } from '../../../shared/failure.js';
import type { Governor } from '../../../shared/governor/governor.js';
import { type AgentResult, type CancelReason, emptyUsage } from '../../../shared/result.js';
import type { TraceOp } from '../../../shared/trace/types.js';
import type { PoolHandle } from './child-handle.js';
import type { ChildLink, LinkListener } from './child-link.js';

/** What the pool keeps of one child, from spawn until its result is delivered. */
export interface Entry {
  spec: ChildSpec;
  handle: PoolHandle;
  link?: ChildLink;
  graceTimer?: NodeJS.Timeout;
  /** When its current grace began (performance.now()), and how many it had before. */
  grace?: { since: number; rounds: number };
  cancelReason?: CancelReason;
  onEvent: ((event: AgentEvent) => void) | undefined;
  makeBridge: (() => MessagePort) | undefined;
  /** Crashes this child was blamed for. */
  crashes: number;
  /** Times it was resumed on a fresh worker. */
  resumes: number;
  extras: SpawnExtras;
  /** A tree budget it belongs to is spent: told to every run of it (a resumed one too). */
  budgetSpent?: BudgetKind;
}

/** How a child ended when main, not its worker, makes its result. */
export type Ending =
  | { outcome: 'cancelled'; reason: CancelReason }
  | { outcome: 'failed'; failure: Failure };

export function synthetic(entry: Pick<Entry, 'spec' | 'handle'>, ending: Ending): AgentResult {
  const spec = entry.spec;
  return {
    id: spec.id,
    title: spec.title,
    outcome: ending.outcome,
    text: '',
    ...(ending.outcome === 'cancelled'
      ? { reason: ending.reason }
      : { reason: ending.failure.message, code: ending.failure.code }),
    logDir: spec.logDir,
    truncated: false,
    elapsedMs: Math.round(performance.now() - entry.handle.spawnedAt),
    generation: spec.generation,
    usage: emptyUsage(),
  };
}

/** What a spawn may carry beside the spec. */
export interface SpawnExtras {
  onEvent?: ((event: AgentEvent) => void) | undefined;
  /**
   * The queue job's id (queue mode): the same id twice is one job, so a batch rerun re-adds
   * only what is missing. Default: the agent's id. The local pool ignores it.
   */
  jobId?: string | undefined;
  /** Makes the worker end of a fresh host bridge; called at each start (and resume). */
  makeBridge?: (() => MessagePort) | undefined;
  /** Span operations of a traced child (`spec.traced`), to replay. */
  onTrace?: ((op: TraceOp) => void) | undefined;
  /** Step spends of a child in a tree budget (`spec.inTree`). */
  onSpend?: ((spend: StepSpend) => void) | undefined;
  /**
   * Committed transcript writes of a checkpointed child (`spec.checkpoint`): the lines appended,
   * or with `replace` the whole new transcript (its first write after a resume).
   */
  onCheckpoint?: ((write: { replace: boolean; lines: string }) => void) | undefined;
  /** The child lost its worker and starts again on another: what its old run left is void. */
  onResume?: (() => void) | undefined;
}

/** The listeners a spawn's extras ask for, beside those every child's link has. */
export function extraListeners(
  extras: SpawnExtras,
): Pick<LinkListener, 'trace' | 'spend' | 'checkpoint'> {
  return {
    ...(extras.onTrace ? { trace: extras.onTrace } : {}),
    ...(extras.onSpend ? { spend: extras.onSpend } : {}),
    ...(extras.onCheckpoint ? { checkpoint: extras.onCheckpoint } : {}),
  };
}

/**
 * Counts kept at the uplinks, independent of the guard that makes delivery exactly-once: a worker
 * that sent two results, or a result made on main for a child that had one, shows up here.
 */
export interface PoolStats {
  /** Result messages received from workers, on every worker's uplink. */
  workerResults: number;
  /** Results main made for children whose worker could not (queued, crashed, terminated). */
  mainResults: number;
  /** Results that arrived for a child that had already settled, and were dropped. */
  duplicateResults: number;
  /** Results handed to callers. */
  delivered: number;
  /** Crash records still held: zero once every child of every dead worker has been judged. */
  crashRecords: number;
}

export interface PoolOptions {
  /** Worker threads; default: the machine's available parallelism. */
  threads?: number;
  /** Children one thread runs at once (piscina's concurrentTasksPerWorker). */
  agentsPerThread?: number;
  /**
   * How long a cancelled child may ignore its cancel before its worker is terminated, in ms;
   * twice that when its worker still answers main (busy, not stuck).
   */
  cancelGraceMs?: number;
  /** How long an idle worker lives, in ms. */
  idleTimeoutMs?: number;
  /** Per-worker V8 heap limit, in MB: one runaway child cannot take the process down. */
  maxOldGenerationSizeMb?: number;
  /**
   * Crashes of its worker a child may be blamed for (it was running a tool when the worker died)
   * before it settles `failed` instead of resuming (default 3).
   */
  maxCrashes?: number;
}

/** What the pool needs beside its options: the engine's governor, when it has one. */
export interface PoolServices {
  governor?: Governor | undefined;
}
