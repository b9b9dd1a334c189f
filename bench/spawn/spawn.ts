/**
 * The `spawn` part: cohort's pool against thread-per-child for (a) the time from spawn to a
 * child's first provider request on a warm pool and (b) memory per live child, with children
 * parked in a slow provider call; then cohort alone with many more live children.
 */

import { startModelProcess } from '../common/model-process.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from '../common/part.js';
import { median } from '../common/stats.js';
import { formatGrid, formatTable, formatValue } from '../common/table.js';
import { localModelEnv, measureInFreshProcess } from '../engines/fork.js';
import type { SpawnJob, SpawnMeasurement } from '../engines/jobs.js';

const MB = 1024 * 1024;
/** Children spawned at once in cohort's large run (each wave waits for its first requests). */
const LARGE_WAVE = 250;

type SpawnEngine = SpawnJob['engine'];

export interface SpawnSummary {
  engine: SpawnEngine;
  children: number;
  /** Children spawned at once; each wave waits for its children's first requests. */
  wave: number;
  threads: number;
  runs: number;
  firstRequestP50Ms: number;
  firstRequestP95Ms: number;
  firstRequestP99Ms: number;
  /** (RSS with every child live − RSS before the engine started) / children. */
  rssPerLiveChildMB: number;
  liveRssMB: number;
  /** RSS the started, warm pool added before any measured child, MB. */
  poolRssMB: number;
  startMs: number;
  spawnAllMs: number;
  closeMs: number;
  cancelled: number;
}

function perChildMB(measurement: SpawnMeasurement): number {
  return (
    Math.max(0, measurement.liveRssBytes - measurement.baselineRssBytes) / MB / measurement.children
  );
}

function summarise(cases: SpawnMeasurement[]): SpawnSummary {
  const first = cases[0]!;
  const med = (pick: (item: SpawnMeasurement) => number): number => median(cases.map(pick));
  return {
    engine: first.engine,
    children: first.children,
    wave: first.wave,
    threads: first.threads,
    runs: cases.length,
    firstRequestP50Ms: med((item) => item.firstRequestMs.p50),
    firstRequestP95Ms: med((item) => item.firstRequestMs.p95),
    firstRequestP99Ms: med((item) => item.firstRequestMs.p99),
    rssPerLiveChildMB: med(perChildMB),
    liveRssMB: med((item) => item.liveRssBytes / MB),
    poolRssMB: med((item) => Math.max(0, item.warmRssBytes - item.baselineRssBytes) / MB),
    startMs: med((item) => item.startMs),
    spawnAllMs: med((item) => item.spawnAllMs),
    closeMs: med((item) => item.closeMs),
    cancelled: med((item) => item.outcomes.cancelled),
  };
}

async function run(context: BenchContext): Promise<PartReport> {
  const { options, log } = context;
  const engines = (['cohort', 'thread-per-child'] as const).filter((engine) =>
    options.engines.includes(engine),
  );
  const server = await startModelProcess();
  const provider = { baseURL: server.url, model: 'cohort-bench' };
  const env = localModelEnv();
  const measurements: (SpawnMeasurement & { run: number; large: boolean })[] = [];
  const startFailures: string[] = [];
  const measure = async (job: SpawnJob, runIndex: number, large: boolean): Promise<void> => {
    const measurement = await measureInFreshProcess<SpawnMeasurement>(job, {
      env,
      log,
      startFailures,
    });
    measurements.push({ ...measurement, run: runIndex, large });
    log(
      `bench: spawn, ${job.engine} with ${job.children} live, run ${runIndex + 1}/${options.runs}: ` +
        `first request p50 ${measurement.firstRequestMs.p50.toFixed(2)} ms, ` +
        `${perChildMB(measurement).toFixed(3)} MB per live child, RSS ${(measurement.liveRssBytes / MB).toFixed(0)} MB`,
    );
  };
  try {
    for (let runIndex = 0; runIndex < options.runs; runIndex++) {
      const order = runIndex % 2 === 0 ? engines : [...engines].reverse();
      for (const engine of order) {
        await measure(
          {
            kind: 'spawn',
            engine,
            children: options.spawnChildren,
            wave: 1,
            provider,
            ...(engine === 'cohort' && options.threads !== undefined
              ? { threads: options.threads }
              : {}),
          },
          runIndex,
          false,
        );
      }
      if (engines.includes('cohort') && options.cohortChildren > 0) {
        await measure(
          {
            kind: 'spawn',
            engine: 'cohort',
            children: options.cohortChildren,
            wave: LARGE_WAVE,
            provider,
            ...(options.threads === undefined ? {} : { threads: options.threads }),
          },
          runIndex,
          true,
        );
      }
    }
  } finally {
    await server.stop();
  }

  const summary: SpawnSummary[] = [];
  for (const large of [false, true]) {
    for (const engine of engines) {
      const cases = measurements.filter((item) => item.engine === engine && item.large === large);
      if (cases.length > 0) summary.push(summarise(cases));
    }
  }
  const find = (engine: SpawnEngine, large: boolean) =>
    summary.find(
      (item) =>
        item.engine === engine &&
        item.children === (large ? options.cohortChildren : options.spawnChildren),
    );
  const cohortSide = find('cohort', false);
  const perChildSide = find('thread-per-child', false);
  const cohortLarge = options.cohortChildren > 0 ? find('cohort', true) : undefined;
  // Ratios within each run, then the median: both sides ran back to back on the same machine.
  const perRunRatio = (pick: (item: SpawnMeasurement) => number, cohortLargeRun: boolean) =>
    medianOrNull(
      Array.from({ length: options.runs }, (_, runIndex) => {
        const perChild = measurements.find(
          (item) => item.run === runIndex && item.engine === 'thread-per-child',
        );
        const cohort = measurements.find(
          (item) =>
            item.run === runIndex && item.engine === 'cohort' && item.large === cohortLargeRun,
        );
        if (!perChild || !cohort) return null;
        const denominator = pick(cohort);
        return denominator > 0 ? pick(perChild) / denominator : null;
      }),
    );
  const ratios = {
    memoryPerChildThreadPerChildOverCohort: perRunRatio(perChildMB, false),
    memoryPerChildThreadPerChildOverCohortLarge: perRunRatio(perChildMB, true),
    firstRequestP50ThreadPerChildOverCohort: perRunRatio((item) => item.firstRequestMs.p50, false),
  };
  const rows: BenchRow[] = [];
  const addRow = (
    caseName: string,
    metric: string,
    value: number | null | undefined,
    unit: string,
  ): void => {
    if (value === null || value === undefined || !Number.isFinite(value)) return;
    rows.push({ part: 'spawn', case: caseName, metric, value, unit });
  };
  addRow(
    `${options.spawnChildren} live each`,
    'memory per live child, thread-per-child / cohort',
    ratios.memoryPerChildThreadPerChildOverCohort,
    '×',
  );
  if (cohortLarge && perChildSide) {
    addRow(
      `${options.spawnChildren} thread-per-child vs ${options.cohortChildren} cohort`,
      'memory per live child, thread-per-child / cohort',
      ratios.memoryPerChildThreadPerChildOverCohortLarge,
      '×',
    );
  }
  addRow(
    `${options.spawnChildren} live each`,
    'spawn → first request p50, thread-per-child / cohort',
    ratios.firstRequestP50ThreadPerChildOverCohort,
    '×',
  );
  if (cohortLarge)
    addRow(`${options.cohortChildren} cohort`, 'RSS with all live', cohortLarge.liveRssMB, 'MB');
  const header = [
    'engine',
    'live',
    'wave',
    'threads',
    'first req p50 ms',
    'p95 ms',
    'p99 ms',
    'MB/child',
    'RSS MB',
    'pool MB',
    'start ms',
    'spawn all ms',
    'close ms',
    'cancelled',
  ];
  const cells = summary.map((item) => [
    item.engine,
    String(item.children),
    String(item.wave),
    String(item.threads),
    formatValue(item.firstRequestP50Ms),
    formatValue(item.firstRequestP95Ms),
    formatValue(item.firstRequestP99Ms),
    item.rssPerLiveChildMB.toFixed(3),
    formatValue(item.liveRssMB),
    formatValue(item.poolRssMB),
    formatValue(item.startMs),
    formatValue(item.spawnAllMs),
    formatValue(item.closeMs),
    String(item.cancelled),
  ]);
  const table = [
    `children parked in a provider call (scripted delayMs 600000) on a warm pool, spawned one at a time (wave 1) or in waves, rate-limit governor off; medians of ${options.runs} run(s)`,
    '',
    formatGrid(
      header,
      cells,
      Array.from({ length: header.length - 1 }, (_, index) => index + 1),
    ),
    '',
    formatTable(rows),
  ].join('\n');
  return {
    rows,
    table,
    data: {
      spawnChildren: options.spawnChildren,
      cohortChildren: options.cohortChildren,
      runs: options.runs,
      summary,
      ratios,
      sides: {
        cohort: cohortSide ?? null,
        threadPerChild: perChildSide ?? null,
        cohortLarge: cohortLarge ?? null,
      },
      startFailures,
      measurements,
    },
  };
}

function medianOrNull(values: (number | null)[]): number | null {
  const present = values.filter((value): value is number => value !== null);
  return present.length === 0 ? null : median(present);
}

/** The `spawn` part of `npm run bench`. */
export const spawnPart: BenchPart = {
  name: 'spawn',
  description:
    'spawn → first request latency and memory per live child: cohort vs thread-per-child',
  run,
};
