import os from 'node:os';
import type { MessagePort, Worker } from 'node:worker_threads';
import type { ChildSpec } from '../../../shared/child-spec.js';
import { formatDuration } from '../../../shared/duration.js';
import type { Failure } from '../../../shared/failure.js';
import type { BatchEnds, ChildTask } from '../../../shared/protocol.js';
import { redactSecrets } from '../../../shared/redact.js';
import type { CancelReason } from '../../../shared/result.js';
import { type ChildHandle, noDeliveries, type PoolStats } from '../spawned-child.js';
import type { ChildRunner, SpawnExtras } from '../types.js';
import { Admission } from './admission.js';
import {
  DEFAULT_AGENTS_PER_THREAD,
  DEFAULT_CANCEL_GRACE_MS,
  DEFAULT_MAX_CRASHES,
  DEFAULT_TOOL_GRACE_MS,
} from './defaults.js';
import { CrashForensics } from './forensics.js';
import { type ChildPiscina, makePiscina } from './piscina.js';
import { ThreadPlacement } from './placement.js';
import { type PoolSide, RunningChild } from './running-child.js';
import { Uplinks } from './uplinks.js';

export {
  DEFAULT_AGENTS_PER_THREAD,
  DEFAULT_CANCEL_GRACE_MS,
  DEFAULT_MAX_CRASHES,
  DEFAULT_TOOL_GRACE_MS,
} from './defaults.js';

/**
 * Resumes of one child for any reason: a backstop. Innocent children are not blamed, and the
 * blamed ones resume in quarantine, so only a pathological crash loop reaches it.
 */
const MAX_RESUMES = 100;

/**
 * Graces in all for a cancelled child whose worker still answers: a second one, so a worker
 * that was slow to read the cancel (a burst of thousands) is not terminated for it, and no more,
 * so a child that ignores its cancel is still ended within twice `cancelGraceMs`.
 */
const MAX_GRACE_ROUNDS = 2;

/**
 * Runs children on a piscina pool, many to a thread. Admission is ours (`Admission`), so a
 * queued child can be cancelled without touching a worker; each worker talks to main over one
 * uplink for all its children (`Uplinks`), which hands what comes up for a child straight to
 * its `RunningChild`; when a worker dies, `CrashForensics` decides who resumes where.
 * Piscina's `signal` is never used: it would terminate a whole worker and every sibling on it.
 */
export class ChildPool implements ChildRunner {
  readonly #piscina: ChildPiscina;
  #quarantine: ChildPiscina | undefined;
  readonly #options: PoolOptions;
  readonly #maxCrashes: number;
  readonly #admission: Admission<RunningChild>;
  /** Children handed to piscina and not yet ended there, by id: where their uplink goes. */
  readonly #running = new Map<string, RunningChild>();
  readonly #forensics = new CrashForensics();
  readonly #uplinks = new Uplinks(this.#running);
  /** What every child of this pool reaches it by. */
  readonly #side: PoolSide;
  #closed = false;
  /**
   * Children started this turn and not yet handed to a worker: they go at the turn's end, one
   * piscina task per thread (`#handOff`). A piscina task and a post per child were most of main's
   * time in a burst of spawns (docs/BENCHMARKS.md, "Spawn burst").
   */
  #handoff: RunningChild[] = [];
  /** Which thread each batch goes to, and each thread's load. */
  readonly #placement = new ThreadPlacement();

  constructor(options: PoolOptions = {}) {
    const threads = options.threads ?? Math.max(1, os.availableParallelism());
    const perThread = options.agentsPerThread ?? DEFAULT_AGENTS_PER_THREAD;
    this.#maxCrashes = options.maxCrashes ?? DEFAULT_MAX_CRASHES;
    this.#options = options;
    const uplinks = this.#uplinks;
    this.#side = {
      counts: noDeliveries(),
      graceMs: options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
      send: (threadId, child, message) => uplinks.send(threadId, child, message),
      unqueue: (child) => this.#admission.remove(child),
      ping: (threadId) => uplinks.ping(threadId),
      readPending: (threadId) => uplinks.readPending(threadId),
      graceOver: (child) => this.#graceOver(child),
      settled: (child) => this.#release(child),
      toolGraceMs: options.toolGraceMs ?? DEFAULT_TOOL_GRACE_MS,
      heardSince: (threadId, time) => uplinks.heardSince(threadId, time),
      toolStuck: (child, threadId) => this.#terminateWorkerOf(child, threadId),
    };
    this.#piscina = makePiscina({
      ...this.#shape(),
      threads,
      perThread,
      minThreads: threads,
      balancer: (task, workers) => this.#placement.balance(this.#piscina, task, workers),
    });
    this.#uplinks.attach(this.#piscina);
    this.#admission = new Admission(threads * perThread, (child) => this.#start(child));
  }

  #shape() {
    return {
      idleTimeoutMs: this.#options.idleTimeoutMs,
      maxOldGenerationSizeMb: this.#options.maxOldGenerationSizeMb,
    };
  }

  /**
   * A child blamed for a crash resumes in quarantine: a separate one-thread pool made on first
   * need, so that if it crashes again it takes down only other suspects, not the thousands of
   * innocent children of the main pool.
   */
  #quarantinePool(): ChildPiscina {
    if (!this.#quarantine) {
      this.#quarantine = makePiscina({
        ...this.#shape(),
        threads: 1,
        perThread: 256,
        minThreads: 0,
        balancer: (task, workers) => this.#placement.balance(this.#quarantine!, task, workers),
      });
      this.#uplinks.attach(this.#quarantine);
    }
    return this.#quarantine;
  }

  get threads(): number {
    return this.#piscina.threads.length;
  }

  get liveCount(): number {
    return this.#running.size + this.#admission.queued;
  }

  /** Counts taken where results arrive (a copy). */
  get stats(): PoolStats {
    return { ...this.#side.counts, crashRecords: this.#forensics.size };
  }

  /** Resolves when every worker thread has loaded the child entry (the pool is warm). */
  async warm(): Promise<void> {
    const count = this.#piscina.maxThreads;
    await Promise.all(Array.from({ length: count }, () => this.#piscina.run([], { name: 'warm' })));
  }

  spawn(spec: ChildSpec, extras: SpawnExtras = {}): ChildHandle {
    const child = new RunningChild(spec, extras, this.#side).serve();
    if (this.#closed) {
      child.deliverFromMain({ outcome: 'cancelled', reason: 'shutdown' });
      return child;
    }
    this.#admission.push(child);
    return child;
  }

  /** Starts a run of `child`: it goes to a worker with the rest of this turn's. */
  #start(child: RunningChild): void {
    this.#placement.unplace(child);
    child.startRun();
    this.#running.set(child.id, child);
    // A microtask, not the next turn: a spawn reaches its worker as soon as before, and a
    // synchronous loop of spawns is one handoff.
    if (this.#handoff.length === 0) queueMicrotask(() => this.#handOff());
    this.#handoff.push(child);
  }

  /**
   * Hands this turn's children to the workers: each to the thread with the fewest children (the
   * bound of `agentsPerThread` holds per thread, as when each child was a task of its own), each
   * thread's as one piscina task. A child cancelled before this never reaches a worker.
   */
  #handOff(): void {
    const children = this.#handoff;
    this.#handoff = [];
    const batches = new Map<ChildPiscina, Map<number | undefined, RunningChild[]>>();
    const threads = this.#piscina.threads.map((worker) => worker.threadId);
    const planned = new Map<number, number>();
    for (const child of children) {
      if (!this.#running.has(child.id)) continue; // settled in between (closed, delivered)
      if (child.cancelReason !== undefined) {
        child.deliverFromMain({ outcome: 'cancelled', reason: child.cancelReason });
        continue;
      }
      const pool = child.crashes > 0 ? this.#quarantinePool() : this.#piscina;
      // The quarantine's one thread is piscina's to pick (it may not have started yet).
      const thread =
        pool === this.#piscina ? this.#placement.leastLoaded(threads, planned) : undefined;
      if (thread !== undefined) planned.set(thread, (planned.get(thread) ?? 0) + 1);
      let byThread = batches.get(pool);
      if (!byThread) {
        byThread = new Map();
        batches.set(pool, byThread);
      }
      const batch = byThread.get(thread);
      if (batch) batch.push(child);
      else byThread.set(thread, [child]);
    }
    for (const [pool, byThread] of batches) {
      for (const [thread, batch] of byThread) this.#runBatch(pool, thread, batch);
    }
  }

  #runBatch(pool: ChildPiscina, thread: number | undefined, children: RunningChild[]): void {
    const tasks: ChildTask[] = [];
    const transferList: MessagePort[] = [];
    for (const child of children) {
      const bridge = child.extras.makeBridge?.();
      const task: ChildTask = bridge ? { spec: child.spec, bridge } : { spec: child.spec };
      if (child.extras.private) task.private = child.extras.private;
      if (bridge) transferList.push(bridge);
      tasks.push(task);
    }
    const ended = this.#placement.posting({ thread, children }, () =>
      pool.run(tasks, transferList.length > 0 ? { transferList } : {}),
    );
    ended.then(
      (ends: BatchEnds) => {
        children.forEach((child, index) => {
          const thrown = ends[index];
          this.#finish(child, thrown == null ? undefined : new Error(thrown));
        });
      },
      (error: unknown) => {
        for (const child of children) this.#finish(child, error);
      },
    );
  }

  /** The child's task ended, with or without a result on its worker's uplink. */
  #finish(child: RunningChild, error: unknown): void {
    // The result is the last thing a child sends: once it is read there is nothing left to read.
    if (!isSettled(child)) this.#uplinks.readPending();
    // Still unsettled with every message of its worker read: the child's result is missing.
    if (!isSettled(child)) {
      if (child.cancelReason !== undefined) {
        child.deliverFromMain({ outcome: 'cancelled', reason: child.cancelReason });
      } else if (child.stuckTool) {
        // Its tool blocked the thread past its limit: run again, it would block the next one.
        child.deliverFromMain({ outcome: 'failed', failure: stuckToolFailure(child.stuckTool) });
      } else if (this.#closed) {
        child.deliverFromMain({ outcome: 'cancelled', reason: 'shutdown' });
      } else {
        const why = redactSecrets(
          error instanceof Error ? error.message : 'task ended without a result',
        );
        if (this.#afterCrash(child, why)) return;
      }
    }
    this.#release(child);
  }

  /** The child lost its worker: resume it (true), or settle it failed when it may not resume. */
  #afterCrash(child: RunningChild, why: string): boolean {
    const threadId = child.threadId;
    const verdict =
      threadId === undefined
        ? { blamed: false, deliberate: false }
        : this.#forensics.judge(threadId, child.id, () => this.#witnesses(threadId));
    if (verdict.blamed) child.crashes++;
    let failure: Failure | undefined;
    if (child.crashes >= this.#maxCrashes) {
      failure = {
        code: 'worker_crashed',
        message: `worker crashed ${child.crashes} times while this agent ran a tool; last: ${why}`,
      };
    } else if (child.resumes >= MAX_RESUMES) {
      failure = {
        code: 'worker_lost',
        message: `lost its worker ${child.resumes + 1} times; last: ${why}`,
      };
    }
    if (failure) {
      child.deliverFromMain({ outcome: 'failed', failure });
      return false;
    }
    // A crashed worker loses no agent: resume on a fresh one from the last committed step.
    this.#resume(
      child,
      verdict.deliberate ? 'worker terminated for a stuck sibling' : `worker crashed: ${why}`,
    );
    return true;
  }

  /** Every child still on `threadId`, with its last messages read. */
  #witnesses(threadId: number): { id: string; openTools: ReadonlySet<string> }[] {
    // Read that worker's uplink first: a child whose `started` is still unread has no thread
    // yet, and filtering before that read would leave it out; judged later on its own, with
    // nobody in a tool, it would be blamed.
    this.#uplinks.readPending(threadId);
    const witnesses: { id: string; openTools: ReadonlySet<string> }[] = [];
    for (const other of this.#running.values()) {
      if (other.threadId === threadId) witnesses.push({ id: other.id, openTools: other.openTools });
    }
    return witnesses;
  }

  #resume(child: RunningChild, reason: string): void {
    child.endRun();
    child.resume();
    child.extras.onEvent?.({
      type: 'agent-resume',
      agentId: child.id,
      attempt: child.resumes,
      reason,
    });
    this.#start(child);
  }

  /**
   * Its run is over: when it settles (its result read on the uplink), or when its task ends
   * without one. Its room goes to the next in line at once: the batch it came in may run on.
   * Only once per run: a child not in `#running` (still queued, or released) is let be.
   */
  #release(child: RunningChild): void {
    if (this.#running.get(child.id) !== child) return;
    if (child.graceTimer) clearTimeout(child.graceTimer);
    this.#forensics.forget(child.threadId, child.id);
    this.#placement.unplace(child);
    child.endRun();
    this.#running.delete(child.id);
    this.#admission.done();
  }

  #graceOver(child: RunningChild): void {
    if (isSettled(child)) return;
    const threadId = child.threadId;
    if (threadId === undefined) {
      // Its cancel waits for `started` (a fresh worker still opening its uplink): the grace
      // begins again, so a child that then ignores the cancel is still ended.
      child.startGrace(child.grace?.rounds ?? 0);
      return;
    }
    // A worker that answered during the grace is not stuck in a synchronous loop: it is slow,
    // working through a burst (10,000 cancels at once queue their aborts and log writes).
    // Terminating it would resume every sibling; give the child one more grace. Not while
    // the pool closes: every sibling is being cancelled too, none would resume, and waiting
    // would only hold the shutdown up.
    const grace = child.grace!;
    const answered = this.#uplinks.heardSince(threadId, grace.since);
    // Reading the uplink may have delivered this very child's result.
    if (isSettled(child)) return;
    if (answered && !this.#closed && grace.rounds + 1 < MAX_GRACE_ROUNDS) {
      child.startGrace(grace.rounds + 1);
      return;
    }
    this.#terminateWorkerOf(child, threadId);
  }

  #terminateWorkerOf(child: RunningChild, threadId: number): void {
    // Only the stuck child is to blame; its siblings resume elsewhere without a mark.
    this.#uplinks.readPending(threadId);
    if (isSettled(child)) return;
    const witnesses = () => this.#witnesses(threadId);
    if (!this.#forensics.terminating(threadId, child.id, witnesses)) return;
    void this.#workerByThreadId(threadId)?.terminate();
  }

  #workerByThreadId(threadId: number): Worker | undefined {
    const threads = [...this.#piscina.threads, ...(this.#quarantine?.threads ?? [])];
    return threads.find((worker) => worker.threadId === threadId);
  }

  /** Cancels every child with `reason`, waits for every result, then closes the pool. */
  async close(reason: CancelReason = 'shutdown'): Promise<void> {
    this.#closed = true;
    const children = [...this.#admission.waiting(), ...this.#running.values()];
    for (const child of children) child.cancel(reason);
    await Promise.all(children.map((child) => child.result));
    await this.#piscina.destroy();
    await this.#quarantine?.destroy();
  }
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
   * How long past its time limit a tool may keep its worker from answering before the worker is
   * terminated, in ms (default 1 s).
   */
  toolGraceMs?: number;
  /**
   * Crashes of its worker a child may be blamed for (it was running a tool when the worker died)
   * before it settles `failed` instead of resuming (default 3).
   */
  maxCrashes?: number;
}

export type { ChildHandle, ChildStatus, PoolStats } from '../spawned-child.js';
export type { SpawnExtras } from '../types.js';

/** Read afresh each time: reading an uplink may settle the child in between. */
function isSettled(child: RunningChild): boolean {
  return child.status === 'settled';
}

/** Why a child whose tool blocked its worker thread failed. */
function stuckToolFailure(stuck: { tool: string; limitMs: number }): Failure {
  return {
    code: 'tool_timeout',
    message: `tool \`${stuck.tool}\` ran past its ${formatDuration(stuck.limitMs)} time limit (timeoutMs ${stuck.limitMs}) and kept its worker thread from answering; the thread was terminated and its other agents resumed elsewhere`,
  };
}
