import os from 'node:os';
import type { Worker } from 'node:worker_threads';
import { AgentLog, keepsLog, withoutLog } from '../../../shared/agent-log.js';
import type { BudgetKind } from '../../../shared/budget.js';
import type { ChildSpec } from '../../../shared/child-spec.js';
import type { Failure } from '../../../shared/failure.js';
import type { Governor } from '../../../shared/governor/governor.js';
import type { ChildTask } from '../../../shared/protocol.js';
import { redactSecrets } from '../../../shared/redact.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { Admission } from './admission.js';
import { type ChildHandle, PoolHandle } from './child-handle.js';
import { ChildLink } from './child-link.js';
import { CrashForensics } from './forensics.js';
import { type ChildPiscina, makePiscina } from './piscina.js';
import {
  type Ending,
  type Entry,
  extraListeners,
  type PoolOptions,
  type PoolServices,
  type PoolStats,
  type SpawnExtras,
  synthetic,
} from './pool-entry.js';
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
 * uplink for all its children (`Uplinks`), each running child's share of it is a `ChildLink`;
 * when a worker dies, `CrashForensics` decides who resumes where.
 * Piscina's `signal` is never used: it would terminate a whole worker and every sibling on it.
 */
export class ChildPool {
  readonly #piscina: ChildPiscina;
  #quarantine: ChildPiscina | undefined;
  readonly #options: PoolOptions;
  readonly #graceMs: number;
  readonly #maxCrashes: number;
  readonly #admission: Admission<Entry>;
  readonly #running = new Map<string, Entry>();
  /** Every child's entry by its handle, for what main tells a child beside a cancel. */
  readonly #entries = new WeakMap<ChildHandle, Entry>();
  readonly #forensics = new CrashForensics();
  readonly #uplinks = new Uplinks((child, threadId, message) =>
    this.#running.get(child)?.link?.handle(threadId, message),
  );
  readonly #stats: Omit<PoolStats, 'crashRecords'> = {
    workerResults: 0,
    mainResults: 0,
    duplicateResults: 0,
    delivered: 0,
  };
  #closed = false;
  /** Called with every settled result; the engine uses it for stats. */
  onSettle: ((result: AgentResult) => void) | undefined;

  readonly #governor: Governor | undefined;

  constructor(options: PoolOptions = {}, services: PoolServices = {}) {
    this.#governor = services.governor;
    const threads = options.threads ?? Math.max(1, os.availableParallelism());
    const perThread = options.agentsPerThread ?? DEFAULT_AGENTS_PER_THREAD;
    this.#graceMs = options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
    this.#maxCrashes = options.maxCrashes ?? DEFAULT_MAX_CRASHES;
    this.#options = options;
    this.#piscina = makePiscina({ ...this.#shape(), threads, perThread, minThreads: threads });
    this.#uplinks.attach(this.#piscina);
    this.#admission = new Admission(threads * perThread, (entry) => this.#start(entry));
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

  /** Counts taken at the uplinks (a copy). */
  get stats(): PoolStats {
    return { ...this.#stats, crashRecords: this.#forensics.size };
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
    const entry: Entry = {
      spec,
      onEvent: extras.onEvent,
      makeBridge: extras.makeBridge,
      extras,
      crashes: 0,
      resumes: 0,
      handle: new PoolHandle(spec, (reason) => this.#cancel(entry, reason)),
    };
    this.#entries.set(entry.handle, entry);
    if (this.#closed) {
      this.#deliverFromMain(entry, { outcome: 'cancelled', reason: 'shutdown' });
      return entry.handle;
    }
    this.#admission.push(entry);
    return entry.handle;
  }

  #start(entry: Entry): void {
    const link = new ChildLink(
      {
        started: () => {
          if (entry.handle.status === 'queued') entry.handle.status = 'running';
        },
        event: (event) => entry.onEvent?.(event),
        result: (result) => {
          this.#stats.workerResults++;
          this.#deliver(entry, result);
        },
        ...extraListeners(entry.extras),
      },
      (threadId, message) => this.#uplinks.send(threadId, entry.spec.id, message),
      this.#governor,
    );
    entry.link = link;
    if (entry.budgetSpent !== undefined)
      link.tell({ type: 'budget-spent', which: entry.budgetSpent });
    this.#running.set(entry.spec.id, entry);
    const bridge = entry.makeBridge?.();
    const task: ChildTask = bridge ? { spec: entry.spec, bridge } : { spec: entry.spec };
    const pool = entry.crashes > 0 ? this.#quarantinePool() : this.#piscina;
    pool.run(task, bridge ? { transferList: [bridge] } : {}).then(
      () => this.#finish(entry, undefined),
      (error: unknown) => this.#finish(entry, error),
    );
  }

  /** The child's task ended, with or without a result on its worker's uplink. */
  #finish(entry: Entry, error: unknown): void {
    const link = entry.link;
    // The result is the last thing a child sends: once it is read there is nothing left to read.
    if (entry.handle.status !== 'settled') this.#uplinks.drain();
    // Still unsettled with every message of its worker read: the child's result is missing.
    if (entry.handle.status !== 'settled') {
      if (entry.cancelReason !== undefined) {
        this.#deliverFromMain(entry, { outcome: 'cancelled', reason: entry.cancelReason });
      } else if (this.#closed) {
        this.#deliverFromMain(entry, { outcome: 'cancelled', reason: 'shutdown' });
      } else {
        const why = redactSecrets(
          error instanceof Error ? error.message : 'task ended without a result',
        );
        if (this.#afterCrash(entry, why)) return;
      }
    }
    this.#forensics.forget(link?.threadId, entry.spec.id);
    this.#release(entry);
  }

  /** The child lost its worker: resume it (true), or settle it failed when it may not resume. */
  #afterCrash(entry: Entry, why: string): boolean {
    const threadId = entry.link?.threadId;
    const verdict =
      threadId === undefined
        ? { blamed: false, deliberate: false }
        : this.#forensics.judge(threadId, entry.spec.id, () => this.#witnesses(threadId));
    if (verdict.blamed) entry.crashes++;
    let failure: Failure | undefined;
    if (entry.crashes >= this.#maxCrashes) {
      failure = {
        code: 'worker_crashed',
        message: `worker crashed ${entry.crashes} times while this agent ran a tool; last: ${why}`,
      };
    } else if (entry.resumes >= MAX_RESUMES) {
      failure = {
        code: 'worker_lost',
        message: `lost its worker ${entry.resumes + 1} times; last: ${why}`,
      };
    }
    if (failure) {
      this.#deliverFromMain(entry, { outcome: 'failed', failure });
      return false;
    }
    // A crashed worker loses no agent: resume on a fresh one from the last committed step.
    this.#resume(
      entry,
      verdict.deliberate ? 'worker terminated for a stuck sibling' : `worker crashed: ${why}`,
    );
    return true;
  }

  /** Every child still on `threadId`, with its last messages read. */
  #witnesses(threadId: number): { id: string; openTools: ReadonlySet<string> }[] {
    // Read that worker's uplink first: a child whose `started` is still unread has no thread
    // yet, and filtering before the drain would leave it out; judged later on its own, with
    // nobody in a tool, it would be blamed.
    this.#uplinks.drain(threadId);
    const witnesses: { id: string; openTools: ReadonlySet<string> }[] = [];
    for (const other of this.#running.values()) {
      const link = other.link;
      if (link?.threadId === threadId)
        witnesses.push({ id: other.spec.id, openTools: link.openTools });
    }
    return witnesses;
  }

  #resume(entry: Entry, reason: string): void {
    entry.link?.close();
    delete entry.link;
    entry.resumes++;
    entry.spec = { ...entry.spec, resume: true };
    entry.extras.onResume?.();
    entry.onEvent?.({
      type: 'agent-resume',
      agentId: entry.spec.id,
      attempt: entry.resumes,
      reason,
    });
    this.#start(entry);
  }

  /** A result main makes for a child whose worker could not: queued, cancelled, or crashed. */
  #deliverFromMain(entry: Entry, ending: Ending): void {
    const keep = keepsLog(entry.spec.logs, ending.outcome);
    const made = synthetic(entry, ending);
    const result = keep ? made : withoutLog(made);
    this.#stats.mainResults++;
    // Never guarded here: a second result made on main must show up as a duplicate.
    if (!this.#deliver(entry, result)) return;
    // The worker never wrote this result: record it so the folder is complete, or remove the
    // folder the `logs` policy does not keep. Queued off main's event loop, not awaited (10,000
    // children cancelled at once are 10,000 writes); `finish` never rejects.
    void new AgentLog(entry.spec.logDir).finish(result, keep);
  }

  #deliver(entry: Entry, result: AgentResult): boolean {
    if (!entry.handle.settle(result)) {
      this.#stats.duplicateResults++;
      return false;
    }
    this.#stats.delivered++;
    if (entry.graceTimer) clearTimeout(entry.graceTimer);
    this.onSettle?.(result);
    entry.onEvent?.({ type: 'agent-settle', agentId: result.id, result });
    return true;
  }

  #release(entry: Entry): void {
    if (entry.graceTimer) clearTimeout(entry.graceTimer);
    entry.link?.close();
    this.#running.delete(entry.spec.id);
    this.#admission.done();
  }

  /**
   * Tells a child that a tree budget it belongs to is spent: it takes its last turn. Held for a
   * child still queued, and told again to a resumed one.
   */
  budgetSpent(handle: ChildHandle, which: BudgetKind): void {
    const entry = this.#entries.get(handle);
    if (!entry || entry.handle.status === 'settled' || entry.budgetSpent !== undefined) return;
    entry.budgetSpent = which;
    entry.link?.tell({ type: 'budget-spent', which });
  }

  /** Reads what the child's worker has posted on its uplink and main has not read yet. */
  readUplinkOf(handle: ChildHandle): void {
    const threadId = this.#entries.get(handle)?.link?.threadId;
    if (threadId !== undefined) this.#uplinks.drain(threadId);
  }

  #cancel(entry: Entry, reason: CancelReason): boolean {
    if (entry.handle.status === 'settled') return false;
    if (this.#admission.remove(entry)) {
      this.#deliverFromMain(entry, { outcome: 'cancelled', reason });
      return true;
    }
    if (entry.cancelReason !== undefined) return true;
    entry.cancelReason = reason;
    entry.link?.cancel(reason);
    // Last resort: a child that ignores cooperative cancel (a tool stuck in a synchronous loop)
    // blocks its whole thread. Terminate that worker; its siblings resume elsewhere.
    this.#startGrace(entry, 0);
    return true;
  }

  #startGrace(entry: Entry, rounds: number): void {
    const threadId = entry.link?.threadId;
    // Its answer tells, when the grace is over, whether the worker's event loop still turns.
    if (threadId !== undefined) this.#uplinks.ping(threadId);
    entry.grace = { since: performance.now(), rounds };
    entry.graceTimer = setTimeout(() => this.#graceOver(entry), this.#graceMs);
    entry.graceTimer.unref();
  }

  #graceOver(entry: Entry): void {
    if (entry.handle.status === 'settled') return;
    const threadId = entry.link?.threadId;
    if (threadId === undefined) {
      // Its cancel waits for `started` (a fresh worker still opening its uplink): the grace
      // begins again, so a child that then ignores the cancel is still ended.
      this.#startGrace(entry, entry.grace?.rounds ?? 0);
      return;
    }
    // A worker that answered during the grace is not stuck in a synchronous loop: it is slow,
    // working through a burst (10,000 cancels at once queue their aborts and log writes).
    // Terminating it would resume every sibling; give the child one more grace. Not while
    // the pool closes: every sibling is being cancelled too, none would resume, and waiting
    // would only hold the shutdown up.
    const grace = entry.grace!;
    const answered = this.#uplinks.heardSince(threadId, grace.since);
    // Reading the uplink may have delivered this very child's result.
    if (isSettled(entry)) return;
    if (answered && !this.#closed && grace.rounds + 1 < MAX_GRACE_ROUNDS) {
      this.#startGrace(entry, grace.rounds + 1);
      return;
    }
    this.#terminateWorkerOf(entry, threadId);
  }

  #terminateWorkerOf(entry: Entry, threadId: number): void {
    // Only the stuck child is to blame; its siblings resume elsewhere without a mark.
    this.#uplinks.drain(threadId);
    if (isSettled(entry)) return;
    const witnesses = () => this.#witnesses(threadId);
    if (!this.#forensics.terminating(threadId, entry.spec.id, witnesses)) return;
    void this.#workerByThreadId(threadId)?.terminate();
  }

  #workerByThreadId(threadId: number): Worker | undefined {
    const threads = [...this.#piscina.threads, ...(this.#quarantine?.threads ?? [])];
    return threads.find((worker) => worker.threadId === threadId);
  }

  /** Cancels every child with `reason`, waits for every result, then closes the pool. */
  async close(reason: CancelReason = 'shutdown'): Promise<void> {
    this.#closed = true;
    const entries = [...this.#admission.waiting(), ...this.#running.values()];
    for (const entry of entries) entry.handle.cancel(reason);
    await Promise.all(entries.map((entry) => entry.handle.result));
    await this.#piscina.destroy();
    await this.#quarantine?.destroy();
  }
}

export type { ChildHandle, ChildStatus } from './child-handle.js';
export type { PoolOptions, PoolServices, PoolStats, SpawnExtras } from './pool-entry.js';

/** Read afresh each time: draining an uplink may settle the child in between. */
function isSettled(entry: Entry): boolean {
  return entry.handle.status === 'settled';
}
