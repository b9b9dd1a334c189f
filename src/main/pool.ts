import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  MessageChannel,
  type MessagePort,
  receiveMessageOnPort,
  type Worker,
} from 'node:worker_threads';
import { Piscina } from 'piscina';
import { AgentLog } from '../shared/agent-log.js';
import type { ChildSpec } from '../shared/child-spec.js';
import type { AgentEvent } from '../shared/events.js';
import { type ChildTask, isWorkerMessage, type MainMessage } from '../shared/protocol.js';
import { redactSecrets } from '../shared/redact.js';
import { type AgentResult, type CancelReason, emptyUsage } from '../shared/result.js';

export interface PoolOptions {
  /** Worker threads; default: the machine's available parallelism. */
  threads?: number;
  /** Children one thread runs at once (piscina's concurrentTasksPerWorker). */
  agentsPerThread?: number;
  /** How long a cancelled child may ignore its cancel before its worker is terminated, in ms. */
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

export const DEFAULT_MAX_CRASHES = 3;
/**
 * Resumes of one child for any reason: a backstop. Innocent children are not blamed, and the
 * blamed ones resume in quarantine, so only a pathological crash loop reaches it.
 */
const MAX_RESUMES = 100;

export const DEFAULT_AGENTS_PER_THREAD = 2048;
export const DEFAULT_CANCEL_GRACE_MS = 5000;

export type ChildStatus = 'queued' | 'running' | 'settled';

/** A spawned child as main sees it. */
export interface ChildHandle {
  readonly id: string;
  readonly title: string;
  readonly status: ChildStatus;
  /** When it was spawned (performance.now()). */
  readonly spawnedAt: number;
  /** Settles exactly once, never rejects. */
  readonly result: Promise<AgentResult>;
  /** Cancels it; false when it had settled already. */
  cancel(reason?: CancelReason): boolean;
}

interface Entry {
  spec: ChildSpec;
  handle: PoolHandle;
  port?: MessagePort;
  threadId?: number;
  graceTimer?: NodeJS.Timeout;
  cancelReason?: CancelReason;
  onEvent: ((event: AgentEvent) => void) | undefined;
  makeBridge: (() => MessagePort) | undefined;
  onCancel: ((reason: CancelReason) => void) | undefined;
  /** Tool calls started and not yet answered: a crash meanwhile is blamed on this child. */
  openTools: Set<string>;
  /** Crashes this child was blamed for. */
  crashes: number;
  /** Times it was resumed on a fresh worker. */
  resumes: number;
}

/** What main learned when a worker died, shared by every child that was on it. */
interface CrashRecord {
  /** Children blamed for it. */
  suspects: Set<string>;
  /** Whether the death was our doing (a stuck child past its cancel grace). */
  deliberate: boolean;
}

/** What a spawn may carry beside the spec. */
export interface SpawnExtras {
  onEvent?: ((event: AgentEvent) => void) | undefined;
  /** Makes the worker end of a fresh host bridge; called at each start (and resume). */
  makeBridge?: (() => MessagePort) | undefined;
  /** Called once when the child is cancelled (before its result). */
  onCancel?: ((reason: CancelReason) => void) | undefined;
}

/** The compiled worker file; under vitest (TS sources) it is the build in dist/. */
export function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    const built = path.resolve(path.dirname(here), '../../dist/src/worker/entry.cjs');
    if (!existsSync(built)) throw new Error(`worker build missing at ${built}: run npm run build`);
    return built;
  }
  return path.resolve(path.dirname(here), '../worker/entry.cjs');
}

class PoolHandle implements ChildHandle {
  readonly id: string;
  readonly title: string;
  readonly spawnedAt = performance.now();
  readonly result: Promise<AgentResult>;
  status: ChildStatus = 'queued';
  #resolve!: (result: AgentResult) => void;
  readonly #cancel: (handle: PoolHandle, reason: CancelReason) => boolean;

  constructor(spec: ChildSpec, cancel: (handle: PoolHandle, reason: CancelReason) => boolean) {
    this.id = spec.id;
    this.title = spec.title;
    this.#cancel = cancel;
    this.result = new Promise((resolve) => {
      this.#resolve = resolve;
    });
  }

  cancel(reason: CancelReason = 'user'): boolean {
    return this.#cancel(this, reason);
  }

  /** The one place a child's result is delivered; a second call is ignored. */
  settle(result: AgentResult): boolean {
    if (this.status === 'settled') return false;
    this.status = 'settled';
    this.#resolve(result);
    return true;
  }
}

/**
 * Runs children on a piscina pool, many to a thread. Admission is ours: at most
 * threads × agentsPerThread children are handed to piscina, the rest wait here as `queued`, so a
 * queued child can be cancelled without touching a worker. Piscina's `signal` is never used: it
 * would terminate a whole worker and every sibling on it.
 */
export class ChildPool {
  readonly #piscina: Piscina<ChildTask, 'settled'>;
  #quarantine: Piscina<ChildTask, 'settled'> | undefined;
  readonly #options: PoolOptions;
  readonly #capacity: number;
  readonly #graceMs: number;
  readonly #queue: Entry[] = [];
  readonly #running = new Map<string, Entry>();
  readonly #crashes = new Map<number, CrashRecord>();
  readonly #maxCrashes: number;
  #closed = false;
  /** Called with every settled result; the engine uses it for stats. */
  onSettle: ((result: AgentResult) => void) | undefined;

  constructor(options: PoolOptions = {}) {
    const threads = options.threads ?? Math.max(1, os.availableParallelism());
    const perThread = options.agentsPerThread ?? DEFAULT_AGENTS_PER_THREAD;
    this.#capacity = threads * perThread;
    this.#graceMs = options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
    this.#maxCrashes = options.maxCrashes ?? DEFAULT_MAX_CRASHES;
    this.#piscina = makePiscina(options, { threads, perThread, minThreads: threads });
    this.#options = options;
  }

  /**
   * A child blamed for a crash resumes in quarantine: a separate one-thread pool made on first
   * need, so that if it crashes again it takes down only other suspects, not the thousands of
   * innocent children of the main pool.
   */
  #quarantinePool(): Piscina<ChildTask, 'settled'> {
    this.#quarantine ??= makePiscina(this.#options, { threads: 1, perThread: 256, minThreads: 0 });
    return this.#quarantine;
  }

  get threads(): number {
    return this.#piscina.threads.length;
  }

  get liveCount(): number {
    return this.#running.size + this.#queue.length;
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
      onCancel: extras.onCancel,
      openTools: new Set(),
      crashes: 0,
      resumes: 0,
      handle: new PoolHandle(spec, (handle, reason) => this.#cancelChild(handle, reason)),
    };
    if (this.#closed) {
      entry.handle.settle(synthetic(entry, 'cancelled', 'shutdown'));
      return entry.handle;
    }
    this.#queue.push(entry);
    this.#admit();
    return entry.handle;
  }

  #admit(): void {
    while (this.#queue.length > 0 && this.#running.size < this.#capacity) {
      const entry = this.#queue.shift()!;
      this.#start(entry);
    }
  }

  #start(entry: Entry): void {
    const { port1, port2 } = new MessageChannel();
    entry.port = port1;
    this.#running.set(entry.spec.id, entry);
    port1.on('message', (message: unknown) => this.#onMessage(entry, message));
    const bridge = entry.makeBridge?.();
    const task: ChildTask = bridge
      ? { spec: entry.spec, port: port2, bridge }
      : { spec: entry.spec, port: port2 };
    const pool = entry.crashes > 0 ? this.#quarantinePool() : this.#piscina;
    pool.run(task, { transferList: bridge ? [port2, bridge] : [port2] }).then(
      () => this.#finish(entry, undefined),
      (error: unknown) => this.#finish(entry, error),
    );
  }

  #onMessage(entry: Entry, message: unknown): void {
    if (!isWorkerMessage(message)) return;
    switch (message.type) {
      case 'started':
        entry.threadId = message.threadId;
        if (entry.handle.status === 'queued') entry.handle.status = 'running';
        return;
      case 'event': {
        const event = message.event;
        if (event.type === 'tool-call') entry.openTools.add(event.callId);
        else if (event.type === 'tool-result') entry.openTools.delete(event.callId);
        else if (event.type === 'step-end') entry.openTools.clear();
        entry.onEvent?.(event);
        return;
      }
      case 'result':
        this.#deliver(entry, message.result);
        return;
    }
  }

  /**
   * The task ended. Messages on the child's port and piscina's reply travel on different channels,
   * so the result may still sit on the port: drain it synchronously before deciding it is lost.
   */
  /** Handles every message already on a child's port, synchronously. */
  #drain(entry: Entry): void {
    const port = entry.port;
    if (!port) return;
    for (let next = receiveMessageOnPort(port); next; next = receiveMessageOnPort(port)) {
      this.#onMessage(entry, next.message);
    }
  }

  #finish(entry: Entry, error: unknown): void {
    this.#drain(entry);
    if (entry.handle.status !== 'settled') {
      if (entry.cancelReason !== undefined) {
        this.#deliverSynthetic(entry, synthetic(entry, 'cancelled', entry.cancelReason));
      } else {
        const why = redactSecrets(
          error instanceof Error ? error.message : 'task ended without a result',
        );
        const verdict = this.#judgeCrash(entry);
        if (verdict.blamed) entry.crashes++;
        if (entry.crashes >= this.#maxCrashes) {
          this.#deliverSynthetic(
            entry,
            synthetic(
              entry,
              'failed',
              `worker: crashed ${entry.crashes} times while this agent ran a tool; last: ${why}`,
            ),
          );
        } else if (entry.resumes >= MAX_RESUMES) {
          this.#deliverSynthetic(
            entry,
            synthetic(
              entry,
              'failed',
              `worker: lost its worker ${entry.resumes + 1} times; last: ${why}`,
            ),
          );
        } else if (!this.#closed) {
          // A crashed worker loses no agent: resume on a fresh one from the last committed step.
          this.#resume(
            entry,
            verdict.deliberate ? `worker terminated for a stuck sibling` : `worker crashed: ${why}`,
          );
          return;
        } else {
          this.#deliverSynthetic(entry, synthetic(entry, 'cancelled', 'shutdown'));
        }
      }
    }
    this.#release(entry);
  }

  /** Decides, once per dead worker, which of its children were running a tool: the suspects. */
  #judgeCrash(entry: Entry): { blamed: boolean; deliberate: boolean } {
    const threadId = entry.threadId;
    if (threadId === undefined) return { blamed: false, deliberate: false };
    let record = this.#crashes.get(threadId);
    if (!record) {
      const onThread = [...this.#running.values()].filter((other) => other.threadId === threadId);
      // Their last events (a tool call, say) may still sit on their ports: read them first.
      for (const other of onThread) this.#drain(other);
      const suspects = onThread.filter((other) => other.openTools.size > 0);
      // Nobody was in a tool: the crash cannot be attributed, so everyone on the thread counts it.
      record = {
        suspects: new Set(
          (suspects.length > 0 ? suspects : onThread).map((other) => other.spec.id),
        ),
        deliberate: false,
      };
      this.#crashes.set(threadId, record);
    }
    return { blamed: record.suspects.has(entry.spec.id), deliberate: record.deliberate };
  }

  #resume(entry: Entry, reason: string): void {
    entry.port?.close();
    delete entry.port;
    delete entry.threadId;
    entry.openTools.clear();
    entry.resumes++;
    entry.spec = { ...entry.spec, resume: true };
    entry.onEvent?.({
      type: 'agent-resume',
      agentId: entry.spec.id,
      attempt: entry.resumes,
      reason,
    });
    this.#start(entry);
  }

  #deliverSynthetic(entry: Entry, result: AgentResult): void {
    this.#deliver(entry, result);
    // The worker never wrote this result; record it so the log folder is complete.
    try {
      new AgentLog(entry.spec.logDir).writeResult(result);
    } catch {
      // The result is delivered all the same; a log that cannot be written must not lose it.
    }
  }

  #deliver(entry: Entry, result: AgentResult): void {
    if (!entry.handle.settle(result)) return;
    if (entry.graceTimer) clearTimeout(entry.graceTimer);
    this.onSettle?.(result);
    entry.onEvent?.({ type: 'agent-settle', agentId: result.id, result });
  }

  #release(entry: Entry): void {
    if (entry.graceTimer) clearTimeout(entry.graceTimer);
    entry.port?.close();
    this.#running.delete(entry.spec.id);
    this.#admit();
  }

  #cancelChild(handle: PoolHandle, reason: CancelReason): boolean {
    if (handle.status === 'settled') return false;
    const known =
      this.#queue.find((entry) => entry.handle === handle) ?? this.#running.get(handle.id);
    if (known?.cancelReason === undefined) known?.onCancel?.(reason);
    const queued = this.#queue.findIndex((entry) => entry.handle === handle);
    if (queued >= 0) {
      const [entry] = this.#queue.splice(queued, 1);
      this.#deliver(entry!, synthetic(entry!, 'cancelled', reason));
      return true;
    }
    const entry = this.#running.get(handle.id);
    if (!entry || entry.cancelReason !== undefined) return entry !== undefined;
    entry.cancelReason = reason;
    entry.port?.postMessage({ type: 'cancel', reason } satisfies MainMessage);
    // Last resort: a child that ignores cooperative cancel (a tool stuck in a synchronous loop)
    // blocks its whole thread. Terminate that worker; its siblings each still settle once.
    entry.graceTimer = setTimeout(() => this.#terminateWorkerOf(entry), this.#graceMs);
    entry.graceTimer.unref();
    return true;
  }

  #terminateWorkerOf(entry: Entry): void {
    if (entry.handle.status === 'settled' || entry.threadId === undefined) return;
    const record = this.#crashes.get(entry.threadId);
    if (record) {
      // Its worker is already being terminated for another stuck child: share the blame.
      record.suspects.add(entry.spec.id);
      return;
    }
    // Only the stuck child is to blame; its siblings resume elsewhere without a mark.
    this.#crashes.set(entry.threadId, { suspects: new Set([entry.spec.id]), deliberate: true });
    void this.#workerByThreadId(entry.threadId)?.terminate();
  }

  #workerByThreadId(threadId: number | undefined): Worker | undefined {
    if (threadId === undefined) return undefined;
    const threads = [...this.#piscina.threads, ...(this.#quarantine?.threads ?? [])];
    return threads.find((worker) => worker.threadId === threadId);
  }

  /** Cancels every child with `reason`, waits for every result, then closes the pool. */
  async close(reason: CancelReason = 'shutdown'): Promise<void> {
    this.#closed = true;
    const pending: Promise<AgentResult>[] = [];
    for (const entry of [...this.#queue, ...this.#running.values()]) {
      pending.push(entry.handle.result);
      entry.handle.cancel(reason);
    }
    await Promise.all(pending);
    await this.#piscina.destroy();
    await this.#quarantine?.destroy();
  }
}

function makePiscina(
  options: PoolOptions,
  shape: { threads: number; perThread: number; minThreads: number },
): Piscina<ChildTask, 'settled'> {
  const piscina = new Piscina<ChildTask, 'settled'>({
    filename: workerFile(),
    minThreads: shape.minThreads,
    maxThreads: shape.threads,
    concurrentTasksPerWorker: shape.perThread,
    // Blocking idle workers in Atomics.wait starves the timers and port messages of async tasks.
    atomics: 'disabled',
    idleTimeout: options.idleTimeoutMs ?? 60_000,
    maxQueue: Number.POSITIVE_INFINITY,
    ...(options.maxOldGenerationSizeMb === undefined
      ? {}
      : { resourceLimits: { maxOldGenerationSizeMb: options.maxOldGenerationSizeMb } }),
  });
  // Without a listener an 'error' event would crash the process; task failures arrive through
  // each task's own promise, so here they are only noted.
  piscina.on('error', () => {});
  return piscina;
}

/** A result main makes for a child whose worker could not: queued, or its thread died. */
function synthetic(entry: Entry, outcome: 'cancelled' | 'failed', reason: string): AgentResult {
  const spec = entry.spec;
  return {
    id: spec.id,
    title: spec.title,
    outcome,
    text: '',
    reason,
    logDir: spec.logDir,
    truncated: false,
    elapsedMs: Math.round(performance.now() - entry.handle.spawnedAt),
    generation: spec.generation,
    usage: emptyUsage(),
  };
}
