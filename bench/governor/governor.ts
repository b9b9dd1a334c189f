/**
 * The `governor` part: the rate-limit governor on and off under the conditions of issues 13 and
 * 27, one named scenario each (governor-scenarios.ts): a binding input-token limit, random 529s,
 * overload that depends on load, a cold burst, and a dead provider. Each engine case meets a
 * fresh model process (full buckets, its own record of admissions) and runs in a fresh
 * measuring process; the cases of a scenario alternate within a round, and the figures are
 * medians over the rounds.
 */
import type { BenchContext, BenchPart, PartReport } from '../common/part.js';
import { builtPath } from '../common/paths.js';
import type { Scenario } from '../common/scenario.js';
import { localModelEnv, measureInFreshProcess } from '../engines/fork.js';
import type { GovernorJob, GovernorMeasurement, ModelReport } from './governor-jobs.js';
import { startGovernorModel } from './governor-model.js';
import { type GovernorRun, governorReport, type Settings } from './governor-report.js';
import {
  type EngineCase,
  type EngineScenario,
  GOVERNOR_OFF,
  GOVERNOR_ON,
  GOVERNOR_SCENARIO_NAMES,
  type GovernorScenarioName,
  OVERLOAD_SCENARIOS,
  RATE_LIMIT_SCENARIO,
  UNREACHABLE_SCENARIO,
  type Workload,
} from './governor-scenarios.js';
import { type CaseFigures, type CaseLimits, caseFigures, timeSeries } from './governor-summary.js';
import {
  measureUnreachable,
  UNREACHABLE_CASES,
  type UnreachableRun,
} from './governor-unreachable.js';

/** How long the default input-token limit makes the run bind, beyond the bucket's first burst. */
const BOUND_SECONDS = 30;
/** The default request limit: this many times the request rate the input-token limit allows. */
const RPM_HEADROOM = 1.5;
/** An engine case still running after this long is cut short and reported as capped. */
const CASE_CAP_SECONDS = 300;

/** Issue 13's targets, for the governor learning from headers (the `rate-limit` scenario). */
export const TARGETS = {
  bindingPercent: RATE_LIMIT_SCENARIO.target.bindingPercent,
  rateLimitedPercent: RATE_LIMIT_SCENARIO.target.rateLimitedPercent,
  failed: RATE_LIMIT_SCENARIO.target.failed,
};

const RATE_LIMIT_CASES: EngineCase[] = [
  GOVERNOR_ON,
  { label: 'governor, told the limits', governor: {} },
  GOVERNOR_OFF,
];

function settingsOf(options: BenchContext['options']): Settings {
  const given = (flag: string) => options.given.includes(flag);
  return {
    scenarios:
      options.scenarios.length === 0 ? [...GOVERNOR_SCENARIO_NAMES] : [...options.scenarios],
    workload: (own: Workload) => ({
      agents: given('agents') ? options.agents : own.agents,
      steps: given('steps') ? options.steps : own.steps,
      concurrency: own.concurrency,
      ttftMs: given('ttft-ms') ? options.ttftMs : own.ttftMs,
    }),
    levels: (own: Workload) => (given('concurrency') ? options.concurrency : [own.concurrency]),
    bucketSeconds: given('bucket-seconds')
      ? options.bucketSeconds
      : RATE_LIMIT_SCENARIO.bucketSeconds,
    options,
  };
}

interface CaseRun {
  measurement: GovernorMeasurement;
  report: ModelReport;
}

type Context = BenchContext & { startFailures: string[] };

/** One case: a fresh model, a fresh measuring process running the agents. */
async function runCase(
  settings: Settings,
  input: {
    workload: Workload;
    concurrency: number;
    item: EngineCase;
    model: Parameters<typeof startGovernorModel>[0];
  },
  context: Context,
): Promise<CaseRun> {
  const { options } = settings;
  const model = await startGovernorModel(input.model);
  const scenario: Scenario = {
    agents: input.workload.agents,
    steps: input.workload.steps,
    ttftMs: input.workload.ttftMs,
    tps: options.tps,
    cpuMs: options.cpuMs,
  };
  const job: GovernorJob = {
    kind: 'governor',
    label: input.item.label,
    governor: input.item.governor,
    concurrency: input.concurrency,
    scenario,
    provider: {
      baseURL: model.url,
      model: 'cohort-bench',
      maxRetries: options.maxRetries,
      transport: options.transport,
    },
    threads: options.threads,
    capMs: CASE_CAP_SECONDS * 1000,
  };
  try {
    const measurement = await measureInFreshProcess<GovernorMeasurement>(job, {
      env: localModelEnv(),
      log: context.log,
      startFailures: context.startFailures,
    });
    return { measurement, report: await model.report() };
  } finally {
    await model.stop();
  }
}

const roundUp = (value: number, step: number) => Math.max(step, Math.ceil(value / step) * step);

/**
 * The `rate-limit` model's limits. Unless given, the input-token limit is set from a probe
 * agent's input so that the run binds for about BOUND_SECONDS after the bucket's first burst,
 * and the request limit leaves the input-token limit binding, with RPM_HEADROOM to spare.
 */
function limitsOf(settings: Settings, inputTokensByStep: number[]): CaseLimits {
  const { options, bucketSeconds } = settings;
  const { agents } = settings.workload(RATE_LIMIT_SCENARIO.workload);
  const perAgent = inputTokensByStep.reduce((sum, tokens) => sum + tokens, 0);
  const perRequest = perAgent / Math.max(1, inputTokensByStep.length);
  const itpm =
    options.itpm > 0
      ? options.itpm
      : roundUp((agents * perAgent * 60) / (BOUND_SECONDS + bucketSeconds), 1000);
  const rpm = options.rpm > 0 ? options.rpm : roundUp((RPM_HEADROOM * itpm) / perRequest, 100);
  return { rpm, itpm, bucketSeconds };
}

async function probe(settings: Settings, context: Context): Promise<number[]> {
  const workload = { ...settings.workload(RATE_LIMIT_SCENARIO.workload), agents: 1, ttftMs: 0 };
  const { measurement } = await runCase(
    settings,
    { workload, concurrency: 1, item: { ...GOVERNOR_OFF, label: 'probe' }, model: {} },
    context,
  );
  if (measurement.outcomes.complete !== 1 || measurement.inputTokensByStep.length === 0) {
    throw new Error(
      `Expected the probe agent to complete with its input tokens reported, got ${JSON.stringify(measurement.outcomes)}: ${measurement.failureReasons.join(' | ')}`,
    );
  }
  return measurement.inputTokensByStep;
}

/** `items` in a round's order: rotated each round, so none is always measured first. */
function rotated<T>(items: readonly T[], round: number): T[] {
  const shift = round % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/** The model of a case: the workload's ttft, the flags' pacing, the scenario's own settings. */
function modelOf(
  settings: Settings,
  workload: Workload,
  scenario: Pick<EngineScenario, 'model'>,
  round: number,
): Parameters<typeof startGovernorModel>[0] {
  const { options } = settings;
  return {
    ttftMs: workload.ttftMs,
    tokensPerSecond: options.tps,
    jitter: options.jitter,
    // A scenario without 529s of its own takes `--overload`.
    overloadProbability: options.overload,
    ...scenario.model,
    // The same seed for every case of a round: on and off meet the same random 529s.
    seed: round + 1,
  };
}

/** The `rate-limit` scenario as an engine scenario, its model limits set from the probe. */
function rateLimitScenario(settings: Settings, limits: CaseLimits): EngineScenario {
  const { options } = settings;
  return {
    name: 'rate-limit',
    summary: RATE_LIMIT_SCENARIO.summary,
    workload: RATE_LIMIT_SCENARIO.workload,
    model: {
      rpm: limits.rpm,
      itpm: limits.itpm,
      otpm: options.otpm,
      bucketSeconds: limits.bucketSeconds,
      acceleration: options.acceleration,
    },
    target: RATE_LIMIT_SCENARIO.target,
  };
}

function casesOf(scenario: EngineScenario, limits: CaseLimits | undefined): EngineCase[] {
  if (scenario.name !== 'rate-limit' || !limits) return [GOVERNOR_ON, GOVERNOR_OFF];
  return RATE_LIMIT_CASES.map((item) =>
    item.label === 'governor, told the limits'
      ? { ...item, governor: { rpm: limits.rpm, itpm: limits.itpm } }
      : item,
  );
}

async function run(context: BenchContext): Promise<PartReport> {
  const settings = settingsOf(context.options);
  const chosen = (name: GovernorScenarioName) => settings.scenarios.includes(name);
  const withFailures: Context = { ...context, startFailures: [] };
  let limits: CaseLimits | undefined;
  let probed: number[] = [];
  if (chosen('rate-limit')) {
    probed = await probe(settings, withFailures);
    limits = limitsOf(settings, probed);
    context.log(
      `bench: governor: input tokens by step ${probed.map((tokens) => tokens.toFixed(0)).join(', ')}; ` +
        `rate-limit model: ITPM ${limits.itpm}, RPM ${limits.rpm}, ${limits.bucketSeconds} s buckets`,
    );
  }
  const scenarios: EngineScenario[] = [
    ...(limits ? [rateLimitScenario(settings, limits)] : []),
    ...OVERLOAD_SCENARIOS.filter((scenario) => chosen(scenario.name)),
  ];
  const runs: GovernorRun[] = [];
  const unreachable: UnreachableRun[] = [];
  const rounds = context.options.runs;
  for (let round = 0; round < rounds; round++) {
    for (const scenario of scenarios) {
      const workload = settings.workload(scenario.workload);
      const model = modelOf(settings, workload, scenario, round);
      for (const concurrency of settings.levels(scenario.workload)) {
        for (const item of rotated(casesOf(scenario, limits), round)) {
          const done = await runCase(
            settings,
            { workload, concurrency, item, model },
            withFailures,
          );
          const figures = caseFigures({
            ...done,
            scenario: scenario.name,
            limits: scenario.name === 'rate-limit' ? limits : undefined,
            run: round,
          });
          runs.push({
            ...done,
            figures,
            series: scenario.name === 'rate-limit' ? timeSeries(done.measurement, done.report) : [],
          });
          context.log(`bench: governor, round ${round + 1}/${rounds}: ${progressLine(figures)}`);
        }
      }
    }
    if (chosen('unreachable')) {
      const workload = settings.workload(UNREACHABLE_SCENARIO.workload);
      for (const which of rotated(UNREACHABLE_CASES, round)) {
        for (const concurrency of settings.levels(UNREACHABLE_SCENARIO.workload)) {
          const measured = await measureUnreachable(which, round, {
            tasks: workload.agents,
            concurrency,
            capSeconds: UNREACHABLE_SCENARIO.capSeconds,
            threads: context.options.threads,
            cli: builtPath('src/cli/cli.js'),
          });
          unreachable.push(measured);
          context.log(
            `bench: governor, round ${round + 1}/${rounds}: unreachable, ${which}: ${measured.tasks} tasks, ` +
              `${measured.timedOut ? `still running at ${measured.capSeconds} s, stopped` : `exit ${measured.exitCode ?? measured.signal} after ${measured.seconds.toFixed(1)} s`}, ` +
              `${measured.errorMessages} distinct error message(s)`,
          );
        }
      }
    }
  }
  return governorReport({
    settings,
    scenarios,
    limits,
    probed,
    runs,
    unreachable,
    startFailures: withFailures.startFailures,
  });
}

function progressLine(item: CaseFigures): string {
  const rate =
    item.binding === null
      ? ''
      : item.bindingPercent === null
        ? ', no steady window'
        : `, ${item.bindingPercent.toFixed(1)}% of ${item.binding.toUpperCase()}`;
  return (
    `${item.scenario}, ${item.case} at ${item.concurrency}: ${item.completed}/${item.agents} complete in ` +
    `${item.wallSeconds.toFixed(1)} s${item.capped ? ' (capped)' : ''}${rate}, ${item.requests} requests, ` +
    `${item.rateLimited429} × 429, ${item.overloaded529} × 529`
  );
}

/** The `governor` part of `npm run bench`. */
export const governorPart: BenchPart = {
  name: 'governor',
  description:
    'the rate-limit governor on and off: a binding rate limit, random 529s, load-dependent overload, a cold burst, a dead provider',
  run,
};
