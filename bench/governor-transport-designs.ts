/**
 * The three admission designs of the governor-transport bench, and one measured run of any of
 * them in fresh worker threads (`runOnce`). The run models the admission step only, not the
 * governor: one counting semaphore shared by every thread, and `holders` async loops per thread
 * that each acquire → hold the permit for a simulated request → release.
 *
 * - `sab`: the count lives in a SharedArrayBuffer; acquire is a compare-and-swap loop that
 *   sleeps in `Atomics.waitAsync` while the count is 0; release is `Atomics.add` + `notify`.
 * - `broker`: the main thread holds the count and a FIFO queue; each worker asks over its own
 *   MessagePort (`admit` → `admitted`) and returns the permit with `settle` (no reply).
 * - `baseline`: the same loops with no semaphore, so the cost of the loops and of the simulated
 *   request can be subtracted from the other two.
 *
 * This file is also the workers' script: loaded in a worker with its `workerData`, it runs the
 * holders of that worker.
 */
import {
  isMainThread,
  MessageChannel,
  type MessagePort,
  parentPort,
  Worker,
  workerData,
} from 'node:worker_threads';

export const DESIGNS = ['baseline', 'sab', 'broker'] as const;
export type Design = (typeof DESIGNS)[number];

/** Word indexes in the shared counters. FREE sits 64 bytes away from the bookkeeping words so
 * that the check counters do not share a cache line with the semaphore the sab design contends. */
const HELD = 0;
const MAX_HELD = 1;
const WAITS = 2;
const FREE = 16;
const COUNTER_WORDS = 32;

/** Main → worker and worker → main over `parentPort`. */
type Control = { type: 'go' };
type Report = { type: 'ready' } | { type: 'done'; admissions: number; latenciesNs: number[] };
/** Worker → broker and broker → worker over the worker's own MessagePort. */
type ToBroker = { type: 'admit'; id: number } | { type: 'settle'; id: number };
type FromBroker = { type: 'admitted'; id: number };

interface WorkerSetup {
  role: 'governor-transport';
  design: Design;
  counters: SharedArrayBuffer;
  admissions: number;
  holders: number;
  requestMs: number;
  sampleLatency: boolean;
  port: MessagePort | undefined;
}

/** One admission scheme as a worker sees it. */
interface Admission {
  acquire(): Promise<number>;
  release(ticket: number): void;
}

// ---------------------------------------------------------------- worker side

function sabAdmission(words: Int32Array): Admission {
  return {
    async acquire() {
      for (;;) {
        let free = Atomics.load(words, FREE);
        while (free > 0) {
          const seen = Atomics.compareExchange(words, FREE, free, free - 1);
          if (seen === free) return 0;
          free = seen;
        }
        // waitAsync compares and enqueues atomically: a release that lands between the load
        // above and this call makes it answer 'not-equal' at once instead of sleeping through
        // the wake-up. A woken waiter may still lose the permit to a holder that never slept
        // (no FIFO across threads), so it loops and sleeps again.
        const wait = Atomics.waitAsync(words, FREE, 0);
        if (wait.async) {
          Atomics.add(words, WAITS, 1);
          await wait.value;
        }
      }
    },
    release() {
      Atomics.add(words, FREE, 1);
      Atomics.notify(words, FREE, 1);
    },
  };
}

function brokerAdmission(port: MessagePort): Admission {
  const pending = new Map<number, (ticket: number) => void>();
  let nextId = 0;
  port.on('message', (message: FromBroker) => {
    const resolve = pending.get(message.id);
    pending.delete(message.id);
    resolve?.(message.id);
  });
  return {
    acquire() {
      const id = nextId++;
      return new Promise<number>((resolve) => {
        pending.set(id, resolve);
        port.postMessage({ type: 'admit', id } satisfies ToBroker);
      });
    },
    release(id) {
      port.postMessage({ type: 'settle', id } satisfies ToBroker);
    },
  };
}

const baselineAdmission: Admission = {
  acquire: () => Promise.resolve(0),
  release() {},
};

/** Counts the permits held at once on every thread, independently of the semaphore checked. */
function markHeld(words: Int32Array): void {
  const held = Atomics.add(words, HELD, 1) + 1;
  let max = Atomics.load(words, MAX_HELD);
  while (held > max) {
    const seen = Atomics.compareExchange(words, MAX_HELD, max, held);
    if (seen === max) break;
    max = seen;
  }
}

/** One event-loop turn (0), or a timer: the provider request a permit is held for. */
function simulatedRequest(requestMs: number): Promise<void> {
  return new Promise((resolve) =>
    requestMs > 0 ? setTimeout(resolve, requestMs) : setImmediate(resolve),
  );
}

/** The holders of one worker share its quota of admissions; resolves with the latencies seen. */
async function runHolders(setup: WorkerSetup, admission: Admission): Promise<Report> {
  const words = new Int32Array(setup.counters);
  const latenciesNs: number[] = [];
  let remaining = setup.admissions;
  let admissions = 0;
  const warmup = Math.floor(setup.admissions / 10);
  const holder = async (): Promise<void> => {
    while (remaining > 0) {
      remaining--;
      const begin = setup.sampleLatency ? process.hrtime.bigint() : 0n;
      const ticket = await admission.acquire();
      // The first tenth of the samples is JIT warm-up of a fresh thread: left out of the figures.
      if (setup.sampleLatency && admissions >= warmup) {
        latenciesNs.push(Number(process.hrtime.bigint() - begin));
      }
      markHeld(words);
      await simulatedRequest(setup.requestMs);
      Atomics.sub(words, HELD, 1);
      admission.release(ticket);
      admissions++;
    }
  };
  await Promise.all(Array.from({ length: setup.holders }, holder));
  return { type: 'done', admissions, latenciesNs };
}

function runWorker(setup: WorkerSetup): void {
  const port = parentPort!;
  let admission = baselineAdmission;
  if (setup.design === 'sab') admission = sabAdmission(new Int32Array(setup.counters));
  if (setup.design === 'broker') admission = brokerAdmission(setup.port!);
  // A pending Atomics.waitAsync does not keep a thread's event loop alive: were every holder of
  // this worker asleep while the other threads hold the permits, the worker would exit. The
  // listener stays on (a `once` would drop it) so the port keeps the loop alive until the end.
  port.on('message', (message: Control) => {
    if (message.type !== 'go') throw new Error(`Expected a go message, got ${message.type}`);
    void runHolders(setup, admission).then((report) => port.postMessage(report));
  });
  port.postMessage({ type: 'ready' } satisfies Report);
}

// ---------------------------------------------------------------- main side

/** The broker design's main-thread half: the count and a FIFO queue of waiting admits. */
class Broker {
  #free: number;
  #queue: { port: MessagePort; id: number }[] = [];
  #head = 0;
  #ports: MessagePort[] = [];
  /** Admits that had to queue. */
  queued = 0;

  constructor(capacity: number) {
    this.#free = capacity;
  }

  get free(): number {
    return this.#free;
  }

  get waiting(): number {
    return this.#queue.length - this.#head;
  }

  attach(port: MessagePort): void {
    this.#ports.push(port);
    port.on('message', (message: ToBroker) => {
      if (message.type === 'admit') this.#admit(port, message.id);
      else this.#settle();
    });
  }

  close(): void {
    for (const port of this.#ports) port.close();
  }

  #admit(port: MessagePort, id: number): void {
    if (this.#free > 0 && this.waiting === 0) {
      this.#free--;
      port.postMessage({ type: 'admitted', id } satisfies FromBroker);
      return;
    }
    this.queued++;
    this.#queue.push({ port, id });
  }

  #settle(): void {
    this.#free++;
    while (this.#free > 0 && this.waiting > 0) {
      const next = this.#queue[this.#head++]!;
      this.#free--;
      next.port.postMessage({ type: 'admitted', id: next.id } satisfies FromBroker);
    }
    // Drop the consumed head now and then so the array does not grow for the whole run.
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
  }
}

/** What one run asks of its workers. */
export interface RunConfig {
  threads: number;
  admissions: number;
  holders: number;
  capacity: number;
  /** How long a holder holds its permit: 0 for one event-loop turn, else a timer of that many ms. */
  requestMs: number;
  sampleLatency: boolean;
}

/** One run of one design, in fresh workers. */
export interface RunResult {
  design: Design;
  admissions: number;
  wallMs: number;
  /** Whole-process CPU (main and every worker) from `go` to the last `done`. */
  cpuMs: number;
  admissionsPerSecond: number;
  cpuUsPerAdmission: number;
  /** Most permits held at once across every thread. */
  maxHeld: number;
  /** sab: sleeps in waitAsync; broker: admits that queued; baseline: 0. */
  waits: number;
  /** Permits free after the run (baseline: the capacity, untouched). */
  freeAtEnd: number;
  latenciesNs: number[];
}

/** Resolves with a worker's next message; rejects if it fails or exits first. */
function nextReport(worker: Worker): Promise<Report> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => finish(() => reject(error));
    const onExit = (code: number) =>
      finish(() => reject(new Error(`Expected a report from the worker, got exit code ${code}`)));
    const onMessage = (report: Report) => finish(() => resolve(report));
    const finish = (settle: () => void) => {
      worker.off('error', onError).off('exit', onExit).off('message', onMessage);
      settle();
    };
    worker.on('error', onError).on('exit', onExit).on('message', onMessage);
  });
}

function startWorkers(
  design: Design,
  config: RunConfig,
  counters: SharedArrayBuffer,
  broker?: Broker,
): Worker[] {
  const script = new URL(import.meta.url);
  return Array.from({ length: config.threads }, (_, index) => {
    const share = Math.floor(config.admissions / config.threads);
    const admissions = share + (index < config.admissions % config.threads ? 1 : 0);
    const channel = broker ? new MessageChannel() : undefined;
    if (broker && channel) broker.attach(channel.port1);
    const setup: WorkerSetup = {
      role: 'governor-transport',
      design,
      counters,
      admissions,
      holders: config.holders,
      requestMs: config.requestMs,
      sampleLatency: config.sampleLatency,
      port: channel?.port2,
    };
    return new Worker(script, { workerData: setup, transferList: channel ? [channel.port2] : [] });
  });
}

/**
 * Runs one design in `config.threads` fresh workers and measures it from the start signal to the
 * last worker's report, after every worker has loaded, so start-up is not counted.
 */
export async function runOnce(design: Design, config: RunConfig): Promise<RunResult> {
  const counters = new SharedArrayBuffer(COUNTER_WORDS * 4);
  const words = new Int32Array(counters);
  words[FREE] = config.capacity;
  const broker = design === 'broker' ? new Broker(config.capacity) : undefined;
  const workers = startWorkers(design, config, counters, broker);
  try {
    await Promise.all(workers.map(nextReport));
    const done = workers.map(nextReport);
    const cpuBefore = process.cpuUsage();
    const begin = performance.now();
    for (const worker of workers) worker.postMessage({ type: 'go' } satisfies Control);
    const reports = await Promise.all(done);
    const wallMs = performance.now() - begin;
    const cpu = process.cpuUsage(cpuBefore);
    let admissions = 0;
    const latenciesNs: number[] = [];
    for (const report of reports) {
      if (report.type !== 'done') throw new Error(`Expected a done report, got ${report.type}`);
      admissions += report.admissions;
      latenciesNs.push(...report.latenciesNs);
    }
    const cpuMs = (cpu.user + cpu.system) / 1000;
    return {
      design,
      admissions,
      wallMs,
      cpuMs,
      admissionsPerSecond: admissions / (wallMs / 1000),
      cpuUsPerAdmission: (cpuMs * 1000) / admissions,
      maxHeld: Atomics.load(words, MAX_HELD),
      waits: broker ? broker.queued : Atomics.load(words, WAITS),
      freeAtEnd: broker ? broker.free : Atomics.load(words, FREE),
      latenciesNs,
    };
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate()));
    broker?.close();
  }
}

if (!isMainThread && (workerData as WorkerSetup | undefined)?.role === 'governor-transport') {
  runWorker(workerData as WorkerSetup);
}
