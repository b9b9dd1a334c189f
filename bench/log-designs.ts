/**
 * `node dist/bench/log-designs.js [--agents N] [--steps S] [--runs R] [--root DIR] [--json]`
 * (`npm run bench:log-designs`): how an agent's log folder could be written without blocking the
 * event loop of the thread its agent runs on (issue 11). The designs are in
 * log-design-variants.ts; this file is the command: it runs each design in a fresh process, the
 * designs interleaved round by round, and prints the medians. Figures: docs/BENCHMARKS.md.
 *
 * One run: `--agents` agents start at once on one thread (a burst of spawns), each writes its
 * meta and prompt, takes `--steps` steps (a timer of about `--think-ms` stands for the provider
 * call, then the step's two messages are committed), spills its reply and ends its log (awaited,
 * as a child awaits it before its result is posted). Measured per agent: CPU of the whole process
 * (every thread, libuv's pool included) and of the agents' thread, the time the agents' event
 * loop was busy; and the run's wall time and event-loop delay. `none` makes the same strings and
 * writes nothing: the cost of the simulation itself. `--root` picks the filesystem.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { intFlag, parseCommand, stringFlag } from '../src/cli/flags.js';
import { UsageError } from '../src/shared/errors.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import { isEntryScript } from '../src/testing/entry-script.js';
import {
  DESIGNS,
  type Design,
  type DesignLog,
  designRuntime,
  removeRunDir,
} from './log-design-variants.js';
import { MainThreadProbe } from './probes.js';
import { median } from './stats.js';
import { formatGrid, formatValue } from './table.js';

export interface LogBenchOptions {
  agents: number;
  steps: number;
  thinkMs: number;
  runs: number;
  designs: Design[];
  /** Where the runs' folders go (default: the OS temp dir). */
  root: string;
  json: boolean;
}

export const USAGE = `Usage: node dist/bench/log-designs.js [options]
Measures ways of writing agents' log folders off the event loop, each run in a fresh process.
  --agents N      agents started at once on one thread (default 400)
  --steps S       steps per agent (default 4)
  --think-ms MS   mean provider time per step, jittered ±50% (default 20)
  --runs R        rounds; every design runs once per round (default 3)
  --designs LIST  comma-separated subset of ${DESIGNS.join(', ')}
  --root DIR      where the agents' folders go (default: the OS temp dir)
  --json          write the JSON report to stdout (the table goes to stderr)`;

export function parseLogBenchArgs(argv: string[]): LogBenchOptions | 'help' {
  const flag = { type: 'string' } as const;
  const { values, positionals } = parseCommand(argv, {
    agents: flag,
    steps: flag,
    'think-ms': flag,
    runs: flag,
    designs: flag,
    root: flag,
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return 'help';
  if (positionals.length > 0) {
    throw new UsageError(`Expected no positional arguments, got \`${positionals.join(' ')}\``);
  }
  return {
    agents: intFlag(values, 'agents', 1, 100_000) ?? 400,
    steps: intFlag(values, 'steps', 1, 1000) ?? 4,
    thinkMs: intFlag(values, 'think-ms', 0, 60_000) ?? 20,
    runs: intFlag(values, 'runs', 1, 100) ?? 3,
    designs: parseDesigns(values.designs),
    root: stringFlag(values, 'root') ?? os.tmpdir(),
    json: values.json === true,
  };
}

function parseDesigns(raw: unknown): Design[] {
  if (raw === undefined) return [...DESIGNS];
  const names = String(raw).split(',');
  for (const name of names) {
    if (!DESIGNS.includes(name as Design)) {
      throw new UsageError(
        `Expected \`--designs\` to list designs among ${DESIGNS.join(', ')}, got \`${name}\``,
      );
    }
  }
  return names as Design[];
}

/** What one run in its own process measured. */
export interface RunFigures {
  design: Design;
  /** CPU of the whole process per agent, every thread (libuv's pool, a writer thread) included. */
  cpuUsPerAgent: number;
  /** Of which kernel time (file creation is nearly all kernel time). */
  systemUsPerAgent: number;
  /** CPU of the agents' own thread per agent: what the log takes from a worker's event loop. */
  threadUsPerAgent: number;
  /**
   * Time the agents' event loop was busy per agent (performance.eventLoopUtilization): running
   * callbacks, or blocked in a synchronous call. What the log keeps the loop from other work.
   */
  loopBusyUsPerAgent: number;
  wallMs: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** Agents whose folder holds all its files, with every transcript line. */
  complete: number;
}

/** A seeded jitter, so that every design sees the same think times. */
function thinkTimes(options: LogBenchOptions): number[] {
  let state = 0x2545f491;
  const times: number[] = [];
  for (let index = 0; index < options.agents * options.steps; index++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    times.push(options.thinkMs * (0.5 + state / 2 ** 32));
  }
  return times;
}

const PROMPT = `Read the three files under docs/ and summarise what each says about retries. ${'x'.repeat(200)}`;

function stepMessages(step: number): MessageParam[] {
  const id = `toolu_${String(step).padStart(20, '0')}`;
  return [
    {
      role: 'assistant',
      content: [
        { type: 'text', text: `Step ${step}: I will look at the next file. ${'y'.repeat(160)}` },
        { type: 'tool_use', id, name: 'read', input: { path: `docs/file-${step}.md` } },
      ],
    },
    {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: id, content: 'z'.repeat(300) }],
    },
  ];
}

async function runAgent(
  log: DesignLog,
  index: number,
  dir: string,
  think: readonly number[],
  options: LogBenchOptions,
): Promise<void> {
  const id = `ag_${String(index).padStart(12, '0')}`;
  log.writeMeta({ id, title: `task ${index}`, depth: 1, model: 'cohort-scripted', maxSteps: 20 });
  log.appendTranscript([{ role: 'user', content: PROMPT }]);
  for (let step = 0; step < options.steps; step++) {
    await new Promise((resolve) => setTimeout(resolve, think[index * options.steps + step]));
    log.appendTranscript(stepMessages(step));
  }
  const replyFile = log.spillReply(`The three files agree: ${'r'.repeat(200)}`, false);
  const result: AgentResult = {
    id,
    title: `task ${index}`,
    outcome: 'complete',
    text: 'The three files agree.',
    truncated: false,
    logDir: dir,
    replyFile,
    generation: 0,
    elapsedMs: 0,
    usage: { inputTokens: 0, outputTokens: 0, providerCalls: options.steps, steps: options.steps },
  };
  await log.finish(result, true);
}

/** One run of one design, in this process. */
export async function runDesign(design: Design, options: LogBenchOptions): Promise<RunFigures> {
  const root = mkdtempSync(path.join(options.root, `cohort-log-bench-${design}-`));
  const runtime = designRuntime(design);
  const think = thinkTimes(options);
  const dirs = Array.from({ length: options.agents }, (_, index) => path.join(root, `ag_${index}`));
  const probe = new MainThreadProbe();
  probe.start();
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const threadBefore = mainThreadCpuUs();
  const loopBefore = performance.eventLoopUtilization();
  await Promise.all(
    dirs.map((dir, index) => runAgent(runtime.open(dir), index, dir, think, options)),
  );
  const cpu = process.cpuUsage(cpuBefore);
  const threadUs = mainThreadCpuUs() - threadBefore;
  const loop = performance.eventLoopUtilization(loopBefore);
  const wallMs = performance.now() - started;
  const { eventLoopDelay } = probe.stop();
  await runtime.close();
  const complete = design === 'none' ? options.agents : countComplete(dirs, options.steps);
  removeRunDir(root);
  return {
    design,
    cpuUsPerAgent: (cpu.user + cpu.system) / options.agents,
    systemUsPerAgent: cpu.system / options.agents,
    threadUsPerAgent: threadUs / options.agents,
    loopBusyUsPerAgent: (loop.active * 1000) / options.agents,
    wallMs,
    loopDelayP99Ms: eventLoopDelay.p99,
    loopDelayMaxMs: eventLoopDelay.max,
    complete,
  };
}

/**
 * CPU time of this process's main thread (where the agents run), µs, from Linux's
 * /proc/self/task/<pid>/stat (fields 14 and 15, in clock ticks of 10 ms: runs last seconds).
 * Node 20 has no per-thread CPU clock of its own. NaN elsewhere.
 */
function mainThreadCpuUs(): number {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return Number.NaN;
  }
}

/** Checks on disk that each agent's folder is whole (outside the measured window). */
function countComplete(dirs: readonly string[], steps: number): number {
  let complete = 0;
  for (const dir of dirs) {
    try {
      const files = readdirSync(dir).sort().join(',');
      const lines = readFileSync(path.join(dir, 'transcript.jsonl'), 'utf8').split('\n');
      // The prompt, two lines per step, and the empty string after the last newline.
      const whole = lines.length === 2 + 2 * steps && lines.at(-1) === '';
      if (whole && files === 'meta.json,reply.md,result.json,transcript.jsonl') complete++;
    } catch {
      // Missing: not complete.
    }
  }
  return complete;
}

const run = promisify(execFile);

/** Runs one design in a fresh process: `--run DESIGN` with the same options. */
async function runInFreshProcess(design: Design, options: LogBenchOptions): Promise<RunFigures> {
  const script = fileURLToPath(import.meta.url);
  const args = [
    script,
    '--run',
    design,
    `--agents=${options.agents}`,
    `--steps=${options.steps}`,
    `--think-ms=${options.thinkMs}`,
    `--root=${options.root}`,
  ];
  const { stdout } = await run(process.execPath, args, { maxBuffer: 1 << 20 });
  return JSON.parse(stdout) as RunFigures;
}

export interface DesignSummary {
  design: Design;
  cpuUsPerAgent: number;
  /** CPU per agent above `none`'s: what the log itself costs, all threads. */
  netCpuUsPerAgent: number;
  systemUsPerAgent: number;
  /** The agents' thread's CPU per agent above `none`'s: what the log costs its event loop. */
  netThreadUsPerAgent: number;
  /** The agents' event loop's busy time per agent above `none`'s. */
  netLoopBusyUsPerAgent: number;
  wallMs: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  complete: number;
}

function summarize(runs: RunFigures[], options: LogBenchOptions): DesignSummary[] {
  const medianOf = (design: Design, pick: (run: RunFigures) => number) =>
    median(runs.filter((run) => run.design === design).map(pick));
  const floor = (pick: (run: RunFigures) => number) =>
    options.designs.includes('none') ? medianOf('none', pick) : 0;
  const cpu = (run: RunFigures) => run.cpuUsPerAgent;
  const thread = (run: RunFigures) => run.threadUsPerAgent;
  const busy = (run: RunFigures) => run.loopBusyUsPerAgent;
  return options.designs.map((design) => ({
    design,
    cpuUsPerAgent: medianOf(design, cpu),
    netCpuUsPerAgent: medianOf(design, cpu) - floor(cpu),
    systemUsPerAgent: medianOf(design, (run) => run.systemUsPerAgent),
    netThreadUsPerAgent: medianOf(design, thread) - floor(thread),
    netLoopBusyUsPerAgent: medianOf(design, busy) - floor(busy),
    wallMs: medianOf(design, (run) => run.wallMs),
    loopDelayP99Ms: medianOf(design, (run) => run.loopDelayP99Ms),
    loopDelayMaxMs: medianOf(design, (run) => run.loopDelayMaxMs),
    complete: Math.min(...runs.filter((run) => run.design === design).map((run) => run.complete)),
  }));
}

export function formatSummary(rows: DesignSummary[], agents: number): string {
  return formatGrid(
    [
      'design',
      'CPU µs/agent',
      'net',
      'of it kernel',
      'agents thread net',
      'loop busy net',
      'wall ms',
      'loop delay p99 ms',
      'max ms',
      'complete',
    ],
    rows.map((row) => [
      row.design,
      formatValue(row.cpuUsPerAgent),
      formatValue(row.netCpuUsPerAgent),
      formatValue(row.systemUsPerAgent),
      formatValue(row.netThreadUsPerAgent),
      formatValue(row.netLoopBusyUsPerAgent),
      formatValue(row.wallMs),
      formatValue(row.loopDelayP99Ms),
      formatValue(row.loopDelayMaxMs),
      `${row.complete}/${agents}`,
    ]),
    [1, 2, 3, 4, 5, 6, 7, 8],
  );
}

export async function runLogBench(
  options: LogBenchOptions,
  log: (line: string) => void,
): Promise<{ summary: DesignSummary[] } & Record<string, unknown>> {
  const runs: RunFigures[] = [];
  const loadBefore = os.loadavg();
  for (let round = 1; round <= options.runs; round++) {
    for (const design of options.designs) {
      const figures = await runInFreshProcess(design, options);
      runs.push(figures);
      log(
        `round ${round}/${options.runs} ${design}: ${formatValue(figures.cpuUsPerAgent)} CPU µs/agent, ` +
          `${formatValue(figures.wallMs)} ms, loop delay p99 ${formatValue(figures.loopDelayP99Ms)} ms`,
      );
    }
  }
  return {
    machine: {
      node: process.version,
      cpus: os.availableParallelism(),
      loadBefore,
      loadAfter: os.loadavg(),
    },
    options,
    summary: summarize(runs, options),
    runs,
  };
}

/**
 * `--run DESIGN` (with the options of the run) is the measuring process: it runs one design and
 * prints its figures as one JSON line.
 */
function splitRun(argv: string[]): { design: Design | undefined; rest: string[] } {
  const at = argv.indexOf('--run');
  if (at < 0) return { design: undefined, rest: argv };
  const [design] = parseDesigns(argv[at + 1] ?? '');
  return { design, rest: argv.filter((_, index) => index !== at && index !== at + 1) };
}

async function main(argv: string[]): Promise<number> {
  let options: LogBenchOptions | 'help';
  let design: Design | undefined;
  try {
    const split = splitRun(argv);
    design = split.design;
    options = parseLogBenchArgs(split.rest);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`log-designs: ${error.message}\n${USAGE}\n`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (design) {
    process.stdout.write(`${JSON.stringify(await runDesign(design, options))}\n`);
    return 0;
  }
  const report = await runLogBench(options, (line) => process.stderr.write(`${line}\n`));
  const table = formatSummary(report.summary, options.agents);
  if (options.json) {
    process.stderr.write(`${table}\n`);
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else process.stdout.write(`${table}\n`);
  return 0;
}

if (isEntryScript(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
