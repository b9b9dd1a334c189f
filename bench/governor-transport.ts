/**
 * `node dist/bench/governor-transport.js [--threads 2] [--admissions N] [--holders K] [--json]`
 * (`npm run bench:governor-transport`): a micro-benchmark of the two ways the rate-limit governor
 * (issue 13) could admit the requests of every worker thread, SharedArrayBuffer + Atomics against
 * a broker on the main thread, measured per admission. The designs and one measured run are in
 * governor-transport-designs.ts; this file is the command: flags, the alternating rounds, the
 * medians, the table and the JSON report. Method and figures: docs/GOVERNOR.md.
 *
 * Three regimes, each run for every design in every round (baseline, sab, broker, baseline, …):
 * - saturated: `--threads` × `--holders` holders on `--capacity` permits, each holding its permit
 *   for one event-loop turn. Admission is the only work, so its cost is at its most visible.
 *   The baseline runs as many holders as there are permits, ungated (see `runConfig`).
 * - paced: the same holders, each holding its permit for a `--request-ms` timer, so the threads
 *   sleep between admissions the way they do while provider requests are in flight.
 * - idle: one holder on one thread, the permits always free: the latency of an uncontended
 *   admission (acquire call → acquired), and its CPU when every admission wakes the threads up.
 */
import os from 'node:os';
import { intFlag, parseCommand } from '../src/cli/flags.js';
import { UsageError } from '../src/shared/errors.js';
import { isEntryScript } from '../src/testing/entry-script.js';
import {
  DESIGNS,
  type Design,
  type RunConfig,
  type RunResult,
  runOnce,
} from './governor-transport-designs.js';
import { median, percentile } from './stats.js';
import { formatGrid, formatValue } from './table.js';

export const REGIMES = ['saturated', 'paced', 'idle'] as const;
export type Regime = (typeof REGIMES)[number];

export interface TransportOptions {
  threads: number;
  /** Admissions of a saturated run, over all threads. */
  admissions: number;
  holders: number;
  capacity: number;
  /** Admissions of a paced run (0 skips the regime). */
  pacedAdmissions: number;
  requestMs: number;
  /** Admissions of an idle run (one holder). */
  samples: number;
  runs: number;
  json: boolean;
}

export const USAGE = `Usage: node dist/bench/governor-transport.js [options]
Measures, per admission, a semaphore shared by worker threads two ways: sab and broker.
  --threads N            worker threads (default 2)
  --admissions N         admissions of a saturated run, over all threads (default 400000)
  --holders K            concurrent holders per thread (default 100)
  --capacity C           permits shared by every thread (default 64)
  --paced-admissions N   admissions of a paced run, 0 skips it (default 4000)
  --request-ms MS        how long a paced holder holds its permit (default 20)
  --samples N            admissions of an idle run: one holder, permits free (default 5000)
  --runs R               rounds; every design runs once per regime per round (default 5)
  --json                 write the JSON report to stdout (the table goes to stderr)`;

/** Parses the flags; `'help'` for --help. A bad flag is a UsageError that names it. */
export function parseTransportArgs(argv: string[]): TransportOptions | 'help' {
  const flag = { type: 'string' } as const;
  const { values, positionals } = parseCommand(argv, {
    threads: flag,
    admissions: flag,
    holders: flag,
    capacity: flag,
    'paced-admissions': flag,
    'request-ms': flag,
    samples: flag,
    runs: flag,
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return 'help';
  if (positionals.length > 0) {
    throw new UsageError(`Expected no positional arguments, got \`${positionals.join(' ')}\``);
  }
  return {
    threads: intFlag(values, 'threads', 1, 64) ?? 2,
    admissions: intFlag(values, 'admissions', 1) ?? 400_000,
    holders: intFlag(values, 'holders', 1, 100_000) ?? 100,
    capacity: intFlag(values, 'capacity', 1, 1_000_000) ?? 64,
    pacedAdmissions: intFlag(values, 'paced-admissions', 0) ?? 4000,
    requestMs: intFlag(values, 'request-ms', 1, 60_000) ?? 20,
    samples: intFlag(values, 'samples', 1) ?? 5000,
    runs: intFlag(values, 'runs', 1, 100) ?? 5,
    json: values.json === true,
  };
}

/** One run as reported: its regime, its counts and, for idle runs, its latency percentiles. */
export type ReportedRun = Omit<RunResult, 'latenciesNs'> & {
  regime: Regime;
  p50Us?: number;
  p99Us?: number;
};

/**
 * The run of one regime and design. The baseline's holders are cut to the capacity (split over
 * the threads): it then has as many requests in flight as the gated designs, so timers and event
 * loop turns are batched alike and the difference is the admission step alone.
 */
function runConfig(regime: Regime, design: Design, options: TransportOptions): RunConfig {
  const holders =
    design === 'baseline'
      ? Math.max(1, Math.min(options.holders, Math.floor(options.capacity / options.threads)))
      : options.holders;
  const shared = { threads: options.threads, holders, capacity: options.capacity };
  if (regime === 'saturated') {
    return { ...shared, admissions: options.admissions, requestMs: 0, sampleLatency: false };
  }
  if (regime === 'paced') {
    const admissions = options.pacedAdmissions;
    return { ...shared, admissions, requestMs: options.requestMs, sampleLatency: false };
  }
  const one = { threads: 1, holders: 1, capacity: options.capacity };
  return { ...one, admissions: options.samples, requestMs: 0, sampleLatency: true };
}

function reported(regime: Regime, run: RunResult): ReportedRun {
  const { latenciesNs, ...rest } = run;
  if (regime !== 'idle') return { ...rest, regime };
  return {
    ...rest,
    regime,
    p50Us: percentile(latenciesNs, 50) / 1000,
    p99Us: percentile(latenciesNs, 99) / 1000,
  };
}

/** Per design, medians over the rounds; `net` figures subtract the baseline's median. */
export interface DesignSummary {
  design: Design;
  saturatedAdmissionsPerSecond: number;
  saturatedCpuUsPerAdmission: number;
  saturatedNetCpuUsPerAdmission: number;
  pacedNetCpuUsPerAdmission: number;
  idleNetCpuUsPerAdmission: number;
  idleP50Us: number;
  idleP99Us: number;
  /** The most permits held at once in any saturated or paced run. */
  maxHeld: number;
}

function summarize(runs: ReportedRun[]): DesignSummary[] {
  const medianOf = (regime: Regime, design: Design, pick: (run: ReportedRun) => number) =>
    median(runs.filter((run) => run.regime === regime && run.design === design).map(pick));
  const cpu = (run: ReportedRun) => run.cpuUsPerAdmission;
  const net = (regime: Regime, design: Design) =>
    medianOf(regime, design, cpu) - medianOf(regime, 'baseline', cpu);
  return DESIGNS.map((design) => ({
    design,
    saturatedAdmissionsPerSecond: medianOf('saturated', design, (run) => run.admissionsPerSecond),
    saturatedCpuUsPerAdmission: medianOf('saturated', design, cpu),
    saturatedNetCpuUsPerAdmission: net('saturated', design),
    pacedNetCpuUsPerAdmission: net('paced', design),
    idleNetCpuUsPerAdmission: net('idle', design),
    idleP50Us: medianOf('idle', design, (run) => run.p50Us ?? Number.NaN),
    idleP99Us: medianOf('idle', design, (run) => run.p99Us ?? Number.NaN),
    maxHeld: Math.max(
      ...runs
        .filter((run) => run.design === design && run.regime !== 'idle')
        .map((run) => run.maxHeld),
    ),
  }));
}

/** The summary as a fixed-width table, one row per design. */
export function formatSummary(rows: DesignSummary[]): string {
  return formatGrid(
    [
      'design',
      'saturated adm/s',
      'CPU µs/adm',
      'net µs/adm',
      'paced net µs/adm',
      'idle net µs/adm',
      'idle p50 µs',
      'idle p99 µs',
      'max held',
    ],
    rows.map((row) => [
      row.design,
      formatValue(row.saturatedAdmissionsPerSecond),
      formatValue(row.saturatedCpuUsPerAdmission),
      formatValue(row.saturatedNetCpuUsPerAdmission),
      formatValue(row.pacedNetCpuUsPerAdmission),
      formatValue(row.idleNetCpuUsPerAdmission),
      formatValue(row.idleP50Us),
      formatValue(row.idleP99Us),
      String(row.maxHeld),
    ]),
    [1, 2, 3, 4, 5, 6, 7, 8],
  );
}

/** Runs every regime of every design once per round, designs alternating; returns the report. */
export async function runTransportBench(
  options: TransportOptions,
  log: (line: string) => void,
): Promise<{ summary: DesignSummary[] } & Record<string, unknown>> {
  const regimes = REGIMES.filter((regime) => regime !== 'paced' || options.pacedAdmissions > 0);
  const runs: ReportedRun[] = [];
  const loadBefore = os.loadavg();
  for (let round = 1; round <= options.runs; round++) {
    for (const regime of regimes) {
      for (const design of DESIGNS) {
        const run = reported(regime, await runOnce(design, runConfig(regime, design, options)));
        runs.push(run);
        log(
          `round ${round}/${options.runs} ${regime} ${design}: ` +
            `${formatValue(run.admissionsPerSecond)} admissions/s, ` +
            `${formatValue(run.cpuUsPerAdmission)} CPU µs/admission`,
        );
      }
    }
  }
  return {
    machine: {
      node: process.version,
      platform: `${process.platform}/${process.arch}`,
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      loadBefore,
      loadAfter: os.loadavg(),
    },
    options,
    summary: summarize(runs),
    runs,
  };
}

async function main(argv: string[]): Promise<number> {
  let options: TransportOptions | 'help';
  try {
    options = parseTransportArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`governor-transport: ${error.message}\n${USAGE}\n`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const report = await runTransportBench(options, (line) => process.stderr.write(`${line}\n`));
  const table = formatSummary(report.summary);
  if (options.json) {
    process.stderr.write(`${table}\n`);
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else process.stdout.write(`${table}\n`);
  return 0;
}

if (isEntryScript(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
