import type { Governor } from '../../shared/governor/governor.js';
import type { GovernorState } from '../../shared/governor/types.js';
import type { AgentBook, AgentRow, Totals } from './agent-book.js';
import type { FailureGroup } from './failure-book.js';
import type { RateSeries, SeriesPoint } from './series.js';

/** The command a dashboard serves: what its page's header says. */
export type DashboardCommand = 'run' | 'batch' | 'worker' | 'library';

/** What the page is told of the run itself. */
export interface RunInfo {
  command: DashboardCommand;
  logDir?: string;
  startedAt: number;
  /** The page offers cancel buttons. */
  cancel: boolean;
}

/** The per-minute limits the chart draws, summed over the governor's keys that know them. */
export interface ChartLimits {
  rpm?: number;
  itpm?: number;
  otpm?: number;
}

/** What changes between deltas besides the rows: sent whole each time. */
interface Summary {
  now: number;
  governor: GovernorState[];
  totals: Totals;
  failures: FailureGroup[];
  series: SeriesPoint[];
  limits: ChartLimits;
}

export interface DashboardState extends Summary {
  version: 1;
  run: RunInfo;
  agents: AgentRow[];
}

/** What a snapshot is made from. */
export interface StateSources {
  book: AgentBook;
  series: RateSeries;
  /** Read at each snapshot: a worker's governor exists only once the worker has started. */
  governor: () => Governor | undefined;
  run: RunInfo;
}

export function stateOf(sources: StateSources, now: number): DashboardState {
  return {
    version: 1,
    run: sources.run,
    agents: sources.book.rows(),
    now,
    ...summaryOf(sources),
  };
}

/**
 * A delta's JSON text: the rows changed since the last (taken from the book), the ids dropped,
 * and `summary`, already serialised (the caller compares it with the last one it sent).
 */
export function deltaText(sources: StateSources, summary: string, now: number): string {
  const { rows, removed } = sources.book.takeChanged();
  return `{"now":${now},"agents":${JSON.stringify(rows)},"removed":${JSON.stringify(removed)},${summary.slice(1)}`;
}

/** The parts of a snapshot besides the rows and the time: sent whole in each delta. */
export function summaryOf(sources: StateSources): Omit<Summary, 'now'> {
  const governor = sources.governor()?.states() ?? [];
  return {
    governor,
    totals: sources.book.totals,
    failures: sources.book.failures.groups(),
    series: sources.series.points(),
    limits: limitsOf(governor),
  };
}

function limitsOf(states: readonly GovernorState[]): ChartLimits {
  const limits: ChartLimits = {};
  for (const state of states) {
    if (state.requests) limits.rpm = (limits.rpm ?? 0) + state.requests.limit;
    if (state.inputTokens) limits.itpm = (limits.itpm ?? 0) + state.inputTokens.limit;
    if (state.outputTokens) limits.otpm = (limits.otpm ?? 0) + state.outputTokens.limit;
  }
  return limits;
}

/** Calls admitted over every key: counted as they are made, where results count at the end. */
export function admittedCalls(governor: Governor | undefined): number | undefined {
  if (!governor) return undefined;
  let calls = 0;
  for (const state of governor.states()) calls += state.admitted;
  return calls;
}
