/**
 * `node dist/bench/messaging-designs.js [--children N] [--events E] [--threads T] [--runs R]`
 * (`npm run bench:messaging`): a micro-benchmark of how a child's messages could travel between
 * a worker thread and main (issue 11, item 4), measured as CPU of the whole process per child
 * and per message. Figures: docs/BENCHMARKS.md, "Messaging and spawn".
 *
 * Each run starts fresh worker threads and a task port per worker, as piscina does, then plays
 * two regimes with the same children:
 * - parked: N children start (`started` + one `step-start` event each), stay parked, then are all
 *   cancelled and answer with their result. Spawn and cancel CPU are taken apart.
 * - events: N children each post E events a few milliseconds apart, then their result.
 *
 * The designs:
 * - `per-child`: today's: a `MessageChannel` per child, its worker end transferred with the task,
 *   one `postMessage` per message, cancel on the child's port.
 * - `per-child-batched`: the same ports, a child's messages queued and posted once per tick.
 * - `shared`: one port per worker for every child, messages tagged with the child id, one
 *   `postMessage` per message; cancels go down the same port.
 * - `shared-batched`: the shared port, every child's messages of a tick posted as one array; main
 *   sends the cancels of one tick as one array too.
 *
 * This file is also the workers' script: loaded in a worker with its `workerData`, it runs the
 * children that worker is given.
 */
import {
  isMainThread,
  MessageChannel,
  type MessagePort,
  parentPort,
  threadId,
  Worker,
  workerData,
} from 'node:worker_threads';
import { intFlag, parseCommand } from '../src/cli/flags.js';
import { isEntryScript } from '../src/testing/entry-script.js';
import { median } from './stats.js';
import { formatGrid, formatValue } from './table.js';

export const DESIGNS = ['per-child', 'per-child-batched', 'shared', 'shared-batched'] as const;
export type Design = (typeof DESIGNS)[number];

type Regime = 'parked' | 'events';
/** A child's message as the engine sends it; `id` only on the shared designs. */
type Up = { id?: string; type: string; [key: string]: unknown };
type Down = { id?: string; type: 'cancel'; reason: string };
interface Task {
  spec: Record<string, unknown>;
  port?: MessagePort;
}
interface Setup {
  role: 'messaging-designs';
  design: Design;
  regime: Regime;
  events: number;
  tasks: MessagePort;
  uplink: MessagePort | undefined;
}

const shared = (design: Design): boolean => design.startsWith('shared');
const batched = (design: Design): boolean => design.endsWith('batched');

/** Queues messages and posts them as one array per tick (setImmediate), or each at once. */
class Outbox {
  readonly #port: MessagePort;
  readonly #batch: boolean;
  #queue: unknown[] = [];

  constructor(port: MessagePort, batch: boolean) {
    this.#port = port;
    this.#batch = batch;
  }

  send(message: unknown): void {
    if (!this.#batch) {
      this.#port.postMessage(message);
      return;
    }
    if (this.#queue.length === 0) setImmediate(() => this.flush());
    this.#queue.push(message);
  }

  flush(): void {
    if (this.#queue.length === 0) return;
    const queue = this.#queue;
    this.#queue = [];
    this.#port.postMessage(queue);
  }
}

/** Calls `handle` for every message of a post: one message, or an array of them. */
function unpack<T>(data: T | T[], handle: (message: T) => void): void {
  if (Array.isArray(data)) for (const message of data) handle(message);
  else handle(data);
}

// ── The worker's side ─────────────────────────────────────────────────────────────────────────

function runWorker(setup: Setup): void {
  const cancels = new Map<string, () => void>();
  const uplink = setup.uplink ? new Outbox(setup.uplink, batched(setup.design)) : undefined;
  setup.uplink?.on('message', (data: Down | Down[]) =>
    unpack(data, (message) => cancels.get(message.id!)?.()),
  );
  setup.tasks.on('message', (message: { taskId: number; task: Task }) => {
    void runChild(setup, message.task, uplink, cancels).then(() =>
      setup.tasks.postMessage({ taskId: message.taskId, result: 'settled' }),
    );
  });
  parentPort!.postMessage('ready');
}

async function runChild(
  setup: Setup,
  task: Task,
  uplink: Outbox | undefined,
  cancels: Map<string, () => void>,
): Promise<void> {
  const id = task.spec.id as string;
  const own = task.port ? new Outbox(task.port, batched(setup.design)) : undefined;
  const send = own
    ? (message: Up) => own.send(message)
    : (message: Up) => uplink!.send({ id, ...message });
  const cancelled = new Promise<void>((resolve) => {
    if (task.port) task.port.on('message', () => resolve());
    else cancels.set(id, resolve);
  });
  send({ type: 'started', threadId });
  if (setup.regime === 'parked') {
    send({ type: 'event', event: { type: 'step-start', agentId: id, step: 1 } });
    await cancelled;
  } else {
    for (let step = 1; step <= setup.events; step++) {
      await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 4)));
      send({ type: 'event', event: { type: 'text-delta', agentId: id, step, text: 'hello ' } });
    }
  }
  send({ type: 'result', result: { id, outcome: 'complete', text: 'x', usage: {} } });
  // The engine posts a result at once, before the task ends: forensics reads it from the port.
  own?.flush();
  uplink?.flush();
  cancels.delete(id);
  task.port?.close();
}

// ── Main's side ───────────────────────────────────────────────────────────────────────────────

export interface RunResult {
  design: Design;
  regime: Regime;
  children: number;
  /** Messages the workers sent (started, events, results). */
  messages: number;
  /** CPU of the whole process: spawn until every child started (parked) or settled (events). */
  cpuUsPerChild: number;
  /** Parked only: cancel until every task ended. */
  cancelCpuUsPerChild: number;
  wallMs: number;
}

interface Lane {
  worker: Worker;
  tasks: MessagePort;
  uplink: MessagePort | undefined;
  down: Down[];
}

async function startLanes(threads: number, design: Design, regime: Regime, events: number) {
  const lanes: Lane[] = [];
  for (let index = 0; index < threads; index++) {
    const tasks = new MessageChannel();
    const uplink = shared(design) ? new MessageChannel() : undefined;
    const setup: Setup = {
      role: 'messaging-designs',
      design,
      regime,
      events,
      tasks: tasks.port2,
      uplink: uplink?.port2,
    };
    const transfer = uplink ? [tasks.port2, uplink.port2] : [tasks.port2];
    const worker = new Worker(new URL(import.meta.url), {
      workerData: setup,
      transferList: transfer,
    });
    await new Promise((resolve) => worker.once('message', resolve));
    lanes.push({ worker, tasks: tasks.port1, uplink: uplink?.port1, down: [] });
  }
  return lanes;
}

const SPEC_PROMPT = 'Do the thing. '.repeat(20);

/** One run of one design and regime in fresh workers. */
export async function runOnce(
  design: Design,
  regime: Regime,
  options: { children: number; events: number; threads: number },
): Promise<RunResult> {
  const lanes = await startLanes(options.threads, design, regime, options.events);
  const children = new Map<string, { lane: Lane; port?: MessagePort; up(message: Up): void }>();
  let messages = 0;
  let started = 0;
  let ended = 0;
  let onProgress = (): void => {};
  const handle = (message: Up): void => {
    messages++;
    if (message.type === 'started') started++;
    onProgress();
  };
  for (const lane of lanes) {
    lane.uplink?.on('message', (data: Up | Up[]) =>
      unpack(data, (message) => children.get(message.id!)?.up(message)),
    );
    lane.tasks.on('message', () => {
      ended++;
      onProgress();
    });
  }
  const until = (done: () => boolean) =>
    new Promise<void>((resolve) => {
      onProgress = () => done() && resolve();
      onProgress();
    });
  const begin = performance.now();
  const cpu = process.cpuUsage();
  for (let index = 0; index < options.children; index++) {
    const id = `child-${index}`;
    const lane = lanes[index % lanes.length]!;
    const spec = { id, title: id, prompt: SPEC_PROMPT, depth: 1, maxDepth: 1, maxSteps: 10 };
    if (shared(design)) {
      children.set(id, { lane, up: handle });
      lane.tasks.postMessage({ taskId: index, task: { spec } });
    } else {
      const { port1, port2 } = new MessageChannel();
      port1.on('message', (data: Up | Up[]) => unpack(data, handle));
      children.set(id, { lane, port: port1, up: handle });
      lane.tasks.postMessage({ taskId: index, task: { spec, port: port2 } }, [port2]);
    }
  }
  const all = options.children;
  // Every message counted, not only every task ended: results and task replies travel on
  // different ports, so a task's end can overtake its child's last messages.
  const expected = all * (regime === 'parked' ? 3 : options.events + 2);
  const settled = () => ended === all && messages === expected;
  await until(() => (regime === 'parked' ? started === all && messages === 2 * all : settled()));
  const spawnCpu = process.cpuUsage(cpu);
  let cancelCpu = { user: 0, system: 0 };
  if (regime === 'parked') {
    const cancelAt = process.cpuUsage();
    cancelAll(design, children);
    await until(settled);
    cancelCpu = process.cpuUsage(cancelAt);
  }
  const wallMs = performance.now() - begin;
  for (const child of children.values()) child.port?.close();
  for (const lane of lanes) {
    lane.tasks.close();
    lane.uplink?.close();
    await lane.worker.terminate();
  }
  const perChild = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / all;
  return {
    design,
    regime,
    children: all,
    messages,
    cpuUsPerChild: perChild(spawnCpu),
    cancelCpuUsPerChild: perChild(cancelCpu),
    wallMs,
  };
}

function cancelAll(
  design: Design,
  children: Map<string, { lane: Lane; port?: MessagePort }>,
): void {
  for (const [id, child] of children) {
    const cancel: Down = { type: 'cancel', reason: 'shutdown' };
    if (child.port) child.port.postMessage(cancel);
    else if (batched(design)) child.lane.down.push({ ...cancel, id });
    else child.lane.uplink!.postMessage({ ...cancel, id });
  }
  // One post per lane for every cancel of this tick.
  for (const lane of new Set([...children.values()].map((child) => child.lane))) {
    if (lane.down.length > 0) lane.uplink!.postMessage(lane.down);
    lane.down = [];
  }
}

// ── The command ───────────────────────────────────────────────────────────────────────────────

export const USAGE = `Usage: node dist/bench/messaging-designs.js [options]
Measures CPU per child and per message of four ways to carry a child's messages between threads.
  --children N   children per run (default 5000)
  --events E     events each child posts in the events regime (default 20)
  --threads T    worker threads (default 2)
  --runs R       rounds; every design runs each regime once per round (default 3)`;

async function main(argv: string[]): Promise<void> {
  const flag = { type: 'string' } as const;
  const { values } = parseCommand(argv, {
    children: flag,
    events: flag,
    threads: flag,
    runs: flag,
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const options = {
    children: intFlag(values, 'children', 1, 1_000_000) ?? 5000,
    events: intFlag(values, 'events', 1, 10_000) ?? 20,
    threads: intFlag(values, 'threads', 1, 64) ?? 2,
  };
  const runs = intFlag(values, 'runs', 1, 100) ?? 3;
  const results: RunResult[] = [];
  for (let round = 0; round < runs; round++) {
    // Alternate the order so that no design always runs first (or last) in a round.
    const order = round % 2 === 0 ? DESIGNS : [...DESIGNS].reverse();
    for (const regime of ['parked', 'events'] as const) {
      for (const design of order) {
        const result = await runOnce(design, regime, options);
        results.push(result);
        console.error(
          `round ${round + 1}: ${regime} ${design}: ${result.cpuUsPerChild.toFixed(1)} µs/child`,
        );
      }
    }
  }
  console.log(formatSummary(results, options.events));
  console.log(JSON.stringify({ options: { ...options, runs }, results }));
}

function formatSummary(results: RunResult[], events: number): string {
  const med = (design: Design, regime: Regime, pick: (run: RunResult) => number) =>
    median(results.filter((run) => run.design === design && run.regime === regime).map(pick));
  return formatGrid(
    [
      'design',
      'parked: spawn µs/child',
      'cancel µs/child',
      `events: µs/child (${events} events)`,
      'µs/message',
    ],
    DESIGNS.map((design) => [
      design,
      formatValue(med(design, 'parked', (run) => run.cpuUsPerChild)),
      formatValue(med(design, 'parked', (run) => run.cancelCpuUsPerChild)),
      formatValue(med(design, 'events', (run) => run.cpuUsPerChild)),
      formatValue(
        med(design, 'events', (run) => (run.cpuUsPerChild * run.children) / run.messages),
      ),
    ]),
    [1, 2, 3, 4],
  );
}

if (!isMainThread && (workerData as Setup | undefined)?.role === 'messaging-designs') {
  runWorker(workerData as Setup);
} else if (isEntryScript(import.meta.url)) {
  await main(process.argv.slice(2));
}
