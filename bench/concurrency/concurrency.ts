/**
 * The `concurrency` part: cohort, in-process, thread-per-child and sdk-loop side by side on one
 * scripted model (its own process), for each concurrency level, each case in a fresh measuring
 * process.
 */
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../../src/shared/provider/config.js';
import { type ChartPoint, concurrencyChartSpec } from '../common/chart.js';
import { loadFlags, processCpuMs, startModelProcess } from '../common/model-process.js';
import type { BenchOptions } from '../common/options.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from '../common/part.js';
import { idealAgentMs, type Scenario } from '../common/scenario.js';
import { formatCount, formatGrid, formatTable, formatValue } from '../common/table.js';
import { MAX_THREADS } from '../engines/engines.js';
import { localModelEnv, measureInFreshProcess } from '../engines/fork.js';
import type { ConcurrencyJob, ConcurrencyMeasurement } from '../engines/jobs.js';
import {
  type CaseSummary,
  caseFigures,
  type RunMeasurement,
  summariseConcurrency,
} from './concurrency-summary.js';

/** The environment of the measuring processes: no credentials when they talk to the local model. */
function childEnv(options: BenchOptions): NodeJS.ProcessEnv {
  return options.provider === 'anthropic' ? process.env : localModelEnv();
}

/** The engines in a run's order: rotated each run, so none is always measured first. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  const shift = items.length === 0 ? 0 : by % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

export function scenarioOf(options: BenchOptions): Scenario {
  return {
    agents: options.agents,
    steps: options.steps,
    ttftMs: options.ttftMs,
    tps: options.tps,
    cpuMs: options.cpuMs,
  };
}

async function run(context: BenchContext): Promise<PartReport> {
  const { options, log } = context;
  const scenario = scenarioOf(options);
  const realProvider = options.provider === 'anthropic';
  const server = realProvider
    ? undefined
    : await startModelProcess(
        loadFlags({
          ttftMs: options.ttftMs,
          tps: options.tps,
          rpm: options.rpm,
          itpm: options.itpm,
          otpm: options.otpm,
          bucketSeconds: options.bucketSeconds,
          acceleration: options.acceleration,
          overload: options.overload,
          jitter: options.jitter,
        }),
      );
  const provider: Partial<ProviderConfig> = {
    ...(server
      ? { baseURL: server.url, model: 'cohort-bench' }
      : { model: options.model ?? DEFAULT_PROVIDER_CONFIG.model }),
    maxRetries: options.maxRetries,
    transport: options.transport,
  };
  const env = childEnv(options);
  const measurements: RunMeasurement[] = [];
  const skipped = new Set<string>();
  const startFailures: string[] = [];
  try {
    for (let runIndex = 0; runIndex < options.runs; runIndex++) {
      for (const concurrency of options.concurrency) {
        for (const engine of rotate(options.engines, runIndex)) {
          if (engine === 'thread-per-child' && concurrency > MAX_THREADS) {
            skipped.add(
              `thread-per-child at concurrency ${concurrency}: the engine runs at most ${MAX_THREADS} threads`,
            );
            continue;
          }
          const job: ConcurrencyJob = {
            kind: 'concurrency',
            engine,
            concurrency,
            scenario,
            provider,
            ...(options.governor ? {} : { governorOff: true }),
            ...(options.tracing && engine === 'cohort' ? { tracing: true } : {}),
            ...(engine === 'cohort' && options.threads !== undefined
              ? { threads: options.threads }
              : {}),
          };
          const modelCpuBefore = processCpuMs(server?.child.pid);
          const measurement = await measureInFreshProcess<ConcurrencyMeasurement>(job, {
            env,
            log,
            startFailures,
          });
          const modelCpuAfter = processCpuMs(server?.child.pid);
          measurement.modelCpuMs =
            modelCpuBefore === undefined || modelCpuAfter === undefined
              ? null
              : modelCpuAfter - modelCpuBefore;
          measurements.push({ ...measurement, run: runIndex });
          const figures = caseFigures(measurement, scenario, realProvider);
          log(
            `bench: concurrency ${concurrency}, ${engine}, run ${runIndex + 1}/${options.runs}: ` +
              `${figures.completed}/${measurement.agents} complete in ${(measurement.makespanMs / 1000).toFixed(2)} s, ` +
              `${figures.agentsPerSecond.toFixed(1)} agents/s, event-loop p99 ${figures.eventLoopP99Ms.toFixed(1)} ms`,
          );
        }
      }
    }
  } finally {
    await server?.stop();
  }

  const { summary, ratios, highestCallsPerSecond } = summariseConcurrency({
    measurements,
    levels: options.concurrency,
    engines: options.engines,
    runs: options.runs,
    scenario,
    realProvider,
  });

  const rows: BenchRow[] = [];
  const addRow = (
    caseName: string,
    metric: string,
    value: number | null | undefined,
    unit: string,
    note?: string,
  ): void => {
    if (value === null || value === undefined || !Number.isFinite(value)) return;
    rows.push({
      part: 'concurrency',
      case: caseName,
      metric,
      value,
      unit,
      ...(note ? { note } : {}),
    });
  };
  for (const item of ratios) {
    const caseName = `concurrency ${item.concurrency}`;
    addRow(
      caseName,
      'event-loop p99, in-process / cohort',
      item.eventLoopP99InProcessOverCohort,
      '×',
    );
    addRow(
      caseName,
      'provider calls/s, cohort / in-process',
      item.callsPerSecondCohortOverInProcess,
      '×',
    );
    addRow(
      caseName,
      'RSS per live agent, thread-per-child / cohort',
      item.rssPerAgentThreadPerChildOverCohort,
      '×',
    );
    addRow(
      caseName,
      'agents/s, cohort / thread-per-child',
      item.agentsPerSecondCohortOverThreadPerChild,
      '×',
    );
    addRow(caseName, 'cpu ms/call, cohort / sdk-loop', item.cpuPerCallCohortOverSdkLoop, '×');
    addRow(caseName, 'efficiency, cohort / sdk-loop', item.efficiencyCohortOverSdkLoop, '×');
  }
  for (const item of summary) {
    addRow(
      `${item.engine} at ${item.concurrency}`,
      'cpu per provider call',
      item.cpuPerCallMs,
      'ms',
    );
  }
  for (const engine of options.engines) {
    addRow(
      'all levels',
      `highest provider calls/s, ${engine}`,
      highestCallsPerSecond[engine],
      'calls/s',
    );
  }
  const ideal = idealAgentMs(scenario);
  const limits = (['rpm', 'itpm', 'otpm', 'acceleration', 'overload'] as const)
    .filter((name) => options[name] > 0)
    .map((name) => `, ${name} ${options[name]}`)
    .join('');
  const load = `ttft ${options.ttftMs} ms, tps ${options.tps || 'unpaced'}, cpu ${options.cpuMs} ms/tool call${limits}`;
  const subtitle = `${scenario.agents} agents × ${scenario.steps} steps; ${realProvider ? `provider anthropic (${provider.model})` : `scripted model: ${load}`}; transport ${options.transport} (sdk-loop: the SDK); governor ${options.governor ? 'on' : 'off'}; tracing ${options.tracing ? 'on' : 'off'}; medians of ${options.runs} run(s)`;
  const points: ChartPoint[] = summary.map((item) => ({
    engine: item.engine,
    concurrency: item.concurrency,
    agentsPerSecond: item.agentsPerSecond,
    eventLoopP99Ms: item.eventLoopP99Ms,
  }));
  const table = [
    `${subtitle}; ideal agent time ${ideal.toFixed(0)} ms`,
    '',
    summaryTable(summary),
    ...(skipped.size > 0 ? ['', ...[...skipped].map((line) => `skipped: ${line}`)] : []),
    ...failureLines(measurements),
    '',
    formatTable(rows),
  ].join('\n');
  return {
    rows,
    table,
    data: {
      scenario,
      transport: options.transport,
      governor: options.governor,
      provider: realProvider
        ? { kind: 'anthropic', model: provider.model }
        : {
            kind: 'scripted',
            load: {
              ttftMs: options.ttftMs,
              tps: options.tps,
              rpm: options.rpm,
              itpm: options.itpm,
              otpm: options.otpm,
              bucketSeconds: options.bucketSeconds,
              acceleration: options.acceleration,
              overload: options.overload,
              jitter: options.jitter,
            },
          },
      idealAgentMs: ideal,
      levels: options.concurrency,
      engines: options.engines,
      runs: options.runs,
      summary,
      ratios,
      highestProviderCallsPerSecond: highestCallsPerSecond,
      skipped: [...skipped],
      startFailures,
      measurements,
    },
    chart: concurrencyChartSpec({ points, engines: options.engines, subtitle }),
  };
}

function summaryTable(summary: CaseSummary[]): string {
  const header = [
    'engine',
    'conc',
    'done',
    'agents/s',
    'calls/s',
    'p50 ms',
    'p95 ms',
    'p99 ms',
    'eff',
    '429',
    '529',
    'eld p50',
    'eld p99',
    'peak MB',
    'MB/agent',
    'cpu ms/call',
    'model ms/call',
    'start ms',
    'tok/agent',
    '$',
  ];
  const cells = summary.map((item) => [
    item.engine,
    String(item.concurrency),
    `${formatCount(item.completed)}/${item.agents}`,
    formatValue(item.agentsPerSecond),
    formatValue(item.providerCallsPerSecond),
    formatValue(item.latencyP50Ms),
    formatValue(item.latencyP95Ms),
    formatValue(item.latencyP99Ms),
    item.efficiency === null ? '—' : item.efficiency.toFixed(3),
    formatCount(item.rateLimited429),
    formatCount(item.overloaded529),
    formatValue(item.eventLoopP50Ms),
    formatValue(item.eventLoopP99Ms),
    formatValue(item.peakRssMB),
    formatValue(item.rssPerLiveAgentMB),
    formatValue(item.cpuPerCallMs),
    formatValue(item.modelCpuPerCallMs),
    formatValue(item.startMs),
    formatValue(item.tokensPerAgent),
    item.costUsd === null ? '—' : item.costUsd.toFixed(4),
  ]);
  return formatGrid(
    header,
    cells,
    Array.from({ length: header.length - 1 }, (_, index) => index + 1),
  );
}

function failureLines(measurements: ConcurrencyMeasurement[]): string[] {
  const lines = measurements
    .filter((item) => item.failureReasons.length > 0)
    .map(
      (item) =>
        `not complete: ${item.engine} at ${item.concurrency}: ${item.failureReasons.join(' | ')}`,
    );
  return lines.length === 0 ? [] : ['', ...lines.slice(0, 10)];
}

/** The `concurrency` part of `npm run bench`. */
export const concurrencyPart: BenchPart = {
  name: 'concurrency',
  description:
    'cohort vs in-process vs thread-per-child vs sdk-loop: throughput, latency, event loop, memory, CPU',
  run,
};
