/**
 * The `governor` part: many agents against a scripted model whose input-token limit binds, with
 * the rate-limit governor learning the limits from the headers, with it told the limits, and
 * with it off, side by side. Each case meets a fresh model process (full buckets, its own
 * record of admissions) and runs in a fresh measuring process.
 */
import type { GovernorOptions } from '../../src/shared/governor/types.js';
import type { BenchOptions } from '../common/options.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from '../common/part.js';
import type { Scenario } from '../common/scenario.js';
import { formatCount, formatGrid, formatValue } from '../common/table.js';
import { localModelEnv, measureInFreshProcess } from '../engines/fork.js';
import { governorChartSpec } from './governor-chart.js';
import type { GovernorJob, GovernorMeasurement, ModelReport } from './governor-jobs.js';
import { startGovernorModel } from './governor-model.js';
import {
  type CaseFigures,
  type CaseLimits,
  caseFigures,
  medianFigures,
  type SeriesPoint,
  timeSeries,
} from './governor-summary.js';

/** The scenario: what the part runs when the flags do not say otherwise. */
const DEFAULTS = { agents: 1000, steps: 3, concurrency: 200, ttftMs: 200, bucketSeconds: 10 };
/** How long the default input-token limit makes the run bind, beyond the bucket's first burst. */
const BOUND_SECONDS = 30;
/** The default request limit: this many times the request rate the input-token limit allows. */
const RPM_HEADROOM = 1.5;

/** The acceptance targets of issue 13, for the governor learning from headers. */
export const TARGETS = { bindingPercent: 95, rateLimitedPercent: 1, failed: 0 };

interface Case {
  label: string;
  governor(limits: CaseLimits): GovernorOptions;
}

const CASES: Case[] = [
  { label: 'governor', governor: () => ({}) },
  {
    label: 'governor, told the limits',
    governor: (limits) => ({ rpm: limits.rpm, itpm: limits.itpm }),
  },
  { label: 'no governor', governor: () => ({ enabled: false }) },
];

interface Settings {
  scenario: Scenario;
  levels: number[];
  bucketSeconds: number;
  options: BenchOptions;
}

function settingsOf(options: BenchOptions): Settings {
  const given = (flag: string) => options.given.includes(flag);
  return {
    scenario: {
      agents: given('agents') ? options.agents : DEFAULTS.agents,
      steps: given('steps') ? options.steps : DEFAULTS.steps,
      ttftMs: given('ttft-ms') ? options.ttftMs : DEFAULTS.ttftMs,
      tps: options.tps,
      cpuMs: options.cpuMs,
    },
    levels: given('concurrency') ? options.concurrency : [DEFAULTS.concurrency],
    bucketSeconds: given('bucket-seconds') ? options.bucketSeconds : DEFAULTS.bucketSeconds,
    options,
  };
}

interface CaseRun {
  measurement: GovernorMeasurement;
  report: ModelReport;
}

/** One case: a fresh model with `limits`, a fresh measuring process running the agents. */
async function runCase(
  settings: Settings,
  job: Omit<GovernorJob, 'kind' | 'provider' | 'scenario' | 'threads'>,
  limits: CaseLimits | undefined,
  context: BenchContext & { startFailures: string[] },
): Promise<CaseRun> {
  const { options } = settings;
  const model = await startGovernorModel({
    ttftMs: settings.scenario.ttftMs,
    tokensPerSecond: options.tps,
    jitter: options.jitter,
    overloadProbability: options.overload,
    ...(limits
      ? {
          rpm: limits.rpm,
          itpm: limits.itpm,
          otpm: options.otpm,
          bucketSeconds: limits.bucketSeconds,
          acceleration: options.acceleration,
        }
      : {}),
  });
  try {
    const measurement = await measureInFreshProcess<GovernorMeasurement>(
      {
        kind: 'governor',
        ...job,
        scenario: settings.scenario,
        provider: {
          baseURL: model.url,
          model: 'cohort-bench',
          maxRetries: options.maxRetries,
          transport: options.transport,
        },
        threads: options.threads,
      },
      { env: localModelEnv(), log: context.log, startFailures: context.startFailures },
    );
    return { measurement, report: await model.report() };
  } finally {
    await model.stop();
  }
}

const roundUp = (value: number, step: number) => Math.max(step, Math.ceil(value / step) * step);

/**
 * The model's limits. Unless given, the input-token limit is set from a probe agent's input so
 * that the run binds for about BOUND_SECONDS after the bucket's first burst, and the request
 * limit leaves the input-token limit binding, with RPM_HEADROOM to spare.
 */
function limitsOf(settings: Settings, inputTokensByStep: number[]): CaseLimits {
  const { options, scenario, bucketSeconds } = settings;
  const perAgent = inputTokensByStep.reduce((sum, tokens) => sum + tokens, 0);
  const perRequest = perAgent / Math.max(1, inputTokensByStep.length);
  const itpm =
    options.itpm > 0
      ? options.itpm
      : roundUp((scenario.agents * perAgent * 60) / (BOUND_SECONDS + bucketSeconds), 1000);
  const rpm = options.rpm > 0 ? options.rpm : roundUp((RPM_HEADROOM * itpm) / perRequest, 100);
  return { rpm, itpm, bucketSeconds };
}

async function probe(settings: Settings, context: BenchContext & { startFailures: string[] }) {
  const probeSettings = { ...settings, scenario: { ...settings.scenario, agents: 1, ttftMs: 0 } };
  const { measurement } = await runCase(
    probeSettings,
    { label: 'probe', governor: { enabled: false }, concurrency: 1 },
    undefined,
    context,
  );
  if (measurement.outcomes.complete !== 1 || measurement.inputTokensByStep.length === 0) {
    throw new Error(
      `Expected the probe agent to complete with its input tokens reported, got ${JSON.stringify(measurement.outcomes)}: ${measurement.failureReasons.join(' | ')}`,
    );
  }
  return measurement.inputTokensByStep;
}

/** The cases in a run's order: rotated each run, so none is always measured first. */
function rotated(runIndex: number): Case[] {
  const shift = runIndex % CASES.length;
  return [...CASES.slice(shift), ...CASES.slice(0, shift)];
}

async function run(context: BenchContext): Promise<PartReport> {
  const settings = settingsOf(context.options);
  const startFailures: string[] = [];
  const withFailures = { ...context, startFailures };
  const probed = await probe(settings, withFailures);
  const limits = limitsOf(settings, probed);
  context.log(
    `bench: governor: input tokens by step ${probed.map((tokens) => tokens.toFixed(0)).join(', ')}; ` +
      `model limits ITPM ${limits.itpm}, RPM ${limits.rpm}, ${limits.bucketSeconds} s buckets`,
  );
  const figures: CaseFigures[] = [];
  const series: (SeriesPoint & { run: number; concurrency: number })[] = [];
  const measurements: (CaseRun & { run: number })[] = [];
  for (let runIndex = 0; runIndex < context.options.runs; runIndex++) {
    for (const concurrency of settings.levels) {
      for (const item of rotated(runIndex)) {
        const job = { label: item.label, governor: item.governor(limits), concurrency };
        const done = await runCase(settings, job, limits, withFailures);
        const measured = caseFigures({ ...done, limits, run: runIndex });
        figures.push(measured);
        measurements.push({ ...done, run: runIndex });
        for (const point of timeSeries(done.measurement, done.report)) {
          series.push({ ...point, run: runIndex, concurrency });
        }
        context.log(
          `bench: governor, run ${runIndex + 1}/${context.options.runs}: ${progressLine(measured)}`,
        );
      }
    }
  }
  return report({ settings, limits, probed, figures, series, measurements, startFailures });
}

function progressLine(item: CaseFigures): string {
  const rate =
    item.bindingPercent === null
      ? 'no steady window'
      : `${item.bindingPercent.toFixed(1)}% of ${item.binding.toUpperCase()}`;
  return (
    `${item.case} at ${item.concurrency}: ${item.completed}/${item.agents} complete in ${item.wallSeconds.toFixed(1)} s, ` +
    `${rate}, ${item.rateLimited429} × 429 (${item.rateLimitedPercent.toFixed(2)}% of ${item.requests} requests)`
  );
}

function report(input: {
  settings: Settings;
  limits: CaseLimits;
  probed: number[];
  figures: CaseFigures[];
  series: (SeriesPoint & { run: number; concurrency: number })[];
  measurements: (CaseRun & { run: number })[];
  startFailures: string[];
}): PartReport {
  const { settings, limits, figures } = input;
  const summary = medianFigures(figures);
  const binding = summary[0]?.binding ?? 'itpm';
  const { scenario } = settings;
  const subtitle =
    `${scenario.agents} agents × ${scenario.steps} steps; scripted model: ttft ${scenario.ttftMs} ms, ` +
    `ITPM ${limits.itpm}, RPM ${limits.rpm}, ${limits.bucketSeconds} s buckets; transport ${settings.options.transport}; ` +
    `medians of ${settings.options.runs} run(s)`;
  const chartLevel = Math.max(...settings.levels);
  const chartPoints = input.series.filter(
    (point) => point.run === 0 && point.concurrency === chartLevel,
  );
  const table = [
    subtitle,
    '',
    summaryTable(summary),
    '',
    ...acceptanceLines(summary),
    ...failureLines(input.measurements),
  ].join('\n');
  return {
    rows: rowsOf(summary),
    table,
    data: {
      scenario,
      transport: settings.options.transport,
      levels: settings.levels,
      limits,
      probeInputTokensByStep: input.probed,
      runs: settings.options.runs,
      targets: TARGETS,
      summary,
      figures,
      series: input.series,
      measurements: input.measurements,
      startFailures: input.startFailures,
    },
    chart: governorChartSpec({
      points: chartPoints,
      cases: CASES.map((item) => item.label),
      binding,
      limit: limits[binding],
      subtitle: `${subtitle}; concurrency ${chartLevel}, run 1`,
    }),
  };
}

function rowsOf(summary: CaseFigures[]): BenchRow[] {
  const rows: BenchRow[] = [];
  for (const item of summary) {
    const add = (metric: string, value: number | null, unit: string, note?: string) => {
      if (value === null || !Number.isFinite(value)) return;
      rows.push({
        part: 'governor',
        case: `${item.case} at ${item.concurrency}`,
        metric,
        value,
        unit,
        ...(note ? { note } : {}),
      });
    };
    add(`${item.binding.toUpperCase()} achieved, steady window`, item.bindingPercent, '% of limit');
    add('input tokens admitted, steady window', item.inputTokensPerMinute, 'tokens/min');
    add('requests admitted, steady window', item.requestsPerMinute, 'requests/min');
    add('requests answered 429', item.rateLimited429, 'requests');
    add('requests answered 429, share', item.rateLimitedPercent, '% of requests');
    add('completed agents', item.completed, 'agents');
    add('failed agents', item.failed, 'agents');
    add('wall time', item.wallSeconds, 's');
    add('cpu per provider call', item.cpuPerCallMs, 'ms');
  }
  return rows;
}

function summaryTable(summary: CaseFigures[]): string {
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
function acceptanceLines(summary: CaseFigures[]): string[] {
  return summary
    .filter((item) => item.case === CASES[0]?.label)
    .map((item) => {
      const met =
        item.bindingPercent !== null &&
        item.bindingPercent >= TARGETS.bindingPercent &&
        item.rateLimitedPercent <= TARGETS.rateLimitedPercent &&
        item.failed <= TARGETS.failed;
      const rate =
        item.bindingPercent === null ? 'no steady window' : `${item.bindingPercent.toFixed(1)}%`;
      return (
        `target at ${item.concurrency} (governor): ≥ ${TARGETS.bindingPercent}% of the binding limit, ≤ ${TARGETS.rateLimitedPercent}% 429, ${TARGETS.failed} failed; ` +
        `measured ${rate}, ${item.rateLimitedPercent.toFixed(2)}%, ${formatCount(item.failed)}: ${met ? 'met' : 'NOT met'}`
      );
    });
}

function failureLines(measurements: (CaseRun & { run: number })[]): string[] {
  const lines = measurements
    .filter(({ measurement }) => measurement.failureReasons.length > 0)
    .map(
      ({ measurement, run }) =>
        `not complete: ${measurement.label} (run ${run + 1}): ${measurement.failureReasons.join(' | ')}`,
    );
  return lines.length === 0 ? [] : ['', ...lines.slice(0, 10)];
}

/** The `governor` part of `npm run bench`. */
export const governorPart: BenchPart = {
  name: 'governor',
  description:
    'the rate-limit governor on and off against a binding input-token limit: rate achieved, 429s, failed agents',
  run,
};
