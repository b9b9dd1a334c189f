/**
 * The figures of the `peers` part: per engine, the median of each figure over the rounds and
 * its spread (lowest and highest round), and each peer against cohort, the ratio taken within
 * each round and then its median.
 */
import type { BenchRow } from '../common/part.js';
import type { Scenario } from '../common/scenario.js';
import { median } from '../common/stats.js';
import { formatCount, formatGrid, formatValue } from '../common/table.js';
import { type CaseFigures, caseFigures } from '../concurrency/concurrency-summary.js';
import type { EngineName } from '../engines/engines.js';
import type { ConcurrencyMeasurement } from '../engines/jobs.js';

/** A measurement and the round (0-based) it belongs to. */
export type RoundMeasurement = ConcurrencyMeasurement & { round: number };

/** A figure over the rounds: its median and the lowest and highest round. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

/** The figures the part reports, by the name they carry in the JSON report. */
export const PEER_FIGURES = [
  'cpuPerCallMs',
  'efficiency',
  'wallSeconds',
  'agentsPerSecond',
  'latencyP50Ms',
  'latencyP99Ms',
  'eventLoopP99Ms',
  'peakRssMB',
  'modelCpuPerCallMs',
  'tokensPerAgent',
  'startMs',
] as const;
export type PeerFigure = (typeof PEER_FIGURES)[number];

export interface PeerSummary {
  engine: EngineName;
  rounds: number;
  /** Agents that completed, per round (every round, in order). */
  completed: number[];
  agents: number;
  providerCalls: number[];
  figures: Record<PeerFigure, Spread | null>;
}

/** A peer against cohort, the median over rounds of the ratio within each round. */
export interface PeerRatio {
  engine: EngineName;
  /** The peer's CPU per provider call / cohort's: above 1, cohort spends less. */
  cpuPerCallOverCohort: number | null;
  /** cohort's efficiency / the peer's: above 1, cohort is nearer the ideal. */
  cohortEfficiencyOverPeer: number | null;
  /** The peer's wall time / cohort's: above 1, cohort finishes first. */
  wallOverCohort: number | null;
}

function figuresOf(measurement: ConcurrencyMeasurement, scenario: Scenario) {
  const figures: CaseFigures = caseFigures(measurement, scenario, false);
  const values: Record<PeerFigure, number | null> = {
    cpuPerCallMs: figures.cpuPerCallMs,
    efficiency: figures.efficiency,
    wallSeconds: figures.makespanMs / 1000,
    agentsPerSecond: figures.agentsPerSecond,
    latencyP50Ms: figures.latencyP50Ms,
    latencyP99Ms: figures.latencyP99Ms,
    eventLoopP99Ms: figures.eventLoopP99Ms,
    peakRssMB: figures.peakRssMB,
    modelCpuPerCallMs: figures.modelCpuPerCallMs,
    tokensPerAgent: figures.tokensPerAgent,
    startMs: figures.startMs,
  };
  return values;
}

function spreadOf(values: (number | null)[]): Spread | null {
  if (values.length === 0 || values.some((value) => value === null)) return null;
  const present = values as number[];
  return { median: median(present), min: Math.min(...present), max: Math.max(...present) };
}

function ratio(numerator: number | null | undefined, denominator: number | null | undefined) {
  if (numerator === null || numerator === undefined) return null;
  if (denominator === null || denominator === undefined || denominator <= 0) return null;
  const value = numerator / denominator;
  return Number.isFinite(value) ? value : null;
}

function medianRatio(values: (number | null)[]): number | null {
  const present = values.filter((value): value is number => value !== null);
  return present.length === 0 ? null : median(present);
}

export function summarisePeers(input: {
  measurements: RoundMeasurement[];
  engines: readonly EngineName[];
  rounds: number;
  scenario: Scenario;
}): { summary: PeerSummary[]; ratios: PeerRatio[] } {
  const { measurements, scenario } = input;
  const summary: PeerSummary[] = [];
  for (const engine of input.engines) {
    const cases = measurements
      .filter((item) => item.engine === engine)
      .sort((a, b) => a.round - b.round);
    if (cases.length === 0) continue;
    const perRound = cases.map((item) => figuresOf(item, scenario));
    const figures = Object.fromEntries(
      PEER_FIGURES.map((name) => [name, spreadOf(perRound.map((values) => values[name]))]),
    ) as Record<PeerFigure, Spread | null>;
    summary.push({
      engine,
      rounds: cases.length,
      completed: cases.map((item) => item.outcomes.complete),
      agents: scenario.agents,
      providerCalls: cases.map((item) => item.providerCalls),
      figures,
    });
  }
  const inRound = (engine: EngineName, round: number) => {
    const found = measurements.find((item) => item.engine === engine && item.round === round);
    return found === undefined ? undefined : figuresOf(found, scenario);
  };
  const rounds = Array.from({ length: input.rounds }, (_, round) => round);
  const ratios: PeerRatio[] = input.engines
    .filter((engine) => engine !== 'cohort')
    .map((engine) => {
      const pairs = rounds.map((round) => ({
        peer: inRound(engine, round),
        cohort: inRound('cohort', round),
      }));
      return {
        engine,
        cpuPerCallOverCohort: medianRatio(
          pairs.map(({ peer, cohort }) => ratio(peer?.cpuPerCallMs, cohort?.cpuPerCallMs)),
        ),
        cohortEfficiencyOverPeer: medianRatio(
          pairs.map(({ peer, cohort }) => ratio(cohort?.efficiency, peer?.efficiency)),
        ),
        wallOverCohort: medianRatio(
          pairs.map(({ peer, cohort }) => ratio(peer?.wallSeconds, cohort?.wallSeconds)),
        ),
      };
    });
  return { summary, ratios };
}

/** `1.06 (0.99–1.07)`: the median, then the lowest and highest round when they differ. */
export function formatSpread(spread: Spread | null, digits?: number): string {
  if (spread === null) return '—';
  const format = (value: number) =>
    digits === undefined ? formatValue(value) : value.toFixed(digits);
  const middle = format(spread.median);
  const low = format(spread.min);
  const high = format(spread.max);
  return low === high ? middle : `${middle} (${low}–${high})`;
}

/** The part's table: one line per engine, medians with their spread over the rounds. */
export function peersGrid(summary: PeerSummary[], ratios: PeerRatio[]): string {
  const header = [
    'engine',
    'done',
    'cpu ms/call',
    'eff',
    'wall s',
    'agents/s',
    'p50 ms',
    'p99 ms',
    'eld p99',
    'peak MB',
    'model ms/call',
    'tok/agent',
    'start ms',
    'cpu ÷ cohort',
    'cohort eff ÷',
  ];
  const cells = summary.map((item) => {
    const { figures } = item;
    const against = ratios.find((entry) => entry.engine === item.engine);
    return [
      item.engine,
      `${formatCount(median(item.completed))}/${item.agents}`,
      formatSpread(figures.cpuPerCallMs),
      formatSpread(figures.efficiency, 3),
      formatSpread(figures.wallSeconds),
      formatValue(figures.agentsPerSecond?.median),
      formatValue(figures.latencyP50Ms?.median),
      formatValue(figures.latencyP99Ms?.median),
      formatValue(figures.eventLoopP99Ms?.median),
      formatValue(figures.peakRssMB?.median),
      formatValue(figures.modelCpuPerCallMs?.median),
      formatValue(figures.tokensPerAgent?.median),
      formatValue(figures.startMs?.median),
      against === undefined ? '—' : formatValue(against.cpuPerCallOverCohort),
      against === undefined ? '—' : formatValue(against.cohortEfficiencyOverPeer),
    ];
  });
  return formatGrid(
    header,
    cells,
    Array.from({ length: header.length - 1 }, (_, index) => index + 1),
  );
}

/** The part's rows: per engine its three headline figures, then each peer against cohort. */
export function peersRows(summary: PeerSummary[], ratios: PeerRatio[]): BenchRow[] {
  const rows: BenchRow[] = [];
  const add = (
    caseName: string,
    metric: string,
    value: number | null | undefined,
    unit: string,
  ) => {
    if (value === null || value === undefined || !Number.isFinite(value)) return;
    rows.push({ part: 'peers', case: caseName, metric, value, unit });
  };
  for (const item of summary) {
    add(item.engine, 'cpu per provider call', item.figures.cpuPerCallMs?.median, 'ms');
    add(item.engine, 'efficiency', item.figures.efficiency?.median, '');
    add(item.engine, 'wall', item.figures.wallSeconds?.median, 's');
  }
  for (const item of ratios) {
    add(item.engine, `cpu ms/call, ${item.engine} / cohort`, item.cpuPerCallOverCohort, '×');
    add(item.engine, `efficiency, cohort / ${item.engine}`, item.cohortEfficiencyOverPeer, '×');
    add(item.engine, `wall, ${item.engine} / cohort`, item.wallOverCohort, '×');
  }
  return rows;
}
