/**
 * A batch on a queue watches whether any worker takes its jobs. With no `cohort worker` running
 * (or one on another queue name), jobs wait in Redis and nothing else would ever say so: the
 * batch says it on stderr, with the command that starts a worker, and its progress shows the
 * wait instead of `starting`.
 */
import { describeRedis } from '../main/runners/queue/connection.js';
import { QueueInspector } from '../main/runners/queue/inspector.js';
import { DEFAULT_QUEUE_NAME, type QueueOptions } from '../main/runners/queue/options.js';
import { formatDuration } from '../shared/duration.js';
import { safeLabel, shellQuote } from './output.js';
import type { BatchProgress, BatchTally } from './views/batch-progress.js';

/** How long jobs may wait with no worker taking any before the batch says so. */
export const NO_WORKER_AFTER_MS = 10_000;
/** How often the queue's counts are read. */
const POLL_MS = 1000;
/** How long the watch waits for its own connection at start before it does without. */
const OPEN_TIMEOUT_MS = 10_000;
/** What the progress shows while jobs wait and no worker takes them. */
export const WAITING_FOR_A_WORKER = 'waiting for a worker';

/** One reading of the queue, with what the batch has seen settle. */
export interface QueueReading {
  /** Jobs waiting in the queue for a worker. */
  waiting: number;
  /** Jobs a worker is running now. */
  active: number;
  /** The batch's settled tasks so far. */
  settled: number;
}

/**
 * Whether the queue is stalled: jobs have waited `afterMs` with none taken. A sign of a worker at
 * work resets the wait: a job running, a result arriving, or nothing left waiting. A running job
 * means a worker is alive and busy, even when its slots are full and others wait behind it. Each
 * stall is told once; one that comes back after workers came and went is told again.
 */
export class WorkerStall {
  readonly afterMs: number;
  #quietSince: number;
  #settled = 0;
  #stalled = false;

  constructor(options: { afterMs: number; start: number }) {
    this.afterMs = options.afterMs;
    this.#quietSince = options.start;
  }

  get stalled(): boolean {
    return this.#stalled;
  }

  /** One reading at `now`: `stalled` when a stall begins, `resumed` when a told one ends. */
  observe(now: number, reading: QueueReading): 'stalled' | 'resumed' | undefined {
    const working =
      reading.active > 0 || reading.settled !== this.#settled || reading.waiting === 0;
    this.#settled = reading.settled;
    if (working) {
      this.#quietSince = now;
      if (!this.#stalled) return undefined;
      this.#stalled = false;
      return 'resumed';
    }
    if (this.#stalled || now - this.#quietSince < this.afterMs) return undefined;
    this.#stalled = true;
    return 'stalled';
  }
}

/**
 * The command that starts a worker on this queue, as it can be pasted: the URL as the batch was
 * given it, but with its password hidden (it is never printed), so it is said to be put back.
 */
export function workerCommand(queue: { url: string; name?: string | undefined }): string {
  const shown = describeRedis(queue.url);
  const name =
    queue.name === undefined || queue.name === DEFAULT_QUEUE_NAME
      ? ''
      : ` --queue-name ${shellQuote(queue.name)}`;
  const hidden = shown === queue.url ? '' : ' (with the password where *** stands)';
  return `cohort worker --queue ${shellQuote(shown)}${name}${hidden}`;
}

/**
 * `no worker has taken a job for 10s (12 waiting in queue cohort at redis://…); start one with:
 * cohort worker --queue redis://…`. When workers are connected to the queue but take nothing (a
 * rate limit, a paused queue), it says so and points at `cohort queue status`.
 */
export function noWorkerMessage(options: {
  queue: { url: string; name?: string | undefined };
  waiting: number;
  afterMs: number;
  /** Workers connected to the queue; undefined when Redis would not list them. */
  connected: number | undefined;
}): string {
  const { queue } = options;
  const where = `${options.waiting} waiting in queue ${safeLabel(queue.name ?? DEFAULT_QUEUE_NAME)} at ${safeLabel(describeRedis(queue.url))}`;
  const head = `cohort batch: no worker has taken a job for ${formatDuration(options.afterMs)} (${where})`;
  if (options.connected !== undefined && options.connected > 0) {
    const status = workerCommand(queue).replace(/^cohort worker/, 'cohort queue status');
    return `${head}, though ${options.connected} worker(s) are connected to it; see ${safeLabel(status)}`;
  }
  return `${head}; start one with: ${safeLabel(workerCommand(queue))}`;
}

/**
 * Watches the batch's queue until the returned function is called (once or more): every second
 * it reads the queue's counts and tells `progress` when a stall begins or ends. It has a connection of its
 * own, and only reads. Should that connection fail to open, the batch runs unwatched.
 */
export function watchQueue(options: {
  queue: QueueOptions;
  progress: BatchProgress;
  tally: BatchTally;
  afterMs?: number;
}): () => Promise<void> {
  const { queue, progress, tally } = options;
  const stall = new WorkerStall({
    afterMs: options.afterMs ?? NO_WORKER_AFTER_MS,
    start: Date.now(),
  });
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const opening = QueueInspector.open({
    url: queue.url,
    name: queue.name,
    prefix: queue.prefix,
    timeoutMs: OPEN_TIMEOUT_MS,
  }).catch(() => undefined);
  const poll = async (inspector: QueueInspector): Promise<void> => {
    try {
      const counts = await inspector.counts();
      if (stopped) return;
      const reading = { waiting: counts.waiting, active: counts.active, settled: tally.settled };
      const change = stall.observe(Date.now(), reading);
      if (change === 'stalled') {
        const connected = await inspector
          .connectedWorkers()
          .then((workers) => workers.size)
          .catch(() => undefined);
        if (stopped) return;
        progress.note(
          noWorkerMessage({ queue, waiting: counts.waiting, afterMs: stall.afterMs, connected }),
        );
        progress.waitingFor(WAITING_FOR_A_WORKER);
      } else if (change === 'resumed') progress.waitingFor(undefined);
    } catch {
      // Redis away for a moment: the engine says what matters; the next reading goes on.
    }
    if (!stopped) {
      timer = setTimeout(() => void poll(inspector), POLL_MS);
      timer.unref();
    }
  };
  void opening.then((inspector) => {
    if (inspector && !stopped) void poll(inspector);
  });
  let closing: Promise<void> | undefined;
  return () => {
    stopped = true;
    clearTimeout(timer);
    closing ??= opening.then((inspector) => inspector?.close());
    return closing;
  };
}
