/**
 * The `embed` part: cohort as the backend engine of an HTTP service, beside the same service on
 * the hand-written official-SDK loop. The service (embed-service.ts, a process of its own) runs
 * one agent per document of each job; the bench is its client: `--jobs` (20) concurrent jobs ×
 * `--docs` (50) documents, each agent a tool step and a reply against the scripted model (ttft 200 ms), once
 * with a clean model and once with 1% of requests answered 529 at random. Per case: job time
 * p50 and p99 at the client, `/healthz` p99 polled every 20 ms during the load, and the
 * service's main-thread event-loop delay p99, peak RSS and CPU. Each case gets a fresh model
 * and a fresh service, warmed by one unmeasured job; rounds rotate the engines' order.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadFlags, startModelProcess } from '../common/model-process.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from '../common/part.js';
import { builtPath } from '../common/paths.js';
import { median, percentile } from '../common/stats.js';
import { formatGrid, formatValue } from '../common/table.js';
import { localModelEnv } from '../engines/fork.js';
import {
  EMBED_ENGINES,
  type EmbedEngine,
  type EmbedFigures,
  type EmbedServiceConfig,
  type JobAnswer,
} from './embed-jobs.js';

const TTFT_MS = 200;
const LOSSES = [0, 0.01] as const;
const HEALTH_EVERY_MS = 20;
const MB = 1024 * 1024;

export interface EmbedMeasurement {
  engine: EmbedEngine;
  loss: number;
  jobMs: { p50: number; p99: number };
  healthzP99Ms: number;
  eventLoopP99Ms: number;
  peakRssMB: number;
  cpuS: number;
  /** Agents that did not end `complete`. */
  incomplete: number;
}

/** A started service process and what it is asked over IPC. */
interface Service {
  port: number;
  ask(type: 'probe-start' | 'probe-stop'): Promise<EmbedFigures | undefined>;
  stop(): Promise<void>;
}

async function startService(config: EmbedServiceConfig): Promise<Service> {
  const child: ChildProcess = fork(
    builtPath('bench/embed/embed-service.js'),
    [JSON.stringify(config)],
    {
      env: localModelEnv(),
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    },
  );
  const exited = once(child, 'exit');
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message: { type?: string; port?: number }) => {
      if (message.type === 'listening' && message.port !== undefined) resolve(message.port);
      else reject(new Error(`the embed service said ${JSON.stringify(message)}`));
    });
    child.once('exit', (code) => reject(new Error(`the embed service exited with ${code}`)));
  });
  return {
    port,
    ask: async (type) => {
      if (type === 'probe-start') {
        child.send({ type });
        return undefined;
      }
      const answer = once(child, 'message');
      child.send({ type });
      return ((await answer)[0] as { figures: EmbedFigures }).figures;
    },
    stop: async () => {
      child.disconnect();
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function postJob(port: number, docs: number): Promise<{ ms: number; answer: JobAnswer }> {
  const start = performance.now();
  const response = await fetch(`http://127.0.0.1:${port}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ docs }),
  });
  if (!response.ok) throw new Error(`job answered ${response.status}: ${await response.text()}`);
  const answer = (await response.json()) as JobAnswer;
  return { ms: performance.now() - start, answer };
}

/** Polls `/healthz` one request at a time until stopped; resolves with each latency. */
function pollHealth(port: number): { stop(): Promise<number[]> } {
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const start = performance.now();
      await (await fetch(`http://127.0.0.1:${port}/healthz`)).text();
      latencies.push(performance.now() - start);
      await new Promise((resolve) => setTimeout(resolve, HEALTH_EVERY_MS));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return latencies;
    },
  };
}

/** The load: concurrent jobs × documents per job. */
interface Load {
  jobs: number;
  docs: number;
}

async function measureCase(
  engine: EmbedEngine,
  loss: number,
  round: number,
  { jobs, docs }: Load,
): Promise<EmbedMeasurement> {
  const model = await startModelProcess([
    ...loadFlags({ ttftMs: TTFT_MS, overload: loss }),
    '--seed',
    String(round + 1),
  ]);
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-embed-'));
  const service = await startService({ engine, modelUrl: model.url, logDir });
  try {
    await postJob(service.port, 5);
    await service.ask('probe-start');
    const health = pollHealth(service.port);
    const answers = await Promise.all(
      Array.from({ length: jobs }, () => postJob(service.port, docs)),
    );
    const healthz = await health.stop();
    const figures = (await service.ask('probe-stop'))!;
    const times = answers.map((job) => job.ms);
    const incomplete = answers.reduce(
      (sum, job) => sum + docs - (job.answer.outcomes.complete ?? 0),
      0,
    );
    return {
      engine,
      loss,
      jobMs: { p50: percentile(times, 50), p99: percentile(times, 99) },
      healthzP99Ms: percentile(healthz, 99),
      eventLoopP99Ms: figures.eventLoopDelay.p99,
      peakRssMB: figures.peakRssBytes / MB,
      cpuS: figures.cpuMs / 1000,
      incomplete,
    };
  } finally {
    await service.stop();
    await model.stop();
    rmSync(logDir, { recursive: true, force: true });
  }
}

/** The medians of one engine and loss over the rounds. */
function medianOf(cases: EmbedMeasurement[]): EmbedMeasurement {
  const first = cases[0]!;
  const med = (pick: (item: EmbedMeasurement) => number) => median(cases.map(pick));
  return {
    engine: first.engine,
    loss: first.loss,
    jobMs: { p50: med((item) => item.jobMs.p50), p99: med((item) => item.jobMs.p99) },
    healthzP99Ms: med((item) => item.healthzP99Ms),
    eventLoopP99Ms: med((item) => item.eventLoopP99Ms),
    peakRssMB: med((item) => item.peakRssMB),
    cpuS: med((item) => item.cpuS),
    incomplete: Math.max(...cases.map((item) => item.incomplete)),
  };
}

const caseName = (item: Pick<EmbedMeasurement, 'engine' | 'loss'>) =>
  `${item.engine} ${item.loss === 0 ? 'clean' : `${item.loss * 100}% 529`}`;

function rowsOf(summary: EmbedMeasurement[]): BenchRow[] {
  const rows: BenchRow[] = [];
  for (const item of summary) {
    const add = (metric: string, value: number, unit: string) =>
      rows.push({ part: 'embed', case: caseName(item), metric, value, unit });
    add('job p50', item.jobMs.p50, 'ms');
    add('job p99', item.jobMs.p99, 'ms');
    add('healthz p99', item.healthzP99Ms, 'ms');
    add('event-loop p99', item.eventLoopP99Ms, 'ms');
    add('peak RSS', item.peakRssMB, 'MB');
    add('CPU', item.cpuS, 's');
    add('incomplete agents', item.incomplete, 'agents');
  }
  for (const loss of LOSSES) {
    const of = (engine: EmbedEngine) =>
      summary.find((item) => item.engine === engine && item.loss === loss);
    const cohort = of('cohort');
    const loop = of('sdk-loop');
    if (!cohort || !loop) continue;
    rows.push({
      part: 'embed',
      case: `cohort / sdk-loop ${loss === 0 ? 'clean' : `${loss * 100}% 529`}`,
      metric: 'job p50 ratio',
      value: cohort.jobMs.p50 / loop.jobMs.p50,
      unit: '×',
      note: 'below 1: cohort finishes jobs sooner',
    });
  }
  return rows;
}

function table(summary: EmbedMeasurement[]): string {
  return formatGrid(
    [
      'case',
      'job p50 ms',
      'job p99 ms',
      'healthz p99 ms',
      'loop p99 ms',
      'RSS MB',
      'CPU s',
      'incomplete',
    ],
    summary.map((item) => [
      caseName(item),
      formatValue(item.jobMs.p50),
      formatValue(item.jobMs.p99),
      formatValue(item.healthzP99Ms),
      formatValue(item.eventLoopP99Ms),
      formatValue(item.peakRssMB),
      formatValue(item.cpuS),
      String(item.incomplete),
    ]),
  );
}

export const embedPart: BenchPart = {
  name: 'embed',
  description:
    'an HTTP service on the library: concurrent jobs × documents, cohort beside the official-SDK loop, clean and with 1% random 529s',
  async run(context: BenchContext): Promise<PartReport> {
    const rounds = Math.max(1, context.options.runs);
    const load: Load = { jobs: context.options.jobs, docs: context.options.docs };
    const measured: EmbedMeasurement[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const loss of LOSSES) {
        const order = round % 2 === 0 ? EMBED_ENGINES : [...EMBED_ENGINES].reverse();
        for (const engine of order) {
          context.log(`embed: round ${round + 1}/${rounds}, ${caseName({ engine, loss })}`);
          measured.push(await measureCase(engine, loss, round, load));
        }
      }
    }
    const summary: EmbedMeasurement[] = [];
    for (const loss of LOSSES) {
      for (const engine of EMBED_ENGINES) {
        summary.push(
          medianOf(measured.filter((item) => item.engine === engine && item.loss === loss)),
        );
      }
    }
    return {
      rows: rowsOf(summary),
      table: table(summary),
      data: { ...load, rounds, measured, summary },
    };
  },
};
