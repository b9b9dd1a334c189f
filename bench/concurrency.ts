/**
 * The `concurrency` part: cohort, in-process and thread-per-child side by side on one scripted
 * model (its own process), for each concurrency level, each case in a fresh measuring process.
 */
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../src/shared/provider/config.js';
import { type ChartPoint, concurrencyChartSpec } from './chart.js';
import { type EngineName, MAX_THREADS } from './engines.js';
import { measureInFreshProcess } from './fork.js';
import type { ConcurrencyJob, ConcurrencyMeasurement } from './jobs.js';
import { loadFlags, processCpuMs, startModelProcess } from './model-process.js';
import type { BenchOptions } from './options.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from './part.js';
import { idealAgentMs, idealMakespanMs, type Scenario } from './scenario.js';
import { median } from './stats.js';
import { formatCount, formatGrid, formatTable, formatValue } from './table.js';

const MB = 1024 * 1024;

/** The figures of one case (one engine, one level, one run), derived from its measurement. */
export interface CaseFigures {
  completed: number;
  agentsPerSecond: number;
  providerCallsPerSecond: number;
  latencyP50Ms: number;
  latencyP95Ms: number;
  latencyP99Ms: number;
  /** ideal makespan / makespan; null against a real provider (its latency is unknown). */
  efficiency: number | null;
  makespanMs: number;
  rateLimited429: number;
  overloaded529: number;
  eventLoopP50Ms: number;
  eventLoopP99Ms: number;
  peakRssMB: number;
  /** (peak RSS − RSS before the engine started) / most agents live at once. */
  rssPerLiveAgentMB: number;
  maxLive: number;
  startMs: number;
  /** CPU of the measuring process (all its threads) per provider call, ms. */
  cpuPerCallMs: number;
  /** CPU of the scripted model's process per provider call, ms; null when unknown. */
  modelCpuPerCallMs: number | null;
}

/** Medians over the runs of one engine at one level. */
export interface CaseSummary extends CaseFigures {
  engine: EngineName;
  concurrency: number;
  agents: number;
  threads: number;
  runs: number;
  idealMakespanMs: number;
}

/** Side-by-side ratios at one level: computed within each run, then the median over runs. */
export interface LevelRatios {
  concurrency: number;
  /** in-process event-loop p99 / cohort's. */
  eventLoopP99InProcessOverCohort: number | null;
  /** cohort provider calls/s / in-process's. */
  callsPerSecondCohortOverInProcess: number | null;
  /** thread-per-child RSS per live agent / cohort's. */
  rssPerAgentThreadPerChildOverCohort: number | null;
  /** cohort agents/s / thread-per-child's. */
  agentsPerSecondCohortOverThreadPerChild: number | null;
}

export function caseFigures(
  measurement: ConcurrencyMeasurement,
  scenario: Scenario,
  realProvider: boolean,
): CaseFigures {
  const seconds = measurement.makespanMs / 1000;
  return {
    completed: measurement.outcomes.complete,
    agentsPerSecond: measurement.outcomes.complete / seconds,
    providerCallsPerSecond: measurement.providerCalls / seconds,
    latencyP50Ms: measurement.latencyMs.p50,
    latencyP95Ms: measurement.latencyMs.p95,
    latencyP99Ms: measurement.latencyMs.p99,
    efficiency: realProvider
      ? null
      : idealMakespanMs(scenario, measurement.concurrency) / measurement.makespanMs,
    makespanMs: measurement.makespanMs,
    rateLimited429: measurement.rateLimited,
    overloaded529: measurement.overloaded,
    eventLoopP50Ms: measurement.eventLoopDelayMs.p50,
    eventLoopP99Ms: measurement.eventLoopDelayMs.p99,
    peakRssMB: measurement.peakRssBytes / MB,
    rssPerLiveAgentMB:
      Math.max(0, measurement.peakRssBytes - measurement.baselineRssBytes) /
      MB /
      Math.max(1, measurement.maxLive),
    maxLive: measurement.maxLive,
    startMs: measurement.startMs,
    cpuPerCallMs: measurement.processCpuMs / Math.max(1, measurement.providerCalls),
    modelCpuPerCallMs:
      measurement.modelCpuMs === null || measurement.modelCpuMs === undefined
        ? null
        : measurement.modelCpuMs / Math.max(1, measurement.providerCalls),
  };
}

/** The median of each figure over runs (null when any run has none). */
function medianFigures(runs: CaseFigures[]): CaseFigures {
  const result = {} as Record<keyof CaseFigures, number | null>;
  for (const key of Object.keys(runs[0]!) as (keyof CaseFigures)[]) {
    const values = runs.map((figures) => figures[key]);
    result[key] = values.some((value) => value === null) ? null : median(values as number[]);
  }
  return result as unknown as CaseFigures;
}

function ratio(numerator: number | undefined, denominator: number | undefined): number | null {
  if (numerator === undefined || denominator === undefined || denominator <= 0) return null;
  const value = numerator / denominator;
  return Number.isFinite(value) ? value : null;
}

function medianRatio(values: (number | null)[]): number | null {
  const present = values.filter((value): value is number => value !== null);
  return present.length === 0 ? null : median(present);
}

/** The environment of the measuring processes: no credentials when they talk to the local model. */
function childEnv(options: BenchOptions): NodeJS.ProcessEnv {
  if (options.provider === 'anthropic') return process.env;
  const env = { ...process.env };
  delete env.ANTHROPIC_API_KEY;
  delete env.ANTHROPIC_BASE_URL;
  return env;
}

/** The engines in a run's order: rotated each run, so none is always measured first. */
function rotate<T>(items: readonly T[], by: number): T[] {
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
          overload: options.overload,
          jitter: options.jitter,
        }),
      );
  const provider: Partial<ProviderConfig> = server
    ? { baseURL: server.url, model: 'cohort-bench', maxRetries: options.maxRetries }
    : { model: options.model ?? DEFAULT_PROVIDER_CONFIG.model, maxRetries: options.maxRetries };
  const env = childEnv(options);
  const measurements: ConcurrencyMeasurement[] = [];
  const runOf: number[] = [];
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
          measurements.push(measurement);
          runOf.push(runIndex);
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

  const summary: CaseSummary[] = [];
  for (const concurrency of options.concurrency) {
    for (const engine of options.engines) {
      const cases = measurements.filter(
        (item) => item.engine === engine && item.concurrency === concurrency,
      );
      if (cases.length === 0) continue;
      summary.push({
        engine,
        concurrency,
        agents: scenario.agents,
        threads: cases[0]!.threads,
        runs: cases.length,
        idealMakespanMs: idealMakespanMs(scenario, concurrency),
        ...medianFigures(cases.map((item) => caseFigures(item, scenario, realProvider))),
      });
    }
  }

  const figuresOf = (engine: EngineName, concurrency: number, runIndex: number) => {
    const index = measurements.findIndex(
      (item, at) =>
        item.engine === engine && item.concurrency === concurrency && runOf[at] === runIndex,
    );
    return index < 0 ? undefined : caseFigures(measurements[index]!, scenario, realProvider);
  };
  const ratios: LevelRatios[] = options.concurrency.map((concurrency) => {
    const perRun = Array.from({ length: options.runs }, (_, runIndex) => ({
      cohort: figuresOf('cohort', concurrency, runIndex),
      inProcess: figuresOf('in-process', concurrency, runIndex),
      perChild: figuresOf('thread-per-child', concurrency, runIndex),
    }));
    return {
      concurrency,
      eventLoopP99InProcessOverCohort: medianRatio(
        perRun.map((r) => ratio(r.inProcess?.eventLoopP99Ms, r.cohort?.eventLoopP99Ms)),
      ),
      callsPerSecondCohortOverInProcess: medianRatio(
        perRun.map((r) =>
          ratio(r.cohort?.providerCallsPerSecond, r.inProcess?.providerCallsPerSecond),
        ),
      ),
      rssPerAgentThreadPerChildOverCohort: medianRatio(
        perRun.map((r) => ratio(r.perChild?.rssPerLiveAgentMB, r.cohort?.rssPerLiveAgentMB)),
      ),
      agentsPerSecondCohortOverThreadPerChild: medianRatio(
        perRun.map((r) => ratio(r.cohort?.agentsPerSecond, r.perChild?.agentsPerSecond)),
      ),
    };
  });
  const highestCallsPerSecond = Object.fromEntries(
    options.engines.map((engine) => {
      const values = summary
        .filter((item) => item.engine === engine)
        .map((item) => item.providerCallsPerSecond);
      return [engine, values.length === 0 ? null : Math.max(...values)];
    }),
  ) as Partial<Record<EngineName, number | null>>;

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
  const load = `ttft ${options.ttftMs} ms, tps ${options.tps || 'unpaced'}, cpu ${options.cpuMs} ms/tool call${options.rpm ? `, rpm ${options.rpm}` : ''}${options.overload ? `, overload ${options.overload}` : ''}`;
  const subtitle = `${scenario.agents} agents × ${scenario.steps} steps; ${realProvider ? `provider anthropic (${provider.model})` : `scripted model: ${load}`}; medians of ${options.runs} run(s)`;
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
      provider: realProvider
        ? { kind: 'anthropic', model: provider.model }
        : {
            kind: 'scripted',
            load: {
              ttftMs: options.ttftMs,
              tps: options.tps,
              rpm: options.rpm,
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
      measurements: measurements.map((item, index) => ({ run: runOf[index], ...item })),
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
  description: 'cohort vs in-process vs thread-per-child: throughput, latency, event loop, memory',
  run,
};
