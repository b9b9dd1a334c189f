/**
 * The `governor` part's report: the scenarios side by side (the governor on and off, the ratio,
 * the target), the `rate-limit` scenario's detail and chart, the `unreachable` runs, as a table,
 * rows and JSON data.
 */
import type { BenchOptions } from '../common/options.js';
import type { BenchRow, PartReport } from '../common/part.js';
import { median } from '../common/stats.js';
import { formatCount, formatGrid, formatValue } from '../common/table.js';
import { governorChartSpec } from './governor-chart.js';
import type { GovernorMeasurement, ModelReport } from './governor-jobs.js';
import {
  describeTarget,
  type EngineScenario,
  GOVERNOR_OFF,
  GOVERNOR_ON,
  type GovernorScenarioName,
  UNREACHABLE_SCENARIO,
  type Workload,
} from './governor-scenarios.js';
import {
  type CaseFigures,
  type CaseLimits,
  medianFigures,
  type SeriesPoint,
} from './governor-summary.js';
import {
  summariseUnreachable,
  type UnreachableRun,
  type UnreachableSummary,
} from './governor-unreachable.js';

/** What the part runs, from its flags. */
export interface Settings {
  scenarios: GovernorScenarioName[];
  /** A scenario's workload, with the flags given (`--agents`, `--steps`, `--ttft-ms`) over it. */
  workload(own: Workload): Workload;
  /** The concurrency levels a scenario runs at: `--concurrency`, else its own. */
  levels(own: Workload): number[];
  /** The `rate-limit` model's bucket seconds. */
  bucketSeconds: number;
  options: BenchOptions;
}

/** One engine case of one round. */
export interface GovernorRun {
  measurement: GovernorMeasurement;
  report: ModelReport;
  figures: CaseFigures;
  /** Second by second, for the `rate-limit` scenario's chart; empty for the others. */
  series: SeriesPoint[];
}

/** A scenario at one level: the governor's medians against those without it. */
export interface Comparison {
  scenario: GovernorScenarioName;
  concurrency: number;
  steps: number;
  on: CaseFigures;
  off: CaseFigures;
  /**
   * Wall time with the governor / without it: the median of each round's ratio (the two cases of
   * a round run back to back, so the machine's load moves both alike).
   */
  wallRatio: number;
  target: string;
  /** Whether the target was met; null when the scenario has none. */
  met: boolean | null;
  /** What was measured against the target, in words. */
  measured: string;
}

function compare(
  scenario: EngineScenario,
  steps: number,
  on: CaseFigures,
  off: CaseFigures,
  wallRatio: number,
): Comparison {
  const { target } = scenario;
  let met: boolean | null = null;
  let measured = `${wallRatio.toFixed(2)}×`;
  if (target.kind === 'ratio') {
    met = !on.capped && wallRatio <= target.maxRatio && (!target.allComplete || on.failed === 0);
    measured = `${wallRatio.toFixed(2)}×, ${formatCount(on.failed)} failed`;
  } else if (target.kind === 'binding') {
    met =
      on.bindingPercent !== null &&
      on.bindingPercent >= target.bindingPercent &&
      on.rateLimitedPercent <= target.rateLimitedPercent &&
      on.failed <= target.failed;
    const rate =
      on.bindingPercent === null ? 'no steady window' : `${on.bindingPercent.toFixed(1)}%`;
    measured = `${rate}, ${on.rateLimitedPercent.toFixed(2)}% 429, ${formatCount(on.failed)} failed`;
  }
  return {
    scenario: scenario.name,
    concurrency: on.concurrency,
    steps,
    on,
    off,
    wallRatio,
    target: describeTarget(target),
    met,
    measured,
  };
}

/** The median over rounds of each round's wall time with the governor / without it. */
function pairedRatio(
  figures: readonly CaseFigures[],
  scenario: string,
  concurrency: number,
): number | undefined {
  const of = (label: string) =>
    figures.filter(
      (item) =>
        item.scenario === scenario && item.case === label && item.concurrency === concurrency,
    );
  const off = of(GOVERNOR_OFF.label);
  const ratios = of(GOVERNOR_ON.label).flatMap((on) => {
    const pair = off.find((item) => item.run === on.run);
    return pair ? [on.wallSeconds / Math.max(1e-9, pair.wallSeconds)] : [];
  });
  return ratios.length === 0 ? undefined : median(ratios);
}

function comparisons(
  settings: Settings,
  scenarios: EngineScenario[],
  summary: CaseFigures[],
  figures: readonly CaseFigures[],
): Comparison[] {
  const found = (scenario: string, label: string, concurrency: number) =>
    summary.find(
      (item) =>
        item.scenario === scenario && item.case === label && item.concurrency === concurrency,
    );
  return scenarios.flatMap((scenario) => {
    const levels = [
      ...new Set(
        summary.filter((item) => item.scenario === scenario.name).map((item) => item.concurrency),
      ),
    ];
    return levels.flatMap((level) => {
      const on = found(scenario.name, GOVERNOR_ON.label, level);
      const off = found(scenario.name, GOVERNOR_OFF.label, level);
      const { steps } = settings.workload(scenario.workload);
      if (!on || !off) return [];
      const ratio =
        pairedRatio(figures, scenario.name, level) ??
        on.wallSeconds / Math.max(1e-9, off.wallSeconds);
      return [compare(scenario, steps, on, off, ratio)];
    });
  });
}

const verdict = (met: boolean | null) => (met === null ? '—' : met ? 'met' : 'NOT met');

/** Wall seconds, marked "≥" for a case that ran into its cap. */
const wall = (item: CaseFigures) => `${item.capped ? '≥ ' : ''}${formatValue(item.wallSeconds)}`;

const pair = (on: number, off: number) => `${formatCount(on)} / ${formatCount(off)}`;

function comparisonTable(items: Comparison[]): string {
  const header = [
    'scenario',
    'tasks × steps',
    'conc',
    'wall on s',
    'wall off s',
    'on/off',
    'requests on / off',
    '429 on / off',
    '529 on / off',
    'failed on / off',
    'target',
    'measured',
    'result',
  ];
  const cells = items.map(({ on, off, ...item }) => [
    item.scenario,
    `${formatCount(on.agents)} × ${item.steps}`,
    String(item.concurrency),
    wall(on),
    wall(off),
    item.wallRatio.toFixed(2),
    pair(on.requests, off.requests),
    pair(on.rateLimited429, off.rateLimited429),
    pair(on.overloaded529, off.overloaded529),
    pair(on.failed, off.failed),
    item.target,
    item.measured,
    verdict(item.met),
  ]);
  return formatGrid(header, cells, [2, 3, 4, 5, 6, 7, 8, 9]);
}

/** The `rate-limit` scenario's own table: the rate achieved against the binding limit. */
function rateLimitTable(summary: CaseFigures[]): string {
  const header = [
    'case',
    'conc',
    'done',
    'failed',
    'wall s',
    'requests',
    '429',
    '429 %',
    'window s',
    'ITPM achieved',
    'RPM achieved',
    'binding %',
    'gov window',
    'learned ITPM',
    'learned RPM',
    'cpu ms/call',
  ];
  const cells = summary.map((item) => [
    item.case,
    String(item.concurrency),
    `${formatCount(item.completed)}/${item.agents}`,
    formatCount(item.failed),
    formatValue(item.wallSeconds),
    formatCount(item.requests),
    formatCount(item.rateLimited429),
    formatValue(item.rateLimitedPercent),
    formatValue(item.windowSeconds),
    formatValue(item.inputTokensPerMinute),
    formatValue(item.requestsPerMinute),
    item.bindingPercent === null ? '—' : `${item.bindingPercent.toFixed(1)} (${item.binding})`,
    item.governorLimit === null ? '—' : formatCount(item.governorLimit),
    formatValue(item.learnedItpm),
    formatValue(item.learnedRpm),
    formatValue(item.cpuPerCallMs),
  ]);
  return formatGrid(
    header,
    cells,
    Array.from({ length: header.length - 1 }, (_, index) => index + 1),
  );
}

/** Issue 13's targets, checked for the governor that learns from the headers. */
function acceptanceLines(items: Comparison[]): string[] {
  return items
    .filter((item) => item.scenario === 'rate-limit')
    .map(
      (item) =>
        `target at ${item.concurrency} (governor): ${item.target}; measured ${item.measured}: ${verdict(item.met)}`,
    );
}

function unreachableMet(item: UnreachableSummary): boolean {
  const { target } = UNREACHABLE_SCENARIO;
  return !item.timedOut && item.seconds <= target.seconds && item.errorMessages <= target.messages;
}

function unreachableTable(summary: UnreachableSummary[]): string {
  const header = [
    'case',
    'tasks',
    'conc',
    'exit after s',
    'exit codes',
    'result lines',
    'requests',
    'distinct messages',
    'target',
    'result',
  ];
  const cells = summary.map((item) => [
    item.case,
    formatCount(item.tasks),
    formatCount(item.concurrency),
    item.timedOut ? `> ${item.capSeconds}` : formatValue(item.seconds),
    item.exits.join(', '),
    formatCount(item.resultLines),
    formatCount(item.requests),
    formatCount(item.errorMessages),
    describeTarget(UNREACHABLE_SCENARIO.target),
    verdict(unreachableMet(item)),
  ]);
  const messages = summary.flatMap((item) =>
    item.messages.slice(0, 3).map((message) => `  ${item.case}: ${message.slice(0, 160)}`),
  );
  return [
    formatGrid(header, cells, [1, 2, 3, 5, 6, 7]),
    ...(messages.length > 0 ? ['', 'messages (first run, numbers as N):', ...messages] : []),
  ].join('\n');
}

function rowsOf(summary: CaseFigures[], items: Comparison[], unreachable: UnreachableSummary[]) {
  const rows: BenchRow[] = [];
  const add = (name: string, metric: string, value: number | null, unit: string, note?: string) => {
    if (value === null || !Number.isFinite(value)) return;
    rows.push({ part: 'governor', case: name, metric, value, unit, ...(note ? { note } : {}) });
  };
  for (const item of summary) {
    const name = `${item.scenario}: ${item.case} at ${item.concurrency}`;
    if (item.binding !== null) {
      add(
        name,
        `${item.binding.toUpperCase()} achieved, steady window`,
        item.bindingPercent,
        '% of limit',
      );
      add(name, 'input tokens admitted, steady window', item.inputTokensPerMinute, 'tokens/min');
      add(name, 'requests admitted, steady window', item.requestsPerMinute, 'requests/min');
    }
    add(name, 'requests', item.requests, 'requests');
    add(name, 'requests answered 429', item.rateLimited429, 'requests');
    add(name, 'requests answered 429, share', item.rateLimitedPercent, '% of requests');
    add(name, 'requests answered 529', item.overloaded529, 'requests');
    add(name, 'completed agents', item.completed, 'agents');
    add(name, 'failed agents', item.failed, 'agents');
    add(name, 'wall time', item.wallSeconds, 's', item.capped ? 'capped' : undefined);
    add(name, 'cpu per provider call', item.cpuPerCallMs, 'ms');
  }
  for (const item of items) {
    add(
      `${item.scenario} at ${item.concurrency}`,
      'wall time, governor / no governor',
      item.wallRatio,
      '×',
      `target ${item.target}: ${verdict(item.met)}`,
    );
  }
  for (const item of unreachable) {
    add(
      `unreachable: ${item.case}`,
      'time to exit',
      item.seconds,
      's',
      item.timedOut ? `stopped at the ${item.capSeconds} s cap` : undefined,
    );
    add(`unreachable: ${item.case}`, 'distinct error messages', item.errorMessages, 'messages');
  }
  return rows;
}

function failureLines(runs: GovernorRun[]): string[] {
  const lines = runs
    .filter(({ measurement }) => measurement.failureReasons.length > 0)
    .map(
      ({ measurement, figures }) =>
        `not complete: ${figures.scenario}, ${measurement.label} (round ${figures.run + 1}): ${measurement.failureReasons.join(' | ')}`,
    );
  return lines.length === 0 ? [] : ['', ...lines.slice(0, 10)];
}

function describeWorkload(settings: Settings, scenario: EngineScenario): string {
  const workload = settings.workload(scenario.workload);
  const model = Object.entries(scenario.model)
    .filter(([, value]) => value !== undefined && value !== 0)
    .map(([name, value]) => `${name} ${value}`)
    .join(', ');
  return (
    `${scenario.name}: ${scenario.summary}; ${workload.agents} tasks × ${workload.steps} step(s) at ` +
    `${settings.levels(scenario.workload).join(', ')}, ttft ${workload.ttftMs} ms${model ? `; model ${model}` : ''}`
  );
}

export function governorReport(input: {
  settings: Settings;
  scenarios: EngineScenario[];
  limits: CaseLimits | undefined;
  probed: number[];
  runs: GovernorRun[];
  unreachable: UnreachableRun[];
  startFailures: string[];
}): PartReport {
  const { settings, limits, runs } = input;
  const { options } = settings;
  const figures = runs.map((item) => item.figures);
  const summary = medianFigures(figures);
  const items = comparisons(settings, input.scenarios, summary, figures);
  const unreachable = summariseUnreachable(input.unreachable);
  const rateLimit = summary.filter((item) => item.scenario === 'rate-limit');
  const lines = [
    `transport ${options.transport}; medians of ${options.runs} round(s), the cases alternating within each; on/off is the median of each round's ratio`,
    ...input.scenarios.map((scenario) => `  ${describeWorkload(settings, scenario)}`),
    ...(unreachable.length > 0
      ? [
          `  unreachable: ${UNREACHABLE_SCENARIO.summary}; cohort batch, stopped at ${UNREACHABLE_SCENARIO.capSeconds} s`,
        ]
      : []),
  ];
  const sections: string[] = [lines.join('\n')];
  if (items.length > 0) sections.push(comparisonTable(items));
  if (rateLimit.length > 0 && limits) {
    sections.push(
      [
        `rate-limit: ITPM ${limits.itpm}, RPM ${limits.rpm}, ${limits.bucketSeconds} s buckets`,
        rateLimitTable(rateLimit),
        '',
        ...acceptanceLines(items),
      ].join('\n'),
    );
  }
  if (unreachable.length > 0) sections.push(unreachableTable(unreachable));
  const table = [sections.join('\n\n'), ...failureLines(runs)].join('\n');
  const series = runs.flatMap((item) =>
    item.series.map((point) => ({
      ...point,
      run: item.figures.run,
      concurrency: item.figures.concurrency,
    })),
  );
  const chartLevel = Math.max(0, ...rateLimit.map((item) => item.concurrency));
  const binding = rateLimit[0]?.binding ?? 'itpm';
  const charted = input.scenarios.find((scenario) => scenario.name === 'rate-limit');
  const workload =
    charted && rateLimit.length > 0 ? settings.workload(charted.workload) : undefined;
  return {
    rows: rowsOf(summary, items, unreachable),
    table,
    data: {
      transport: options.transport,
      runs: options.runs,
      scenarios: input.scenarios.map((scenario) => ({
        name: scenario.name,
        summary: scenario.summary,
        workload: settings.workload(scenario.workload),
        levels: settings.levels(scenario.workload),
        model: scenario.model,
        target: scenario.target,
      })),
      limits: limits ?? null,
      probeInputTokensByStep: input.probed,
      summary,
      comparisons: items.map(({ on, off, ...item }) => item),
      figures,
      series,
      measurements: runs.map(({ measurement, report, figures: measured }) => ({
        scenario: measured.scenario,
        run: measured.run,
        measurement,
        report,
      })),
      unreachable: { summary: unreachable, runs: input.unreachable },
      startFailures: input.startFailures,
    },
    ...(limits && workload
      ? {
          chart: governorChartSpec({
            points: series.filter((point) => point.run === 0 && point.concurrency === chartLevel),
            cases: rateLimit
              .filter((item) => item.concurrency === chartLevel)
              .map((item) => item.case),
            binding,
            limit: limits[binding],
            subtitle:
              `rate-limit: ${workload.agents} agents × ${workload.steps} steps; scripted model: ttft ${workload.ttftMs} ms, ` +
              `ITPM ${limits.itpm}, RPM ${limits.rpm}, ${limits.bucketSeconds} s buckets; transport ${options.transport}; ` +
              `concurrency ${chartLevel}, run 1`,
          }),
        }
      : {}),
  };
}
