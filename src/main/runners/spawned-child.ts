import type { ChildSpec } from '../../shared/child-spec.js';
import { formatDuration } from '../../shared/duration.js';
import type { Failure } from '../../shared/failure.js';
import type { MainMessage } from '../../shared/protocol.js';
import {
  type AgentResult,
  type CancelReason,
  emptyUsage,
  toCancelReason,
} from '../../shared/result.js';
import {
  NOTHING_SERVED,
  type Served,
  type ServedChild,
  serve as serveCapabilities,
  settled,
} from './capabilities.js';
import type { SpawnExtras } from './types.js';

export type ChildStatus = 'queued' | 'running' | 'settled';

/** A spawned child as main sees it; `T` is its result's `value` type (`AgentOptions<T>`). */
export interface ChildHandle<T = unknown> {
  readonly id: string;
  readonly title: string;
  readonly status: ChildStatus;
  /** When it was spawned (performance.now()). */
  readonly spawnedAt: number;
  /** Settles exactly once, never rejects. */
  readonly result: Promise<AgentResult<T>>;
  /** Cancels it; false when it had settled already. */
  cancel(reason?: CancelReason): boolean;
}

/**
 * Counts kept where results arrive, independent of the guard that makes delivery exactly-once: a
 * worker that sent two results, or a result made on main for a child that had one, shows up here.
 */
export interface PoolStats {
  /** Result messages received from workers (or, in queue mode, answers taken from Redis). */
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

/** The counts a runner's children add to as their results arrive: one object per runner. */
export type DeliveryCounts = Omit<PoolStats, 'crashRecords'>;

export function noDeliveries(): DeliveryCounts {
  return { workerResults: 0, mainResults: 0, duplicateResults: 0, delivered: 0 };
}

/** How a child ended when main, not its worker, makes its result. */
export type Ending =
  | { outcome: 'cancelled'; reason: CancelReason }
  | { outcome: 'failed'; failure: Failure };

/**
 * One spawned child as its runner keeps it, from spawn until its result is delivered, and the
 * handle its caller holds: the same object. Both runners' children are one: the local runner's
 * `RunningChild` adds its worker's port traffic, the queue runner's `QueuedChild` its job.
 * `deliver` is the one place a result is delivered, for both runners; a second call is counted
 * and ignored.
 */
export abstract class SpawnedChild implements ChildHandle, ServedChild {
  readonly id: string;
  readonly title: string;
  readonly spawnedAt = performance.now();
  readonly result: Promise<AgentResult>;
  status: ChildStatus = 'queued';
  spec: ChildSpec;
  readonly extras: SpawnExtras;
  /** Set once a cancel has been asked for; what the result made on main says. */
  cancelReason: CancelReason | undefined;
  /** What ends a cancelled child that has not settled in time. */
  graceTimer: NodeJS.Timeout | undefined;
  /**
   * What serves it for each capability it was given (`SpawnExtras.capabilities`): none until
   * its runner calls `serve`, once the whole object (its runner's part included) is made.
   */
  protected served: Served = NOTHING_SERVED;
  readonly #counts: DeliveryCounts;
  #resolve!: (result: AgentResult) => void;
  /** What cancels it at its `timeout`, until it settles. */
  #deadline: NodeJS.Timeout | undefined;
  /** Set when its `timeout` fired: the `reason` its cancelled result says. */
  #timedOut: string | undefined;

  constructor(spec: ChildSpec, extras: SpawnExtras, counts: DeliveryCounts) {
    this.id = spec.id;
    this.title = spec.title;
    this.spec = spec;
    this.extras = extras;
    this.#counts = counts;
    this.result = new Promise((resolve) => {
      this.#resolve = resolve;
    });
    const timeoutMs = extras.timeoutMs;
    if (timeoutMs !== undefined) {
      // Wall clock from the spawn, queueing and resumes included: the caller's deadline.
      this.#deadline = setTimeout(() => {
        this.#timedOut = `timeout: no result within ${formatDuration(timeoutMs)}`;
        this.cancel('timeout');
      }, timeoutMs);
      this.#deadline.unref();
    }
  }

  /**
   * Starts its capabilities' servings. Called by its runner right after construction, not from
   * the constructor: a serving may talk to the child at once, which needs the runner's part.
   */
  serve(): this {
    this.served = serveCapabilities(this.extras.capabilities, this);
    return this;
  }

  /** Sends it a message on its worker: nothing, unless its runner has a port to it. */
  tell(_message: MainMessage): void {}

  /** Reads what its worker posted and main has not read yet: nothing, unless it has a port. */
  readUplink(): void {}

  /** Cancels it; false when it had settled already. A second cancel changes nothing. */
  cancel(reason: CancelReason = 'user'): boolean {
    if (this.status === 'settled') return false;
    if (this.cancelReason === undefined) this.cancelled(reason);
    return true;
  }

  /** The runner's part of a first cancel of an unsettled child. */
  protected abstract cancelled(reason: CancelReason): void;

  /**
   * The one place a child's result is delivered. A second call is ignored and counted as a
   * duplicate: false.
   */
  deliver(result: AgentResult): boolean {
    const counts = this.#counts;
    if (this.status === 'settled') {
      counts.duplicateResults++;
      return false;
    }
    this.status = 'settled';
    clearTimeout(this.#deadline);
    // Every cancelled result says why in a field of its own, whoever made it.
    if (result.outcome === 'cancelled' && result.cancelReason === undefined) {
      result.cancelReason = toCancelReason(result.reason);
    }
    // Its timeout cancelled it: the reason says how long it had, the field stays `timeout`.
    if (this.#timedOut !== undefined && result.cancelReason === 'timeout') {
      result.reason = this.#timedOut;
    }
    this.#resolve(result);
    counts.delivered++;
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.delivered();
    try {
      this.extras.onEvent?.({ type: 'agent-settle', agentId: result.id, result });
    } finally {
      // Whatever a listener does, the span ends and the tree member leaves its ledger.
      settled(this.served, result);
    }
    return true;
  }

  /** The runner's part of a delivery, before anyone hears of the result. */
  protected delivered(): void {}

  /** A result its worker sent (or, in queue mode, its job's answer): counted, then delivered. */
  deliverFromWorker(result: AgentResult): boolean {
    this.#counts.workerResults++;
    return this.deliver(result);
  }

  /**
   * A result main makes for a child no worker could answer for: queued, cancelled, crashed, lost.
   * Never guarded here: a second result made on main must show up as a duplicate.
   */
  deliverFromMain(ending: Ending): void {
    this.#counts.mainResults++;
    const result = this.madeOnMain(ending);
    if (this.deliver(result)) this.deliveredFromMain(result);
  }

  /** The result main makes for `ending`; each runner says what of the log folder it names. */
  protected abstract madeOnMain(ending: Ending): AgentResult;

  /** After a result made on main was delivered (the local runner writes it to the log). */
  protected deliveredFromMain(_result: AgentResult): void {}

  /** The result of `ending`, made on main: empty, its time counted from the spawn. */
  protected endedOnMain(ending: Ending): AgentResult {
    const spec = this.spec;
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
      elapsedMs: Math.round(performance.now() - this.spawnedAt),
      generation: spec.generation,
      usage: emptyUsage(),
    };
  }
}
