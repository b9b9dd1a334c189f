/**
 * The `scale` part: the queue backend against the local engine on the same workload and the
 * same threads, and the queue with 1, 2 and 3 `cohort worker` processes. The scripted model runs
 * in its own process, redis-server in another (a private socket); each case runs in a fresh
 * measuring process (scale-case.ts), its workers started fresh for it (scale-workers.ts), the
 * cases' order rotated run by run. Figures per task: CPU of each process, Redis's commands, the
 * clients' round trips; medians over `--runs`.
 */
import os from 'node:os';
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import { loadFlags, type ModelProcess, startModelProcess } from '../common/model-process.js';
import type { BenchOptions } from '../common/options.js';
import type { BenchContext, BenchPart, PartReport } from '../common/part.js';
import {
  benchClient,
  type RedisProcess,
  redisServerMissing,
  startRedisProcess,
} from '../common/redis-process.js';
import { idealAgentMs, type Scenario, scenarioOf } from '../common/scenario.js';
import { formatTable } from '../common/table.js';
import { rotate } from '../concurrency/concurrency.js';
import { localModelEnv } from '../engines/fork.js';
import type { ScaleJob } from './scale-case.js';
import {
  caseName,
  commandMix,
  type ScaleRun,
  scaleGrid,
  scaleRows,
  summariseScale,
  TARGET_CPU_OVERHEAD_MS,
  TARGET_THROUGHPUT_RATIO,
} from './scale-summary.js';
import { measureScaleCase, startWorkers, type WorkerFleet } from './scale-workers.js';

/** The part's own defaults where no flag says otherwise: the concurrency part's target scenario. */
const DEFAULTS = { agents: 2000, concurrency: 200, ttftMs: 200, cpuMs: 0 };

/**
 * The queue cases run `concurrency` agents at once, as local does: the workers' `--concurrency`
 * adds up to it. The producer keeps this share more in flight, waiting in Redis, so a worker
 * finishing a job takes the next in the same round trip (BullMQ's fetch-next), as a fleet fed
 * by a deep batch does, rather than waiting for the next add.
 */
export const QUEUE_BACKLOG_SHARE = 0.25;

interface ScaleSettings {
  scenario: Scenario;
  concurrency: number;
  threads: number;
  governorOff: boolean;
}

export function scaleSettings(options: BenchOptions): ScaleSettings {
  const given = (flag: string) => options.given.includes(flag);
  return {
    scenario: scenarioOf(options, DEFAULTS),
    // One level: the highest of a list.
    concurrency: given('concurrency') ? Math.max(...options.concurrency) : DEFAULTS.concurrency,
    threads: options.threads ?? os.availableParallelism(),
    governorOff: !options.governor,
  };
}

async function run(context: BenchContext): Promise<PartReport> {
  const { options, log } = context;
  const missing = redisServerMissing();
  if (missing !== undefined) {
    log(`bench: scale skipped: ${missing}`);
    return { rows: [], table: `skipped: ${missing}`, data: { skipped: missing } };
  }
  const settings = scaleSettings(options);
  const { scenario, concurrency, threads } = settings;
  const cases = [
    { mode: 'local' as const, workers: 0 },
    ...options.workers.map((workers) => ({ mode: 'queue' as const, workers })),
  ];
  const env = localModelEnv();
  let model: ModelProcess | undefined;
  let redis: RedisProcess | undefined;
  const measurements: ScaleRun[] = [];
  try {
    model = await startModelProcess(
      loadFlags({ ttftMs: scenario.ttftMs, tps: scenario.tps, jitter: options.jitter }),
    );
    redis = await startRedisProcess();
    const provider: Partial<ProviderConfig> = {
      baseURL: model.url,
      model: 'cohort-bench',
      maxRetries: options.maxRetries,
      transport: options.transport,
    };
    // The scripted model's first calls run cold (its JIT): an unmeasured local case on a quarter
    // of the agents goes first, or run 1's first case would pay for it and flatter the other.
    const warmUp = await measureScaleCase(
      {
        mode: 'local',
        workers: 0,
        concurrency,
        inFlight: concurrency,
        scenario: { ...scenario, agents: Math.ceil(scenario.agents / 4) },
        provider,
        threads,
        governorOff: settings.governorOff,
        modelPid: model.child.pid,
      },
      env,
      'scale-warm-up',
    );
    log(
      `bench: scale, warm-up (not measured): ${warmUp.outcomes.complete}/${warmUp.agents} complete`,
    );
    for (let runIndex = 0; runIndex < options.runs; runIndex++) {
      for (const item of rotate(cases, runIndex)) {
        const label = caseName(item.mode, item.workers);
        const slug = `scale-run-${runIndex + 1}-${item.mode}${item.workers > 0 ? `-${item.workers}w` : ''}`;
        const queueName = `scale-${runIndex + 1}-${item.workers}`;
        let fleet: WorkerFleet | undefined;
        try {
          if (item.mode === 'queue') {
            fleet = await startWorkers({
              count: item.workers,
              socket: redis.socket,
              queueName,
              threads,
              concurrency: Math.ceil(concurrency / item.workers),
              governorOff: settings.governorOff,
              env,
              slug,
            });
          }
          const job: ScaleJob = {
            mode: item.mode,
            workers: item.workers,
            concurrency,
            inFlight:
              item.mode === 'queue'
                ? concurrency + Math.ceil(concurrency * QUEUE_BACKLOG_SHARE)
                : concurrency,
            scenario,
            provider,
            threads,
            governorOff: settings.governorOff,
            modelPid: model.child.pid,
            ...(fleet
              ? {
                  queue: {
                    socket: redis.socket,
                    name: queueName,
                    redisPid: redis.child.pid!,
                    workerPids: fleet.pids,
                    snapshotDir: fleet.snapshotDir,
                  },
                }
              : {}),
          };
          const measurement = await measureScaleCase(job, env, slug);
          measurements.push({ ...measurement, run: runIndex });
          const rate = measurement.outcomes.complete / (measurement.makespanMs / 1000);
          log(
            `bench: scale, ${label}, run ${runIndex + 1}/${options.runs}: ` +
              `${measurement.outcomes.complete}/${measurement.agents} complete in ${(measurement.makespanMs / 1000).toFixed(2)} s, ` +
              `${rate.toFixed(1)} agents/s`,
          );
        } finally {
          await fleet?.stop();
          if (fleet) await flush(redis.socket);
        }
      }
    }
  } finally {
    await model?.stop();
    await redis?.stop();
  }
  const { summary, ratios } = summariseScale(measurements, cases);
  const rows = scaleRows(summary, ratios);
  const subtitle =
    `${scenario.agents} agents × ${scenario.steps} steps, concurrency ${concurrency} ` +
    `(queue: workers' --concurrency adding up to it, ${Math.round(QUEUE_BACKLOG_SHARE * 100)}% more waiting in Redis); ` +
    `scripted model (own process): ttft ${scenario.ttftMs} ms, tps ${scenario.tps || 'unpaced'}, ` +
    `cpu ${scenario.cpuMs} ms/tool call; ${threads} thread(s) for the local engine and for each worker; ` +
    `transport ${options.transport}; governor ${options.governor ? 'on' : 'off'}; ` +
    `medians of ${options.runs} run(s); ideal agent time ${idealAgentMs(scenario).toFixed(0)} ms`;
  const failures = measurements
    .filter((item) => item.failureReasons.length > 0)
    .map(
      (item) =>
        `not complete: ${caseName(item.mode, item.workers)}: ${item.failureReasons.join(' | ')}`,
    );
  const table = [
    subtitle,
    `targets: queue ×1 agents/s ≥ ${TARGET_THROUGHPUT_RATIO} × local; its producer + worker CPU per task ≤ local's + ${TARGET_CPU_OVERHEAD_MS} ms`,
    '',
    scaleGrid(summary),
    '',
    commandMix(measurements),
    ...(failures.length > 0 ? ['', ...failures.slice(0, 10)] : []),
    '',
    formatTable(rows),
  ].join('\n');
  return {
    rows,
    table,
    data: {
      scenario,
      concurrency,
      threads,
      workerCounts: options.workers,
      summary,
      ratios,
      measurements,
    },
  };
}

/** Empties Redis between cases, so each starts from the same state. */
async function flush(socket: string): Promise<void> {
  const client = benchClient(socket);
  try {
    await client.flushall();
    await client.config('RESETSTAT');
  } finally {
    client.disconnect();
  }
}

/** The `scale` part of `npm run bench`. */
export const scalePart: BenchPart = {
  name: 'scale',
  description:
    'queue mode (BullMQ on Redis, cohort worker processes) vs the local engine: agents/s, CPU and Redis round trips per task; 1, 2, 3 workers',
  run,
};
