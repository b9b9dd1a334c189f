/**
 * One `scale` case, in a fresh measuring process forked by scale-workers.ts: the bench workload
 * on a local Engine, or through `Engine.start({ queue })` to the `cohort worker` processes the
 * part started. Everything is read at the two edges of one window, first agent started → last
 * result: this process's CPU, each worker's CPU and Redis commands (a snapshot it writes on
 * SIGUSR2), redis-server's and the model's CPU (/proc), and Redis's own command counts (INFO
 * commandstats, from a client left out of the counts).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Engine } from '../../src/main/engine.js';
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import {
  type AgentOutcome,
  type AgentResult,
  emptyOutcomeCounts,
} from '../../src/shared/result.js';
import { isEntryScript } from '../../src/testing/entry-script.js';
import { runLimited } from '../common/limiter.js';
import { processCpuMs } from '../common/model-process.js';
import { builtPath } from '../common/paths.js';
import { MainThreadProbe, type ProbeFigures } from '../common/probes.js';
import { benchClient, parseCommandStats, parseNetBytes } from '../common/redis-process.js';
import { agentPrompt, type Scenario } from '../common/scenario.js';
import { type Spread, spread } from '../common/stats.js';
import { type BenchEngine, benchEngineOf, startEngine } from '../engines/engines.js';
import {
  type CommandCount,
  commandCount,
  countDelta,
  countSum,
  dontCount,
  installCounter,
  workerSnapshot,
} from './scale-count.js';

export interface ScaleJob {
  /** `local`: a local Engine; `queue`: the queue, with `workers` worker processes. */
  mode: 'local' | 'queue';
  workers: number;
  /** Agents running at once: local's engine concurrency, the queue workers' summed. */
  concurrency: number;
  /** Runs the producer keeps in flight: `concurrency`, and for the queue a backlog on top. */
  inFlight: number;
  scenario: Scenario;
  provider: Partial<ProviderConfig>;
  /** Worker threads of the local Engine, and of each worker process. */
  threads: number;
  governorOff: boolean;
  modelPid: number | undefined;
  queue?: {
    socket: string;
    name: string;
    redisPid: number;
    workerPids: number[];
    snapshotDir: string;
  };
}

export interface ScaleMeasurement {
  mode: 'local' | 'queue';
  workers: number;
  concurrency: number;
  agents: number;
  outcomes: Record<AgentOutcome, number>;
  failureReasons: string[];
  /** Engine start (pool warm-up, or Redis connected) before the first agent, ms. */
  startMs: number;
  makespanMs: number;
  providerCalls: number;
  latencyMs: Spread;
  eventLoopP99Ms: number;
  /** This process, every thread, over the window (local: the whole engine), ms. */
  producerCpuMs: number;
  /** The highest of the workers' main-thread event-loop delay p99 over the window, ms. */
  workerEventLoopP99Ms: number | null;
  /** Σ over worker processes, every thread, over the window, ms (from inside each). */
  workerCpuMs: number | null;
  /**
   * Main threads' share, from /proc/PID/task/PID/stat (10 ms ticks): this process's (the local
   * engine's main, or the producer's), and Σ over the workers' main threads. The rest of a
   * process's CPU is its agent threads' and Node's own helpers' (GC, libuv).
   */
  mainThreadCpuMs: number | null;
  workerMainThreadCpuMs: number | null;
  redisCpuMs: number | null;
  modelCpuMs: number | null;
  /** What Redis ran over the window, per command (INFO left out); Lua scripts' inner calls included. */
  redisCommands: Record<string, number> | null;
  /** Bytes Redis read from its clients and wrote to them over the window (INFO stats). */
  redisBytesIn: number | null;
  redisBytesOut: number | null;
  producerCommands: CommandCount | null;
  workerCommands: CommandCount | null;
  /** Results per worker (`HOST/PID`). */
  perWorker: Record<string, number>;
}

export type ScaleReply = { ok: true; measurement: ScaleMeasurement } | { ok: false; error: string };

interface Edge {
  workers?: { cpuMs: number; count: CommandCount; eventLoopP99Ms: number }[];
  mainThreadCpuMs: number | undefined;
  workerMainThreadCpuMs?: number[];
  redisCpuMs: number | undefined;
  modelCpuMs: number | undefined;
  redisCommands?: Record<string, number>;
  redisBytes?: { in: number; out: number };
}

async function startScaleEngine(job: ScaleJob, logDir: string): Promise<BenchEngine> {
  const toolModules = [builtPath('bench/common/work-tool.js')];
  if (job.mode === 'local') {
    return startEngine('cohort', {
      provider: job.provider,
      logDir,
      toolModules,
      concurrency: job.concurrency,
      threads: job.threads,
      ...(job.governorOff ? { governor: { enabled: false } } : {}),
    });
  }
  const queue = job.queue!;
  const engine = await Engine.start({
    provider: job.provider,
    logDir,
    toolModules,
    queue: { url: queue.socket, name: queue.name },
  });
  return benchEngineOf('cohort', engine);
}

export async function measureScale(job: ScaleJob): Promise<ScaleMeasurement> {
  await installCounter();
  const { scenario, concurrency } = job;
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-'));
  const prompts = Array.from({ length: scenario.agents }, (_, index) =>
    agentPrompt(index, scenario),
  );
  const info = job.queue ? benchClient(job.queue.socket) : undefined;
  if (info) dontCount(info);
  const edge = async (): Promise<Edge> => {
    const queue = job.queue;
    const [workers, redisCommands, redisBytes] = await Promise.all([
      queue
        ? Promise.all(
            queue.workerPids.map(async (pid) => {
              const snapshot = await workerSnapshot(queue.snapshotDir, pid);
              return {
                cpuMs: snapshot.cpuMs,
                count: snapshot,
                eventLoopP99Ms: snapshot.eventLoopP99Ms,
              };
            }),
          )
        : undefined,
      info ? info.info('commandstats').then(parseCommandStats) : undefined,
      info ? info.info('stats').then(parseNetBytes) : undefined,
    ]);
    return {
      ...(workers ? { workers } : {}),
      ...(queue
        ? {
            workerMainThreadCpuMs: queue.workerPids.map((pid) => threadCpuMs(pid, pid) ?? NaN),
          }
        : {}),
      mainThreadCpuMs: threadCpuMs(process.pid, process.pid),
      redisCpuMs: processCpuMs(queue?.redisPid),
      modelCpuMs: processCpuMs(job.modelPid),
      ...(redisCommands ? { redisCommands } : {}),
      ...(redisBytes ? { redisBytes } : {}),
    };
  };
  const begin = performance.now();
  const engine = await startScaleEngine(job, logDir);
  const startMs = performance.now() - begin;
  const probe = new MainThreadProbe();
  let results: AgentResult[];
  let latencies: number[];
  let makespanMs: number;
  let before: Edge;
  let after: Edge;
  let cpu: NodeJS.CpuUsage;
  let producerCommands: CommandCount;
  let probed: ProbeFigures | undefined;
  try {
    before = await edge();
    probe.start();
    const countBefore = commandCount();
    const cpuBefore = process.cpuUsage();
    const run = await runLimited(scenario.agents, job.inFlight, (index) =>
      engine.run({
        prompt: prompts[index]!,
        title: `bench ${index}`,
        maxSteps: scenario.steps + 2,
      }),
    );
    cpu = process.cpuUsage(cpuBefore);
    probed = probe.stop();
    producerCommands = countDelta(countBefore, commandCount());
    after = await edge();
    ({ results, makespanMs } = run);
    latencies = run.latenciesMs;
  } finally {
    // Stopped here too when the run threw: its timer would keep this process alive.
    probed ??= probe.stop();
    await engine.close();
    info?.disconnect();
    rmSync(logDir, { recursive: true, force: true });
  }
  return {
    mode: job.mode,
    workers: job.workers,
    concurrency,
    agents: scenario.agents,
    ...tally(results),
    startMs,
    makespanMs,
    latencyMs: spread(latencies),
    eventLoopP99Ms: probed.eventLoopDelay.p99,
    workerEventLoopP99Ms: after.workers
      ? Math.max(...after.workers.map((item) => item.eventLoopP99Ms))
      : null,
    producerCpuMs: (cpu.user + cpu.system) / 1000,
    workerCpuMs: sumDelta(
      before.workers?.map((w) => w.cpuMs),
      after.workers?.map((w) => w.cpuMs),
    ),
    mainThreadCpuMs: delta(before.mainThreadCpuMs, after.mainThreadCpuMs),
    workerMainThreadCpuMs: sumDelta(before.workerMainThreadCpuMs, after.workerMainThreadCpuMs),
    redisCpuMs: delta(before.redisCpuMs, after.redisCpuMs),
    modelCpuMs: delta(before.modelCpuMs, after.modelCpuMs),
    redisCommands: commandsDelta(before.redisCommands, after.redisCommands),
    redisBytesIn: delta(before.redisBytes?.in, after.redisBytes?.in),
    redisBytesOut: delta(before.redisBytes?.out, after.redisBytes?.out),
    producerCommands: job.mode === 'queue' ? producerCommands : null,
    workerCommands: after.workers
      ? after.workers.reduce(
          (sum, item, index) =>
            countSum(sum, countDelta(before.workers![index]!.count, item.count)),
          { commands: 0, writes: 0, byName: {} } as CommandCount,
        )
      : null,
  };
}

function tally(results: AgentResult[]) {
  const outcomes = emptyOutcomeCounts();
  const reasons = new Set<string>();
  const perWorker: Record<string, number> = {};
  let providerCalls = 0;
  for (const result of results) {
    outcomes[result.outcome]++;
    providerCalls += result.usage.providerCalls;
    if (result.outcome !== 'complete' && reasons.size < 5) {
      reasons.add(`${result.outcome}: ${result.reason ?? ''}`.slice(0, 200));
    }
    const worker = (result as AgentResult & { worker?: string }).worker;
    if (worker !== undefined) perWorker[worker] = (perWorker[worker] ?? 0) + 1;
  }
  return { outcomes, failureReasons: [...reasons], providerCalls, perWorker };
}

/** CPU time (user + system) of one thread of a process, in ms; undefined where /proc is missing. */
function threadCpuMs(pid: number, tid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

function delta(before: number | undefined, after: number | undefined): number | null {
  return before === undefined || after === undefined ? null : after - before;
}

function sumDelta(before: number[] | undefined, after: number[] | undefined): number | null {
  if (!before || !after) return null;
  const total = after.reduce((sum, value, index) => sum + value - before[index]!, 0);
  return Number.isFinite(total) ? total : null;
}

/** Calls per command over the window; the bench's own INFO reads are left out. */
function commandsDelta(
  before: Record<string, number> | undefined,
  after: Record<string, number> | undefined,
): Record<string, number> | null {
  if (!before || !after) return null;
  const calls: Record<string, number> = {};
  for (const [name, count] of Object.entries(after)) {
    if (name === 'info') continue;
    const change = count - (before[name] ?? 0);
    if (change > 0) calls[name] = change;
  }
  return calls;
}

async function answer(job: ScaleJob): Promise<ScaleReply> {
  try {
    return { ok: true, measurement: await measureScale(job) };
  } catch (error) {
    return {
      ok: false,
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    };
  }
}

if (isEntryScript(import.meta.url)) {
  process.once('message', (job: ScaleJob) => {
    void answer(job).then((reply) => {
      process.send?.(reply, () => process.disconnect());
    });
  });
}
