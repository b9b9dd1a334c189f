/**
 * The `governor` part's figures, from what the model's process admitted (when, and at which
 * step) and what the measuring process counted: the achieved rate of the binding limit over the
 * steady window, the 429s, the agents, and a one-second time series for the chart.
 */

import { median } from '../common/stats.js';
import type { GovernorMeasurement, ModelReport } from './governor-jobs.js';

/** The scripted model's limits in a case. */
export interface CaseLimits {
  rpm: number;
  itpm: number;
  bucketSeconds: number;
}

export type LimitName = 'rpm' | 'itpm';

export interface CaseFigures {
  /** The scenario (governor-scenarios.ts) the case belongs to. */
  scenario: string;
  case: string;
  concurrency: number;
  run: number;
  agents: number;
  completed: number;
  /** Agents that did not complete, whatever the outcome. */
  failed: number;
  /** First agent started → last agent settled, s. */
  wallSeconds: number;
  /** The case ran into its time cap: the agents still running then were cancelled. */
  capped: boolean;
  /** HTTP requests the model received, 429s and 529s included. */
  requests: number;
  admitted: number;
  rateLimited429: number;
  /** 429s as a percentage of `requests`. */
  rateLimitedPercent: number;
  /** 529s the model answered, at random or past its capacity. */
  overloaded529: number;
  /** 529s as a percentage of `requests`. */
  overloadedPercent: number;
  /** The limit that binds; null when the model had no rate limits. */
  binding: LimitName | null;
  /** Steady window: from when the binding bucket's first burst was spent to the last agent's start, s. */
  windowSeconds: number | null;
  /** When that window started, s after the first agent started. */
  settledAfterSeconds: number | null;
  inputTokensPerMinute: number | null;
  requestsPerMinute: number | null;
  /** The achieved rate of the binding limit as a percentage of it. */
  bindingPercent: number | null;
  /** The governor's window, and the limits it held, when the last agent settled. */
  governorLimit: number | null;
  learnedItpm: number | null;
  learnedRpm: number | null;
  /** CPU of the measuring process (all its threads) per provider call, ms. */
  cpuPerCallMs: number;
}

/** One second of a case: what the model admitted and refused, and the governor then. */
export interface SeriesPoint {
  case: string;
  second: number;
  inputTokensPerMinute: number;
  requests: number;
  refused: number;
  governorLimit?: number;
  inFlight?: number;
  queued?: number;
}

/** Each admission as [epoch ms, input tokens], by the mean input of its step. */
export function admittedTokens(
  report: ModelReport,
  inputTokensByStep: readonly number[],
): [number, number][] {
  const fallback = inputTokensByStep.at(-1) ?? 0;
  return report.admissions.map(([at, turn]) => [at, inputTokensByStep[turn] ?? fallback]);
}

/** Which limit binds: the one that allows fewer requests per minute at this mean request size. */
export function bindingLimit(limits: CaseLimits, meanInputTokens: number): LimitName {
  if (limits.itpm === 0) return 'rpm';
  if (limits.rpm === 0) return 'itpm';
  return limits.rpm <= limits.itpm / Math.max(1, meanInputTokens) ? 'rpm' : 'itpm';
}

/** How close to its lowest level the binding bucket must come for the window to start. */
const SETTLED_FRACTION = 0.005;

/**
 * The model's bucket of one limit, replayed from the admissions: full at the first one (a fresh
 * key's bucket is), refilling continuously at `perMinute` up to `bucketSeconds` of it, each
 * admission taking its amount. `levels[i]` is the level right after admission i.
 */
export function replayBucket(
  amounts: readonly [number, number][],
  perMinute: number,
  bucketSeconds: number,
): { capacity: number; levels: number[] } {
  const capacity = Math.max(1, (perMinute * bucketSeconds) / 60);
  const perMs = perMinute / 60_000;
  const levels: number[] = [];
  let level = capacity;
  let previous = amounts[0]?.[0] ?? 0;
  for (const [at, amount] of amounts) {
    level = Math.min(capacity, level + (at - previous) * perMs) - amount;
    previous = at;
    levels.push(level);
  }
  return { capacity, levels };
}

/**
 * The steady window: it starts once the binding bucket's first burst is spent, when its level
 * first comes within SETTLED_FRACTION of its capacity of the lowest level it reaches before the
 * last agent starts, and it ends when the last agent starts (until then more agents wait than
 * the limit can serve). A governor that keeps a standing reserve in the bucket still admits at
 * the full rate, its level merely settles higher. Undefined when it is under a second long.
 */
export function steadyWindow(
  amounts: readonly [number, number][],
  perMinute: number,
  bucketSeconds: number,
  end: number,
): { from: number; to: number } | undefined {
  const { capacity, levels } = replayBucket(amounts, perMinute, bucketSeconds);
  const before = amounts.findIndex(([at]) => at > end);
  const count = before === -1 ? amounts.length : before;
  if (count === 0) return undefined;
  const lowest = levels.slice(0, count).reduce((low, level) => Math.min(low, level), capacity);
  const settled = levels.findIndex((level) => level <= lowest + SETTLED_FRACTION * capacity);
  const from = amounts[settled]?.[0];
  return from !== undefined && end - from >= 1000 ? { from, to: end } : undefined;
}

/** What was admitted in the window (after its start, up to its end), per minute. */
export function windowRate(
  amounts: readonly [number, number][],
  window: { from: number; to: number },
): number {
  let admitted = 0;
  for (const [at, amount] of amounts) if (at > window.from && at <= window.to) admitted += amount;
  return (admitted * 60_000) / (window.to - window.from);
}

/**
 * The figures of one case. `limits` are the model's rate limits; without them (a scenario with
 * no limits) the steady-window figures are null.
 */
export function caseFigures(options: {
  scenario: string;
  measurement: GovernorMeasurement;
  report: ModelReport;
  limits: CaseLimits | undefined;
  run: number;
}): CaseFigures {
  const { measurement, report, limits } = options;
  const tokens = admittedTokens(report, measurement.inputTokensByStep);
  const total = tokens.reduce((sum, [, amount]) => sum + amount, 0);
  const binding = limits ? bindingLimit(limits, total / Math.max(1, tokens.length)) : null;
  const requests = tokens.map(([at]): [number, number] => [at, 1]);
  const amounts = { itpm: tokens, rpm: requests };
  const window =
    limits && binding
      ? steadyWindow(
          amounts[binding],
          limits[binding],
          limits.bucketSeconds,
          measurement.lastStartAt,
        )
      : undefined;
  const rate = (name: LimitName): number | null =>
    window ? windowRate(amounts[name], window) : null;
  const achieved = { itpm: rate('itpm'), rpm: rate('rpm') };
  const state = measurement.finalState;
  const completed = measurement.outcomes.complete;
  const bindingRate = binding ? achieved[binding] : null;
  const share = (count: number) => (100 * count) / Math.max(1, report.stats.requests);
  return {
    scenario: options.scenario,
    case: measurement.label,
    concurrency: measurement.concurrency,
    run: options.run,
    agents: measurement.agents,
    completed,
    failed: measurement.agents - completed,
    wallSeconds: (measurement.endAt - measurement.firstStartAt) / 1000,
    capped: measurement.capped,
    requests: report.stats.requests,
    admitted: report.admissions.length,
    rateLimited429: report.stats.rateLimited429,
    rateLimitedPercent: share(report.stats.rateLimited429),
    overloaded529: report.stats.overloaded529,
    overloadedPercent: share(report.stats.overloaded529),
    binding,
    windowSeconds: window ? (window.to - window.from) / 1000 : null,
    settledAfterSeconds: window ? (window.from - measurement.firstStartAt) / 1000 : null,
    inputTokensPerMinute: achieved.itpm,
    requestsPerMinute: achieved.rpm,
    bindingPercent:
      bindingRate === null || !limits || !binding ? null : (100 * bindingRate) / limits[binding],
    governorLimit: state?.limit ?? null,
    learnedItpm: state?.inputTokens?.limit ?? null,
    learnedRpm: state?.requests?.limit ?? null,
    cpuPerCallMs: measurement.processCpuMs / Math.max(1, measurement.providerCalls),
  };
}

/** One point per second from the first agent's start to the last one's result. */
export function timeSeries(measurement: GovernorMeasurement, report: ModelReport): SeriesPoint[] {
  const origin = measurement.firstStartAt;
  const seconds = Math.max(1, Math.ceil((measurement.endAt - origin) / 1000));
  const points: SeriesPoint[] = Array.from({ length: seconds }, (_, second) => ({
    case: measurement.label,
    second,
    inputTokensPerMinute: 0,
    requests: 0,
    refused: 0,
  }));
  const at = (ms: number): SeriesPoint | undefined =>
    points[Math.min(seconds - 1, Math.max(0, Math.floor((ms - origin) / 1000)))];
  for (const [ms, tokens] of admittedTokens(report, measurement.inputTokensByStep)) {
    const point = at(ms);
    if (!point) continue;
    point.inputTokensPerMinute += tokens * 60;
    point.requests++;
  }
  for (const [ms, count] of report.refusals) {
    const point = at(ms);
    if (point) point.refused += count;
  }
  for (const sample of measurement.samples) {
    const point = at(sample.at);
    if (!point) continue;
    point.governorLimit = sample.limit;
    point.inFlight = sample.inFlight;
    point.queued = sample.queued;
  }
  return points;
}

const NUMERIC: (keyof CaseFigures)[] = [
  'completed',
  'failed',
  'wallSeconds',
  'requests',
  'admitted',
  'rateLimited429',
  'rateLimitedPercent',
  'overloaded529',
  'overloadedPercent',
  'windowSeconds',
  'settledAfterSeconds',
  'inputTokensPerMinute',
  'requestsPerMinute',
  'bindingPercent',
  'governorLimit',
  'learnedItpm',
  'learnedRpm',
  'cpuPerCallMs',
];

/**
 * Medians over runs of every figure of each (scenario, level, case), in the order first seen; a
 * median is `capped` when any of its runs was.
 */
export function medianFigures(figures: readonly CaseFigures[]): CaseFigures[] {
  const groups = new Map<string, CaseFigures[]>();
  for (const item of figures) {
    const key = `${item.scenario}\u0000${item.concurrency}\u0000${item.case}`;
    groups.set(key, [...(groups.get(key) ?? []), item]);
  }
  return [...groups.values()].map((runs) => {
    const merged: Record<string, unknown> = {
      ...runs[0],
      run: -1,
      capped: runs.some((item) => item.capped),
    };
    for (const name of NUMERIC) {
      const values = runs.map((item) => item[name]).filter((value) => typeof value === 'number');
      merged[name] = values.length === 0 ? null : median(values as number[]);
    }
    return merged as unknown as CaseFigures;
  });
}
