/**
 * The figures of the `concurrency` part: per case (engine × level × run), their medians over
 * runs, and side-by-side ratios taken within each run.
 */

import { idealMakespanMs, type Scenario } from '../common/scenario.js';
import { median } from '../common/stats.js';
import type { EngineName } from '../engines/engines.js';
import type { ConcurrencyMeasurement } from '../engines/jobs.js';

/** A measurement and the run (0-based) it belongs to. */
export type RunMeasurement = ConcurrencyMeasurement & { run: number };

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
  /** Input plus output tokens per agent, as the results' `usage` reports them. */
  tokensPerAgent: number;
  /** Dollars of the whole case from the results' `usage.costUsd`; null when no model is priced. */
  costUsd: number | null;
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
  /** cohort CPU per provider call / sdk-loop's: below 1 is ahead of the hand-written loop. */
  cpuPerCallCohortOverSdkLoop: number | null;
  /** cohort efficiency / sdk-loop's: above 1 is ahead of the hand-written loop. */
  efficiencyCohortOverSdkLoop: number | null;
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
    tokensPerAgent:
      (measurement.inputTokens + measurement.outputTokens) / Math.max(1, measurement.agents),
    costUsd: measurement.costUsd,
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

export interface ConcurrencySummary {
  summary: CaseSummary[];
  ratios: LevelRatios[];
  /** Per engine, the highest median calls/s over the levels. */
  highestCallsPerSecond: Partial<Record<EngineName, number | null>>;
}

export function summariseConcurrency(input: {
  measurements: RunMeasurement[];
  levels: number[];
  engines: EngineName[];
  runs: number;
  scenario: Scenario;
  realProvider: boolean;
}): ConcurrencySummary {
  const { measurements, scenario, realProvider } = input;
  const summary: CaseSummary[] = [];
  for (const concurrency of input.levels) {
    for (const engine of input.engines) {
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
  const figuresOf = (engine: EngineName, concurrency: number, run: number) => {
    const found = measurements.find(
      (item) => item.engine === engine && item.concurrency === concurrency && item.run === run,
    );
    return found === undefined ? undefined : caseFigures(found, scenario, realProvider);
  };
  const ratios: LevelRatios[] = input.levels.map((concurrency) => {
    const perRun = Array.from({ length: input.runs }, (_, run) => ({
      cohort: figuresOf('cohort', concurrency, run),
      inProcess: figuresOf('in-process', concurrency, run),
      perChild: figuresOf('thread-per-child', concurrency, run),
      sdkLoop: figuresOf('sdk-loop', concurrency, run),
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
      cpuPerCallCohortOverSdkLoop: medianRatio(
        perRun.map((r) => ratio(r.cohort?.cpuPerCallMs, r.sdkLoop?.cpuPerCallMs)),
      ),
      efficiencyCohortOverSdkLoop: medianRatio(
        perRun.map((r) =>
          ratio(r.cohort?.efficiency ?? undefined, r.sdkLoop?.efficiency ?? undefined),
        ),
      ),
    };
  });
  const highestCallsPerSecond = Object.fromEntries(
    input.engines.map((engine) => {
      const values = summary
        .filter((item) => item.engine === engine)
        .map((item) => item.providerCallsPerSecond);
      return [engine, values.length === 0 ? null : Math.max(...values)];
    }),
  ) as Partial<Record<EngineName, number | null>>;
  return { summary, ratios, highestCallsPerSecond };
}
