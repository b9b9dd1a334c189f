import type { ChildSpec } from '../../../shared/child-spec.js';
import { keepsLog, withoutLog } from '../../../shared/journal/policy.js';
import { journalResult, segmentPath } from '../../../shared/journal/writer.js';
import type { MainMessage, WorkerMessage } from '../../../shared/protocol.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { receive, resumed, runEnds, runStarts } from '../capabilities.js';
import { type DeliveryCounts, type Ending, SpawnedChild } from '../spawned-child.js';
import type { SpawnExtras } from '../types.js';

/** What a running child needs of its pool: one object, shared by all the pool's children. */
export interface PoolSide {
  readonly counts: DeliveryCounts;
  /** How long a cancelled child may ignore its cancel, in ms. */
  readonly graceMs: number;
  /** Queues a message for `child` on `threadId`'s uplink. */
  send(threadId: number, child: string, message: MainMessage): void;
  /** Takes a child still waiting for admission out of the line; false when it was not waiting. */
  unqueue(child: RunningChild): boolean;
  /** Asks `threadId`'s worker to answer: whether its event loop still turns. */
  ping(threadId: number): void;
  /** Reads what `threadId`'s worker has posted and main has not read yet. */
  readPending(threadId: number): void;
  /** The child's cancel grace is over and it has not settled. */
  graceOver(child: RunningChild): void;
  /** The child settled: its run, if it has one, is over for the pool. */
  settled(child: RunningChild): void;
  /**
   * How long past its time limit a tool may keep its worker silent before the worker is
   * terminated, in ms (`toolGraceMs`).
   */
  readonly toolGraceMs: number;
  /** Whether `threadId`'s worker has posted anything since `time` (its event loop turns). */
  heardSince(threadId: number, time: number): boolean;
  /** A tool of `child` blocks its worker past its limit and the grace: end that worker. */
  toolStuck(child: RunningChild, threadId: number): void;
}

/** A timed tool call of a child that runs in its worker, as main's watchdog keeps it. */
interface WatchedTool {
  tool: string;
  limitMs: number;
  timer: NodeJS.Timeout;
}

/**
 * One child of the local pool on the main thread, from spawn until its result is delivered, and
 * the handle its caller holds. It owns its state (spec, status, cancel, grace, crashes) and its
 * traffic on the uplink of the worker its current run is on: what comes up for it is handed to
 * it once (`receive`), and what main tells it goes down from here. What is no runner's own
 * goes to the capability that takes it (`CAPABILITIES`), and each capability hears of the
 * child's runs. A child resumed after its worker died starts a new run, on another worker; what
 * the old one sends is no longer heard.
 */
export class RunningChild extends SpawnedChild {
  /** Crashes this child was blamed for. */
  crashes = 0;
  /** Times it was resumed on a fresh worker. */
  resumes = 0;
  /** When its current grace began (performance.now()), and how many it had before. */
  grace: { since: number; rounds: number } | undefined;
  /** Its current run's worker, known from its `started`. */
  threadId: number | undefined;
  /** Its current run's calls of tools that run in the worker, entered and not yet exited. */
  readonly openTools = new Set<string>();
  /**
   * The timed ones among them, each with the watchdog timer that fires at its limit. A call still
   * open then, on a worker that does not answer a ping within `toolGraceMs`, is blocking its
   * thread (a synchronous loop): no timer of that worker can fire, so main ends the thread.
   */
  readonly #watched = new Map<string, WatchedTool>();
  /** The call that blocked its worker and had it terminated: the child fails `tool_timeout`. */
  stuckTool: { tool: string; limitMs: number } | undefined;
  readonly #pool: PoolSide;
  /** Whether a run of it is on a worker and heard: from its start until its task ends. */
  #inRun = false;
  /** Messages for it before its run's worker was known: they go with `started`. */
  #early: MainMessage[] | undefined;

  constructor(spec: ChildSpec, extras: SpawnExtras, pool: PoolSide) {
    super(spec, extras, pool.counts);
    this.#pool = pool;
  }

  /** A run of it starts on a worker (its first, or a resume). */
  startRun(): void {
    this.threadId = undefined;
    this.openTools.clear();
    this.#unwatchAll();
    this.#early = undefined;
    this.#inRun = true;
    runStarts(this.served);
  }

  /** Its run's task ended, or its worker died: nothing more of that run is heard. */
  endRun(): void {
    this.#inRun = false;
    this.#unwatchAll();
    runEnds(this.served);
  }

  /** Its worker died and it starts again on another (`startRun` follows). */
  resume(): void {
    // It goes on from its records on the threads it ran on: the segment of the one that died,
    // and those it was resumed from before (its start there may not have been written).
    const before =
      this.spec.resume && 'segments' in this.spec.resume ? this.spec.resume.segments : [];
    const died =
      this.threadId === undefined
        ? []
        : [segmentPath(this.spec.logDir, process.pid, `t${this.threadId}`)];
    this.resumes++;
    this.spec = {
      ...this.spec,
      resume: { segments: [...before, ...died] },
      inc: this.resumes,
    };
    resumed(this.served);
  }

  /** A message about it, read on `threadId`'s uplink. */
  receive(threadId: number, message: WorkerMessage): void {
    if (!this.#inRun) return;
    if (message.type === 'started') {
      if (this.threadId !== undefined) return;
      this.threadId = threadId;
      if (this.status === 'queued') this.status = 'running';
      const early = this.#early;
      this.#early = undefined;
      if (early) for (const told of early) this.#post(told);
      // A cancel asked for before its worker was known goes now.
      if (this.cancelReason !== undefined)
        this.#post({ type: 'cancel', reason: this.cancelReason });
      return;
    }
    // Only this run's worker speaks for the child (a message of an earlier run is stale).
    if (threadId !== this.threadId) return;
    switch (message.type) {
      case 'event':
        this.extras.onEvent?.(message.event);
        return;
      case 'tool-enter':
        this.openTools.add(message.callId);
        if (message.timeoutMs !== undefined) {
          this.#watch(message.callId, message.tool ?? '(unnamed)', message.timeoutMs);
        }
        return;
      case 'tool-exit':
        this.openTools.delete(message.callId);
        this.#unwatch(message.callId);
        return;
      case 'result':
        this.deliverFromWorker(message.result);
        return;
      default:
        receive(this.served, message);
    }
  }

  /**
   * Watches a timed call: its worker answers it at its limit, unless a synchronous loop blocks
   * that worker's event loop. One timer per timed call, cleared at its exit: nothing is paid
   * while no tool runs.
   */
  #watch(callId: string, tool: string, limitMs: number): void {
    const timer = setTimeout(() => this.#limitReached(callId), limitMs);
    timer.unref();
    this.#watched.set(callId, { tool, limitMs, timer });
  }

  #unwatch(callId: string): void {
    const watched = this.#watched.get(callId);
    if (!watched) return;
    clearTimeout(watched.timer);
    this.#watched.delete(callId);
  }

  #unwatchAll(): void {
    for (const watched of this.#watched.values()) clearTimeout(watched.timer);
    this.#watched.clear();
  }

  /** The call's limit passed on main: ask its worker to answer, and look again after the grace. */
  #limitReached(callId: string): void {
    const watched = this.#watched.get(callId);
    const threadId = this.threadId;
    if (!watched || threadId === undefined || this.status === 'settled') return;
    const since = performance.now();
    this.#pool.ping(threadId);
    watched.timer = setTimeout(
      () => this.#graceEnded(callId, threadId, since),
      this.#pool.toolGraceMs,
    );
    watched.timer.unref();
  }

  #graceEnded(callId: string, threadId: number, since: number): void {
    // Its exit may be waiting on the uplink: read it first.
    const answered = this.#pool.heardSince(threadId, since);
    const watched = this.#watched.get(callId);
    if (!watched || this.status === 'settled' || this.threadId !== threadId) return;
    this.#watched.delete(callId);
    // A worker that answers turns its event loop, so its own timer answers the call: a slow
    // worker (a burst of thousands of children) is never terminated for that.
    if (answered) return;
    this.stuckTool = { tool: watched.tool, limitMs: watched.limitMs };
    this.#pool.toolStuck(this, threadId);
  }

  /** Sends it `message` on its current run, once that run's worker is known. */
  override tell(message: MainMessage): void {
    if (!this.#inRun) return;
    if (this.threadId !== undefined) this.#post(message);
    else if (this.#early) this.#early.push(message);
    else this.#early = [message];
  }

  #post(message: MainMessage): void {
    if (this.threadId !== undefined && this.#inRun)
      this.#pool.send(this.threadId, this.id, message);
  }

  /** Reads what its worker has posted and main has not read yet. */
  override readUplink(): void {
    if (this.threadId !== undefined) this.#pool.readPending(this.threadId);
  }

  protected cancelled(reason: CancelReason): void {
    // Still waiting for admission: it never reached a worker, and ends here.
    if (this.#pool.unqueue(this)) {
      this.deliverFromMain({ outcome: 'cancelled', reason });
      return;
    }
    this.cancelReason = reason;
    // Before `started` it waits, and goes with it.
    if (this.threadId !== undefined) this.#post({ type: 'cancel', reason });
    // Last resort: a child that ignores cooperative cancel (a tool stuck in a synchronous loop)
    // blocks its whole thread. Its worker is terminated; its siblings resume elsewhere.
    this.startGrace(0);
  }

  /** Starts a cancel grace; `rounds` is how many it had before. */
  startGrace(rounds: number): void {
    const threadId = this.threadId;
    // Its answer tells, when the grace is over, whether the worker's event loop still turns.
    if (threadId !== undefined) this.#pool.ping(threadId);
    this.grace = { since: performance.now(), rounds };
    this.graceTimer = setTimeout(() => this.#pool.graceOver(this), this.#pool.graceMs);
    this.graceTimer.unref();
  }

  override deliver(result: AgentResult): boolean {
    const first = super.deliver(result);
    // After everyone heard of it (its capabilities' `settled` before their `runEnds`, as when
    // the pool heard of it only at its task's end).
    if (first) this.#pool.settled(this);
    return first;
  }

  protected madeOnMain(ending: Ending): AgentResult {
    const made = this.endedOnMain(ending);
    return keepsLog(this.spec.logs, ending.outcome) ? made : withoutLog(made);
  }

  protected override deliveredFromMain(result: AgentResult): void {
    // The worker never journaled this result: main's segment does, off main's event loop and
    // not awaited (10,000 children cancelled at once are one group-committed write).
    journalResult(this.spec.logDir, result, keepsLog(this.spec.logs, result.outcome));
  }
}
