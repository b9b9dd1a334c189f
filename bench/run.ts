/**
 * `npm run bench [part...] [flags]` / `cohort bench`: runs the named benchmark parts, or all of
 * them, prints their tables, and writes a JSON report and an SVG chart. A part is a name and a
 * function that returns rows (see part.ts); add one with an import and a line in PARTS.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UsageError } from '../src/shared/errors.js';
import { isEntryScript } from '../src/testing/entry-script.js';
import { cachePart } from './cache/cache.js';
import { renderSvg } from './common/chart.js';
import { BENCH_USAGE, type BenchOptions, parseBenchArgs } from './common/options.js';
import type { BenchPart, PartReport } from './common/part.js';
import { formatTable } from './common/table.js';
import { concurrencyPart } from './concurrency/concurrency.js';
import { dashboardPart } from './dashboard/dashboard.js';
import { embedPart } from './embed/embed.js';
import { PROFILE_ENV } from './engines/fork.js';
import { governorPart } from './governor/governor.js';
import { lanesPart } from './lanes/lanes.js';
import { modelCapacity } from './model/model-capacity.js';
import { peersPart } from './peers/peers.js';
import { scalePart } from './scale/scale.js';
import { spawnPart } from './spawn/spawn.js';
import { transportPart } from './transport/transport.js';

export type { BenchContext, BenchPart, BenchRow, PartReport } from './common/part.js';
export { formatTable } from './common/table.js';

/** Every part, in the order they run. */
export const PARTS: BenchPart[] = [
  modelCapacity,
  transportPart,
  concurrencyPart,
  spawnPart,
  governorPart,
  cachePart,
  scalePart,
  peersPart,
  embedPart,
  lanesPart,
  dashboardPart,
];

/** Where `runBench` writes; tests pass their own. */
export interface BenchIo {
  stdout?: { write(text: string): unknown };
  stderr?: { write(text: string): unknown };
  env?: NodeJS.ProcessEnv;
}

function machine(): Record<string, unknown> {
  return {
    node: process.version,
    platform: `${process.platform}/${process.arch}`,
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    totalMemoryGB: Number((os.totalmem() / 1024 ** 3).toFixed(1)),
  };
}

function loadAverage(): number[] {
  return os.loadavg().map((value) => Number(value.toFixed(2)));
}

/** `bench.svg` → `bench-governor.svg`. */
function chartFileFor(chart: string, partName: string): string {
  const parsed = path.parse(chart);
  return path.join(parsed.dir, `${parsed.name}-${partName}${parsed.ext || '.svg'}`);
}

/**
 * Runs the parts in turn. With `--profile DIR`, COHORT_BENCH_PROFILE=DIR is set while they run:
 * every part derives its measuring processes' environment from this process's, and fork.ts turns
 * that variable into `--cpu-prof` flags, so each part is profiled without knowing of it.
 */
async function runParts(
  parts: BenchPart[],
  options: BenchOptions,
  log: (line: string) => void,
): Promise<{ part: BenchPart; report: PartReport; seconds: number }[]> {
  const previous = process.env[PROFILE_ENV];
  if (options.profile !== undefined) {
    mkdirSync(options.profile, { recursive: true });
    process.env[PROFILE_ENV] = options.profile;
    log(`bench: CPU profiles go to ${options.profile}`);
  }
  try {
    const reports: { part: BenchPart; report: PartReport; seconds: number }[] = [];
    for (const part of parts) {
      log(`bench: running ${part.name}: ${part.description}`);
      const begin = performance.now();
      const report = await part.run({ options, log });
      const seconds = (performance.now() - begin) / 1000;
      log(`bench: ${part.name} took ${seconds.toFixed(1)} s`);
      reports.push({ part, report, seconds });
    }
    return reports;
  } finally {
    if (options.profile !== undefined) {
      if (previous === undefined) delete process.env[PROFILE_ENV];
      else process.env[PROFILE_ENV] = previous;
    }
  }
}

/**
 * Runs the parts named in `argv` (all when none is named) with its flags; resolves to an exit
 * code: 0, or 2 for a bad flag or part name.
 */
export async function runBench(argv: string[], io: BenchIo = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  let parsed: BenchOptions | 'help';
  try {
    parsed = parseBenchArgs(
      argv,
      PARTS.map((part) => part.name),
      io.env ?? process.env,
    );
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    stderr.write(`cohort bench: ${error.message}\nSee cohort bench --help\n`);
    return 2;
  }
  if (parsed === 'help') {
    stdout.write(`${BENCH_USAGE}\n`);
    return 0;
  }
  const options = parsed;
  const chosen =
    options.parts.length === 0 ? PARTS : PARTS.filter((part) => options.parts.includes(part.name));
  const log = (line: string): void => {
    stderr.write(`${line}\n`);
  };
  const startedAt = new Date().toISOString();
  const loadBefore = loadAverage();
  const reports = await runParts(chosen, options, log);
  const info = machine();
  const loadAfter = loadAverage();
  const sections = reports.map(
    ({ part, report }) =>
      `== ${part.name}: ${part.description}\n\n${report.table ?? formatTable(report.rows)}`,
  );
  const outputs: string[] = [];
  const json = {
    startedAt,
    argv,
    transport: options.transport,
    ...(options.profile === undefined ? {} : { profile: options.profile }),
    machine: info,
    loadAverage: { before: loadBefore, after: loadAfter },
    parts: Object.fromEntries(
      reports.map(({ part, report, seconds }) => [
        part.name,
        { seconds, rows: report.rows, ...(report.data === undefined ? {} : { data: report.data }) },
      ]),
    ),
  };
  mkdirSync(path.dirname(path.resolve(options.out)), { recursive: true });
  writeFileSync(options.out, `${JSON.stringify(json, null, 2)}\n`);
  outputs.push(`report: ${options.out}`);
  // The first chart goes to --chart; a further part's beside it, named for the part.
  const charted = reports.filter(({ report }) => report.chart !== undefined);
  for (const [index, { part, report }] of charted.entries()) {
    const file = index === 0 ? options.chart : chartFileFor(options.chart, part.name);
    const svg = report.chart && (await renderSvg(report.chart));
    if (svg === undefined) {
      log('bench: chart skipped: the vega package (a dev dependency) is not installed; npm i vega');
      break;
    }
    mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    writeFileSync(file, svg);
    outputs.push(`chart: ${file}`);
  }
  stdout.write(
    `node ${info.node}, ${info.platform}, ${info.cpus} cores (${info.cpuModel}), ${info.totalMemoryGB} GB; ` +
      `load average before ${loadBefore.join(' ')}, after ${loadAfter.join(' ')}\n\n` +
      `${sections.join('\n\n')}\n\n${outputs.join('\n')}\n`,
  );
  return 0;
}

if (isEntryScript(import.meta.url)) {
  // The bench's processes (queue workers included) keep their governor state in a folder of the
  // bench's own, never in the user's cache; each measuring process gets a fresh one (fork.ts).
  const cache = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-cache-'));
  process.env.XDG_CACHE_HOME = cache;
  process.once('exit', () => rmSync(cache, { recursive: true, force: true }));
  process.exitCode = await runBench(process.argv.slice(2));
}
