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
  /** Per-worker V8 heap limit, in MB. */
  maxOldGenerationSizeMb?: number;
}

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
  /** Why this child's worker was terminated under it, when a sibling was stuck. */
  terminationNote?: string;
  onEvent: ((event: AgentEvent) => void) | undefined;
  bridge: MessagePort | undefined;
  onCancel: ((reason: CancelReason) => void) | undefined;
}

/** What a spawn may carry beside the spec. */
export interface SpawnExtras {
  onEvent?: ((event: AgentEvent) => void) | undefined;
  /** The worker end of the child's host bridge; transferred with the task. */
  bridge?: MessagePort | undefined;
  /** Called once when the child is cancelled (before its result). */
  onCancel?: ((reason: CancelReason) => void) | undefined;
}

/** The compiled worker file; under vitest (TS sources) it is the build in dist/. */
export function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    const built = path.resolve(path.dirname(here), '../../dist/src/worker/child-task.js');
    if (!existsSync(built)) throw new Error(`worker build missing at ${built}: run npm run build`);
    return built;
  }
  return path.resolve(path.dirname(here), '../worker/child-task.js');
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
  readonly #capacity: number;
  readonly #graceMs: number;
  readonly #queue: Entry[] = [];
  readonly #running = new Map<string, Entry>();
  #closed = false;
  /** Called with every settled result; the engine uses it for stats. */
  onSettle: ((result: AgentResult) => void) | undefined;

  constructor(options: PoolOptions = {}) {
    const threads = options.threads ?? Math.max(1, os.availableParallelism());
    const perThread = options.agentsPerThread ?? DEFAULT_AGENTS_PER_THREAD;
    this.#capacity = threads * perThread;
    this.#graceMs = options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
    this.#piscina = new Piscina<ChildTask, 'settled'>({
      filename: workerFile(),
      minThreads: threads,
      maxThreads: threads,
      concurrentTasksPerWorker: perThread,
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
    this.#piscina.on('error', () => {});
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
      bridge: extras.bridge,
      onCancel: extras.onCancel,
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
    const bridge = entry.bridge;
    const task: ChildTask = bridge
      ? { spec: entry.spec, port: port2, bridge }
      : { spec: entry.spec, port: port2 };
    this.#piscina.run(task, { transferList: bridge ? [port2, bridge] : [port2] }).then(
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
      case 'event':
        entry.onEvent?.(message.event);
        return;
      case 'result':
        this.#deliver(entry, message.result);
        return;
    }
  }

  /**
   * The task ended. Messages on the child's port and piscina's reply travel on different channels,
   * so the result may still sit on the port: drain it synchronously before deciding it is lost.
   */
  #finish(entry: Entry, error: unknown): void {
    const port = entry.port;
    if (port) {
      for (let next = receiveMessageOnPort(port); next; next = receiveMessageOnPort(port)) {
        this.#onMessage(entry, next.message);
      }
    }
    if (entry.handle.status !== 'settled') {
      const why = error instanceof Error ? error.message : 'task ended without a result';
      const result =
        entry.cancelReason !== undefined
          ? synthetic(entry, 'cancelled', entry.cancelReason)
          : synthetic(entry, 'failed', entry.terminationNote ?? `worker: ${redactSecrets(why)}`);
      this.#deliver(entry, result);
      // The worker never wrote this result; record it so the log folder is complete.
      void new AgentLog(entry.spec.logDir).writeResult(result).catch(() => {});
    }
    this.#release(entry);
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
    if (entry.handle.status === 'settled') return;
    const worker = this.#workerByThreadId(entry.threadId);
    const stuck = entry.spec.id;
    for (const sibling of this.#running.values()) {
      if (sibling !== entry && sibling.threadId === entry.threadId) {
        sibling.terminationNote = `worker: terminated because agent ${stuck} on the same thread ignored its cancel`;
      }
    }
    void worker?.terminate();
  }

  #workerByThreadId(threadId: number | undefined): Worker | undefined {
    if (threadId === undefined) return undefined;
    return this.#piscina.threads.find((worker) => worker.threadId === threadId);
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
  }
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
