import os from 'node:os';
import type { Worker } from 'node:worker_threads';
import type { ChildSpec } from '../../../shared/child-spec.js';
import type { Failure } from '../../../shared/failure.js';
import type { ChildTask } from '../../../shared/protocol.js';
import { redactSecrets } from '../../../shared/redact.js';
import type { CancelReason } from '../../../shared/result.js';
import { type ChildHandle, noDeliveries, type PoolStats } from '../spawned-child.js';
import type { ChildRunner, SpawnExtras } from '../types.js';
import { Admission } from './admission.js';
import { CrashForensics } from './forensics.js';
import { type ChildPiscina, makePiscina } from './piscina.js';
import { type PoolSide, RunningChild } from './running-child.js';
import { Uplinks } from './uplinks.js';

export const DEFAULT_MAX_CRASHES = 3;
/**
 * Resumes of one child for any reason: a backstop. Innocent children are not blamed, and the
 * blamed ones resume in quarantine, so only a pathological crash loop reaches it.
 */
const MAX_RESUMES = 100;

export const DEFAULT_AGENTS_PER_THREAD = 2048;
export const DEFAULT_CANCEL_GRACE_MS = 5000;
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
    };
    this.#piscina = makePiscina({ ...this.#shape(), threads, perThread, minThreads: threads });
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
    await Promise.all(
      Array.from({ length: count }, () =>
        this.#piscina.run(undefined as unknown as ChildTask, { name: 'warm' }),
      ),
    );
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

  #start(child: RunningChild): void {
    child.startRun();
    this.#running.set(child.id, child);
    const bridge = child.extras.makeBridge?.();
    const task: ChildTask = bridge ? { spec: child.spec, bridge } : { spec: child.spec };
    if (child.extras.private) task.private = child.extras.private;
    const pool = child.crashes > 0 ? this.#quarantinePool() : this.#piscina;
    pool.run(task, bridge ? { transferList: [bridge] } : {}).then(
      () => this.#finish(child, undefined),
      (error: unknown) => this.#finish(child, error),
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
      } else if (this.#closed) {
        child.deliverFromMain({ outcome: 'cancelled', reason: 'shutdown' });
      } else {
        const why = redactSecrets(
          error instanceof Error ? error.message : 'task ended without a result',
        );
        if (this.#afterCrash(child, why)) return;
      }
    }
    this.#forensics.forget(child.threadId, child.id);
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

  #release(child: RunningChild): void {
    if (child.graceTimer) clearTimeout(child.graceTimer);
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
