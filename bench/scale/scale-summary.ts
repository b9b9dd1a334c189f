/**
 * The `scale` part's figures: per case, medians over runs of what scale-case.ts measured, per
 * task; the queue-against-local ratios taken within each run, then their median; rows and table.
 */
import type { BenchRow } from '../common/part.js';
import { median } from '../common/stats.js';
import { formatCount, formatGrid, formatValue } from '../common/table.js';
import type { ScaleMeasurement } from './scale-case.js';

/** The queue with one worker keeps at least this share of the local engine's agents/s. */
export const TARGET_THROUGHPUT_RATIO = 0.9;
/** …and spends at most this much more CPU per task, producer and worker processes together. */
export const TARGET_CPU_OVERHEAD_MS = 1;

export type ScaleRun = ScaleMeasurement & { run: number };

export interface ScaleFigures {
  case: string;
  mode: 'local' | 'queue';
  workers: number;
  runs: number;
  agents: number;
  completed: number;
  agentsPerSecond: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  startMs: number;
  eventLoopP99Ms: number;
  /** The busiest worker's main-thread event-loop delay p99, ms. */
  workerEventLoopP99Ms: number | null;
  /** CPU per task, ms: the producer process (queue cases; null for local). */
  producerCpuMs: number | null;
  /**
   * Where the agents run (the local engine's process, or Σ over the worker processes): its main
   * thread(s), and the rest (agent threads, and Node's own helpers: GC, libuv).
   */
  engineMainCpuMs: number | null;
  engineOtherCpuMs: number | null;
  /** Every cohort process of the case: local, or producer + workers. */
  processesCpuMs: number;
  redisCpuMs: number | null;
  modelCpuMs: number | null;
  /** Commands Redis ran per task, those inside Lua scripts included. */
  redisCommands: number | null;
  /** Lua script calls (EVALSHA, EVAL) per task: BullMQ's atomic steps. */
  scriptCalls: number | null;
  /** KB per task Redis read from its clients, and wrote to them. */
  redisKbIn: number | null;
  redisKbOut: number | null;
  /** Commands the producer and the workers sent per task, and their writes (round trips). */
  clientCommands: number | null;
  clientWrites: number | null;
}

export interface ScaleRatios {
  /** Per run, queue ×1 agents/s / local agents/s; then the median. */
  throughputQueueOverLocal: number | null;
  /** Per run, (producer + worker) CPU per task of queue ×1 − local's; then the median. */
  cpuOverheadMs: number | null;
  /** The same with redis-server's CPU added to the queue's side. */
  cpuOverheadWithRedisMs: number | null;
  /** Its two parts: producer + the worker's main thread − the local main thread… */
  mainThreadsOverheadMs: number | null;
  /** …and the worker's other threads − the local engine's other threads. */
  otherThreadsOverheadMs: number | null;
}

export function caseName(mode: 'local' | 'queue', workers: number): string {
  return mode === 'local' ? 'local' : `queue ×${workers}`;
}

const perTask = (value: number | null, tasks: number): number | null =>
  value === null ? null : value / Math.max(1, tasks);

function sumOf(calls: Record<string, number> | null, names?: string[]): number | null {
  if (calls === null) return null;
  return Object.entries(calls)
    .filter(([name]) => names === undefined || names.includes(name))
    .reduce((sum, [, count]) => sum + count, 0);
}

/** The figures of one measurement. */
export function figuresOf(item: ScaleMeasurement): Omit<ScaleFigures, 'runs'> {
  const tasks = item.agents;
  const local = item.mode === 'local';
  const engineCpu = local ? item.producerCpuMs : (item.workerCpuMs ?? Number.NaN);
  const engineMain = local ? item.mainThreadCpuMs : item.workerMainThreadCpuMs;
  const client =
    item.producerCommands && item.workerCommands
      ? {
          commands: item.producerCommands.commands + item.workerCommands.commands,
          writes: item.producerCommands.writes + item.workerCommands.writes,
        }
      : null;
  return {
    case: caseName(item.mode, item.workers),
    mode: item.mode,
    workers: item.workers,
    agents: item.agents,
    completed: item.outcomes.complete,
    agentsPerSecond: item.outcomes.complete / (item.makespanMs / 1000),
    latencyP50Ms: item.latencyMs.p50,
    latencyP99Ms: item.latencyMs.p99,
    startMs: item.startMs,
    eventLoopP99Ms: item.eventLoopP99Ms,
    workerEventLoopP99Ms: item.workerEventLoopP99Ms,
    producerCpuMs: local ? null : item.producerCpuMs / tasks,
    engineMainCpuMs: perTask(engineMain, tasks),
    engineOtherCpuMs: engineMain === null ? null : (engineCpu - engineMain) / tasks,
    processesCpuMs: (item.producerCpuMs + (item.workerCpuMs ?? 0)) / tasks,
    redisCpuMs: perTask(item.redisCpuMs, tasks),
    modelCpuMs: perTask(item.modelCpuMs, tasks),
    redisCommands: perTask(sumOf(item.redisCommands), tasks),
    scriptCalls: perTask(sumOf(item.redisCommands, ['evalsha', 'eval']), tasks),
    redisKbIn: perTask(item.redisBytesIn === null ? null : item.redisBytesIn / 1024, tasks),
    redisKbOut: perTask(item.redisBytesOut === null ? null : item.redisBytesOut / 1024, tasks),
    clientCommands: perTask(client?.commands ?? null, tasks),
    clientWrites: perTask(client?.writes ?? null, tasks),
  };
}

function medianOf(values: (number | null)[]): number | null {
  const present = values.filter((value): value is number => value !== null);
  return present.length === 0 ? null : median(present);
}

/** Medians per case, in the order given, and the ratios. */
export function summariseScale(
  measurements: ScaleRun[],
  cases: { mode: 'local' | 'queue'; workers: number }[],
): { summary: ScaleFigures[]; ratios: ScaleRatios } {
  const summary: ScaleFigures[] = [];
  for (const { mode, workers } of cases) {
    const figures = measurements
      .filter((item) => item.mode === mode && item.workers === workers)
      .map(figuresOf);
    const first = figures[0];
    if (first === undefined) continue;
    const mid = (pick: (item: Omit<ScaleFigures, 'runs'>) => number | null) =>
      medianOf(figures.map(pick));
    summary.push({
      case: first.case,
      mode,
      workers,
      runs: figures.length,
      agents: first.agents,
      completed: mid((item) => item.completed)!,
      agentsPerSecond: mid((item) => item.agentsPerSecond)!,
      latencyP50Ms: mid((item) => item.latencyP50Ms)!,
      latencyP99Ms: mid((item) => item.latencyP99Ms)!,
      startMs: mid((item) => item.startMs)!,
      eventLoopP99Ms: mid((item) => item.eventLoopP99Ms)!,
      workerEventLoopP99Ms: mid((item) => item.workerEventLoopP99Ms),
      producerCpuMs: mid((item) => item.producerCpuMs),
      engineMainCpuMs: mid((item) => item.engineMainCpuMs),
      engineOtherCpuMs: mid((item) => item.engineOtherCpuMs),
      processesCpuMs: mid((item) => item.processesCpuMs)!,
      redisCpuMs: mid((item) => item.redisCpuMs),
      modelCpuMs: mid((item) => item.modelCpuMs),
      redisCommands: mid((item) => item.redisCommands),
      scriptCalls: mid((item) => item.scriptCalls),
      redisKbIn: mid((item) => item.redisKbIn),
      redisKbOut: mid((item) => item.redisKbOut),
      clientCommands: mid((item) => item.clientCommands),
      clientWrites: mid((item) => item.clientWrites),
    });
  }
  const throughput: number[] = [];
  const overhead: number[] = [];
  const overheadWithRedis: number[] = [];
  const mainOverhead: number[] = [];
  const otherOverhead: number[] = [];
  for (const run of new Set(measurements.map((item) => item.run))) {
    const inRun = measurements.filter((item) => item.run === run);
    const local = inRun.find((item) => item.mode === 'local');
    const queue = inRun.find((item) => item.mode === 'queue' && item.workers === 1);
    if (!local || !queue) continue;
    const [l, q] = [figuresOf(local), figuresOf(queue)];
    throughput.push(q.agentsPerSecond / l.agentsPerSecond);
    overhead.push(q.processesCpuMs - l.processesCpuMs);
    if (q.redisCpuMs !== null) {
      overheadWithRedis.push(q.processesCpuMs + q.redisCpuMs - l.processesCpuMs);
    }
    if (q.engineMainCpuMs !== null && l.engineMainCpuMs !== null) {
      mainOverhead.push((q.producerCpuMs ?? 0) + q.engineMainCpuMs - l.engineMainCpuMs);
    }
    if (q.engineOtherCpuMs !== null && l.engineOtherCpuMs !== null) {
      otherOverhead.push(q.engineOtherCpuMs - l.engineOtherCpuMs);
    }
  }
  return {
    summary,
    ratios: {
      throughputQueueOverLocal: medianOf(throughput),
      cpuOverheadMs: medianOf(overhead),
      cpuOverheadWithRedisMs: medianOf(overheadWithRedis),
      mainThreadsOverheadMs: medianOf(mainOverhead),
      otherThreadsOverheadMs: medianOf(otherOverhead),
    },
  };
}

/** The part's rows: the targets first, then each case's main figures. */
export function scaleRows(summary: ScaleFigures[], ratios: ScaleRatios): BenchRow[] {
  const rows: BenchRow[] = [];
  const add = (name: string, metric: string, value: number | null, unit: string, note?: string) => {
    if (value === null || !Number.isFinite(value)) return;
    rows.push({ part: 'scale', case: name, metric, value, unit, ...(note ? { note } : {}) });
  };
  const verdict = (met: boolean, target: string) => `target ${target}: ${met ? 'met' : 'missed'}`;
  const { throughputQueueOverLocal: ratio, cpuOverheadMs: extra } = ratios;
  add(
    'queue ×1 vs local',
    'agents/s, queue / local',
    ratio,
    '×',
    ratio === null
      ? undefined
      : verdict(ratio >= TARGET_THROUGHPUT_RATIO, `≥ ${TARGET_THROUGHPUT_RATIO}`),
  );
  add(
    'queue ×1 vs local',
    'cpu ms/task, queue − local (producer + worker)',
    extra,
    'ms',
    extra === null
      ? undefined
      : verdict(extra <= TARGET_CPU_OVERHEAD_MS, `≤ ${TARGET_CPU_OVERHEAD_MS} ms`),
  );
  add(
    'queue ×1 vs local',
    'cpu ms/task, queue − local, redis-server added',
    ratios.cpuOverheadWithRedisMs,
    'ms',
  );
  add(
    'queue ×1 vs local',
    'of which: producer + worker main thread − local main thread',
    ratios.mainThreadsOverheadMs,
    'ms',
  );
  add(
    'queue ×1 vs local',
    'of which: worker other threads − local other threads',
    ratios.otherThreadsOverheadMs,
    'ms',
  );
  for (const item of summary) {
    add(item.case, 'agents/s', item.agentsPerSecond, 'agents/s');
    add(item.case, 'cpu per task, cohort processes', item.processesCpuMs, 'ms');
    add(item.case, 'cpu per task, redis-server', item.redisCpuMs, 'ms');
    add(item.case, 'redis commands per task', item.redisCommands, 'commands');
    add(item.case, 'client round trips per task', item.clientWrites, 'writes');
  }
  return rows;
}

/** One line per case. */
export function scaleGrid(summary: ScaleFigures[]): string {
  const header = [
    'case',
    'done',
    'agents/s',
    'p50 ms',
    'p99 ms',
    'start ms',
    'eld p99',
    'worker eld',
    'cpu/task: producer',
    'engine main',
    'engine rest',
    'sum',
    'redis',
    'model',
    'redis cmds/task',
    'scripts',
    'KB in',
    'KB out',
    'client cmds',
    'round trips',
  ];
  const cells = summary.map((item) => [
    item.case,
    `${formatCount(item.completed)}/${item.agents}`,
    formatValue(item.agentsPerSecond),
    formatValue(item.latencyP50Ms),
    formatValue(item.latencyP99Ms),
    formatValue(item.startMs),
    formatValue(item.eventLoopP99Ms),
    formatValue(item.workerEventLoopP99Ms),
    formatValue(item.producerCpuMs),
    formatValue(item.engineMainCpuMs),
    formatValue(item.engineOtherCpuMs),
    formatValue(item.processesCpuMs),
    formatValue(item.redisCpuMs),
    formatValue(item.modelCpuMs),
    formatValue(item.redisCommands),
    formatValue(item.scriptCalls),
    formatValue(item.redisKbIn),
    formatValue(item.redisKbOut),
    formatValue(item.clientCommands),
    formatValue(item.clientWrites),
  ]);
  return formatGrid(
    header,
    cells,
    Array.from({ length: header.length - 1 }, (_, index) => index + 1),
  );
}

/** `name calls/task, …`, most called first. */
function mixLine(totals: Record<string, number>, tasks: number, top: number): string {
  return Object.entries(totals)
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, count]) => `${name} ${(count / tasks).toFixed(2)}`)
    .join(', ');
}

/**
 * Commands per task over every queue ×1 run, most called first: what Redis ran, and what the
 * producer and the worker sent.
 */
export function commandMix(measurements: ScaleMeasurement[], top = 12): string {
  const chosen = measurements.filter((item) => item.mode === 'queue' && item.workers === 1);
  const redis: Record<string, number> = {};
  const producer: Record<string, number> = {};
  const worker: Record<string, number> = {};
  const add = (into: Record<string, number>, from: Record<string, number> | undefined) => {
    for (const [name, count] of Object.entries(from ?? {})) into[name] = (into[name] ?? 0) + count;
  };
  let tasks = 0;
  for (const item of chosen) {
    tasks += item.agents;
    add(redis, item.redisCommands ?? undefined);
    add(producer, item.producerCommands?.byName);
    add(worker, item.workerCommands?.byName);
  }
  if (tasks === 0) return '';
  return [
    `commands per task, queue ×1: Redis ran (Lua scripts' inner calls included): ${mixLine(redis, tasks, top)}`,
    `  the producer sent: ${mixLine(producer, tasks, top)}`,
    `  the worker sent: ${mixLine(worker, tasks, top)}`,
  ].join('\n');
}
