/**
 * `npm run bench:governor-adaptive`: the figures the governor's adaptive concurrency was chosen
 * by. Three scenarios (a server that refuses past its capacity, rate limits learned from
 * headers, a ramp limit) run with each concurrency control (`aimd`, `gradient`, `fixed`), each
 * run on a fresh engine and a fresh scripted model, the controls rotated across rounds; the
 * table shows medians. Results and reading: docs/GOVERNOR.md.
 *
 * The scripted model runs in a child process (this same file, forked with `--model-process`),
 * so its CPU does not compete with the engine's event loop, and reports its own counts.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Engine } from '../../src/main/engine.js';
import { mapAgents } from '../../src/main/map-agents.js';
import type { ConcurrencyControl } from '../../src/shared/governor/concurrency.js';
import type { GovernorOptions } from '../../src/shared/governor/types.js';
import {
  type ScriptedModelOptions,
  type ScriptedModelStats,
  startScriptedModel,
} from '../../src/testing/index.js';
import { builtPath } from '../common/paths.js';
import { agentPrompt } from '../common/scenario.js';
import { median } from '../common/stats.js';
import { formatCount, formatGrid } from '../common/table.js';

export type ScenarioName = 'capacity' | 'rate-limits' | 'ramp';

export interface AdaptiveScenario {
  name: ScenarioName;
  agents: number;
  /** Provider requests per agent: a `work` tool step, then the reply. */
  steps: number;
  /** Agents in flight at once, and the `fixed` control's window. */
  concurrency: number;
  model: ScriptedModelOptions;
}

/**
 * Each call takes ~0.4 to 0.6 s: 150 ms to the first token, then 3 to 4 output tokens at 10 a
 * second. Each scenario binds on one thing, and a run takes seconds.
 */
const CALL = { ttftMs: 150, tokensPerSecond: 10 };

export const SCENARIOS: Record<ScenarioName, AdaptiveScenario> = {
  // 48 streams of ~0.5 s serve ~100 requests a second: 200 agents in flight overload it.
  capacity: {
    name: 'capacity',
    agents: 300,
    steps: 2,
    concurrency: 200,
    model: { ...CALL, maxStreams: 48 },
  },
  // ~310 input tokens a request: the itpm allows ~29 requests a second, the rpm 40. A 5 s
  // bucket holds ~145 requests' worth, so the 200 first requests overrun it.
  'rate-limits': {
    name: 'rate-limits',
    agents: 200,
    steps: 2,
    concurrency: 200,
    model: { ...CALL, rpm: 2400, itpm: 540_000, bucketSeconds: 5 },
  },
  // From idle about 10 requests a second pass, growing as the average rate catches up; the rpm
  // is there only for its headers, and never binds.
  ramp: {
    name: 'ramp',
    agents: 100,
    steps: 2,
    concurrency: 200,
    model: { ...CALL, acceleration: 10, rpm: 60_000 },
  },
};

/** The scenario in one line, from its settings. */
export function describeScenario(scenario: AdaptiveScenario): string {
  const settings = Object.entries(scenario.model)
    .map(([name, value]) => `${name} ${value}`)
    .join(', ');
  return `${scenario.name}: ${scenario.agents} agents × ${scenario.steps} steps at concurrency ${scenario.concurrency}; model ${settings}`;
}

export const CONTROLS: readonly ConcurrencyControl[] = ['aimd', 'gradient', 'fixed'];

/** One run's figures. Counts of 429 and 529 are the server's own. */
export interface RunFigures {
  scenario: ScenarioName;
  control: ConcurrencyControl;
  round: number;
  agents: number;
  /** From the first spawn to the last result, ms (engine start-up excluded). */
  wallMs: number;
  agentsPerSecond: number;
  completed: number;
  failed: number;
  /** Input tokens per successful request, as the model reported them: what an itpm limit sees. */
  inputTokensPerStep: number;
  /** Up to three distinct reasons of agents that did not complete. */
  failureReasons: string[];
  server: ScriptedModelStats;
  /** The governor's own counts: what it admitted, and the refusals it was told of. */
  governor: { admitted: number; rateLimited: number; overloaded: number };
  /** The window at the end, and its mean and the mean in flight, sampled every 100 ms. */
  finalLimit: number;
  meanLimit: number;
  meanInFlight: number;
}

// ---- the model in a child process ----------------------------------------------------------

interface ModelHandle {
  url: string;
  stats(): Promise<ScriptedModelStats>;
  stop(): Promise<void>;
}

/** Forks this file as the model's process and waits for its URL. */
async function startModelProcess(options: ScriptedModelOptions): Promise<ModelHandle> {
  const child = fork(builtPath('bench/governor/governor-adaptive.js'), ['--model-process'], {
    // Not the parent's flags: under vitest they name its own loaders.
    execArgv: [],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  const listening = nextMessage(child);
  child.send(options);
  const first = await listening;
  if (first.type !== 'listening')
    throw new Error(`Expected a listening message, got ${first.type}`);
  return {
    url: first.url,
    stats: async () => {
      child.send({ type: 'stats' });
      const reply = await nextMessage(child);
      if (reply.type !== 'stats') throw new Error(`Expected a stats message, got ${reply.type}`);
      return reply.stats;
    },
    stop: async () => {
      child.disconnect();
      await exited;
    },
  };
}

type ModelMessage =
  | { type: 'listening'; url: string }
  | { type: 'stats'; stats: ScriptedModelStats };

function nextMessage(child: ChildProcess): Promise<ModelMessage> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`the model process exited (${code}) before it answered`));
    child.once('exit', onExit);
    child.once('message', (message) => {
      child.off('exit', onExit);
      resolve(message as ModelMessage);
    });
  });
}

/** The child's side: serve until the parent disconnects. */
function serveModelProcess(): void {
  process.once('message', async (options: ScriptedModelOptions) => {
    const model = await startScriptedModel(options);
    process.on('message', (message: { type?: string }) => {
      if (message.type === 'stats') process.send?.({ type: 'stats', stats: model.stats });
    });
    process.once('disconnect', () => void model.close());
    process.send?.({ type: 'listening', url: model.url });
  });
}

// ---- one run --------------------------------------------------------------------------------

function governorOptions(control: ConcurrencyControl, concurrency: number): GovernorOptions {
  // Nothing else is configured: the adaptive controls learn everything from the responses, and
  // every run starts cold (no state file from an earlier run).
  return control === 'fixed'
    ? { concurrencyControl: 'fixed', maxConcurrency: concurrency, state: false }
    : { concurrencyControl: control, state: false };
}

/** Runs one scenario with one control on a fresh engine against a fresh model. */
export async function runOnce(
  scenario: AdaptiveScenario,
  control: ConcurrencyControl,
  round = 0,
): Promise<RunFigures> {
  const model = await startModelProcess(scenario.model);
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-adaptive-'));
  try {
    const engine = await Engine.start({
      threads: 2,
      logs: 'none',
      logDir,
      toolModules: [builtPath('bench/common/work-tool.js')],
      provider: { baseURL: model.url, model: 'cohort-scripted' },
      governor: governorOptions(control, scenario.concurrency),
    });
    try {
      const measured = await measure(engine, scenario);
      const state = engine.governor?.states()[0];
      return {
        scenario: scenario.name,
        control,
        round,
        agents: scenario.agents,
        ...measured,
        server: await model.stats(),
        governor: {
          admitted: state?.admitted ?? 0,
          rateLimited: state?.rateLimited ?? 0,
          overloaded: state?.overloaded ?? 0,
        },
        finalLimit: state?.limit ?? 0,
      };
    } finally {
      await engine.close();
    }
  } finally {
    await model.stop();
    rmSync(logDir, { recursive: true, force: true });
  }
}

type Measured = Pick<
  RunFigures,
  | 'wallMs'
  | 'agentsPerSecond'
  | 'completed'
  | 'failed'
  | 'inputTokensPerStep'
  | 'failureReasons'
  | 'meanLimit'
  | 'meanInFlight'
>;

async function measure(engine: Engine, scenario: AdaptiveScenario): Promise<Measured> {
  const specs = Array.from({ length: scenario.agents }, (_, index) => ({
    prompt: agentPrompt(index, { steps: scenario.steps, cpuMs: 0 }),
    title: `adaptive ${index}`,
    maxSteps: scenario.steps + 2,
  }));
  const limits: number[] = [];
  const inFlight: number[] = [];
  const sampler = setInterval(() => {
    const state = engine.governor?.states()[0];
    if (state === undefined) return;
    limits.push(state.limit);
    inFlight.push(state.inFlight);
  }, 100);
  const begin = performance.now();
  let completed = 0;
  let inputTokens = 0;
  let steps = 0;
  const reasons = new Set<string>();
  try {
    for await (const { result } of mapAgents(engine, specs, {
      concurrency: scenario.concurrency,
    })) {
      inputTokens += result.usage.inputTokens;
      steps += result.usage.steps;
      if (result.outcome === 'complete') completed++;
      else if (reasons.size < 3) reasons.add(`${result.outcome}: ${result.reason ?? ''}`);
    }
  } finally {
    clearInterval(sampler);
  }
  const wallMs = performance.now() - begin;
  const mean = (values: number[]) =>
    values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length;
  return {
    wallMs,
    agentsPerSecond: completed / (wallMs / 1000),
    completed,
    failed: scenario.agents - completed,
    inputTokensPerStep: steps === 0 ? 0 : inputTokens / steps,
    failureReasons: [...reasons],
    meanLimit: mean(limits),
    meanInFlight: mean(inFlight),
  };
}

// ---- rounds and medians ---------------------------------------------------------------------

export interface AdaptiveOptions {
  rounds?: number;
  /** Agents per scenario, overriding each scenario's own count. */
  agents?: number;
  scenarios?: ScenarioName[];
  controls?: readonly ConcurrencyControl[];
  /** Progress, one line per run. */
  log?: (line: string) => void;
}

export interface MedianRow {
  scenario: ScenarioName;
  control: ConcurrencyControl;
  runs: number;
  wallSeconds: number;
  agentsPerSecond: number;
  requests: number;
  rateLimited429: number;
  overloaded529: number;
  /** Of all requests the server received, in %. */
  rateLimitedPercent: number;
  overloadedPercent: number;
  failed: number;
  finalLimit: number;
  meanLimit: number;
  meanInFlight: number;
}

export interface AdaptiveReport {
  scenarios: AdaptiveScenario[];
  runs: RunFigures[];
  medians: MedianRow[];
}

/**
 * Runs every scenario with every control, `rounds` times. Within a round the controls go in a
 * rotated order (ABC, BCA, CAB, …), so no control always runs first on a cold machine.
 */
export async function runAdaptive(options: AdaptiveOptions = {}): Promise<AdaptiveReport> {
  const rounds = options.rounds ?? 3;
  const controls = options.controls ?? CONTROLS;
  const scenarios = (options.scenarios ?? (Object.keys(SCENARIOS) as ScenarioName[])).map(
    (name) => ({
      ...SCENARIOS[name],
      ...(options.agents === undefined ? {} : { agents: options.agents }),
    }),
  );
  const runs: RunFigures[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const scenario of scenarios) {
      for (let turn = 0; turn < controls.length; turn++) {
        const control = controls[(round + turn) % controls.length]!;
        const figures = await runOnce(scenario, control, round);
        options.log?.(describeRun(figures));
        runs.push(figures);
      }
    }
  }
  const rows = scenarios.flatMap((scenario) =>
    controls.map((control) =>
      medianRow(runs.filter((run) => run.scenario === scenario.name && run.control === control)),
    ),
  );
  return { scenarios, runs, medians: rows };
}

function medianRow(runs: RunFigures[]): MedianRow {
  const of = (pick: (run: RunFigures) => number) => median(runs.map(pick));
  const percent = (count: number, total: number) => (total === 0 ? 0 : (100 * count) / total);
  return {
    scenario: runs[0]!.scenario,
    control: runs[0]!.control,
    runs: runs.length,
    wallSeconds: of((run) => run.wallMs / 1000),
    agentsPerSecond: of((run) => run.agentsPerSecond),
    requests: of((run) => run.server.requests),
    rateLimited429: of((run) => run.server.rateLimited429),
    overloaded529: of((run) => run.server.overloaded529),
    rateLimitedPercent: of((run) => percent(run.server.rateLimited429, run.server.requests)),
    overloadedPercent: of((run) => percent(run.server.overloaded529, run.server.requests)),
    failed: of((run) => run.failed),
    finalLimit: of((run) => run.finalLimit),
    meanLimit: of((run) => run.meanLimit),
    meanInFlight: of((run) => run.meanInFlight),
  };
}

function describeRun(run: RunFigures): string {
  const { server } = run;
  return (
    `round ${run.round + 1} ${run.scenario} ${run.control}: ${(run.wallMs / 1000).toFixed(1)} s, ` +
    `${run.completed}/${run.agents} complete, ${server.requests} requests, ` +
    `${server.rateLimited429} × 429, ${server.overloaded529} × 529, final limit ${run.finalLimit}`
  );
}

/** The medians as a Markdown table, one row per scenario and control. */
export function formatMedians(rows: MedianRow[]): string {
  const cells = rows.map((row) => [
    row.scenario,
    row.control,
    row.wallSeconds.toFixed(1),
    row.agentsPerSecond.toFixed(1),
    formatCount(row.requests),
    `${formatCount(row.rateLimited429)} (${row.rateLimitedPercent.toFixed(1)}%)`,
    `${formatCount(row.overloaded529)} (${row.overloadedPercent.toFixed(1)}%)`,
    formatCount(row.failed),
    formatCount(row.finalLimit),
    row.meanLimit.toFixed(0),
    row.meanInFlight.toFixed(0),
  ]);
  const header = [
    'scenario',
    'control',
    'wall s',
    'agents/s',
    'requests',
    '429 (% req)',
    '529 (% req)',
    'failed',
    'final limit',
    'mean limit',
    'mean in flight',
  ];
  return formatGrid(header, cells, [2, 3, 4, 5, 6, 7, 8, 9, 10]);
}

// ---- command line -----------------------------------------------------------------------------

const USAGE = `Usage: node dist/bench/governor/governor-adaptive.js [--rounds N] [--agents N] [--scenarios a,b] [--json]
  --rounds N      rounds of every scenario × control (default 3)
  --agents N      agents per scenario (default: capacity 300, rate-limits 200, ramp 100)
  --scenarios L   comma-separated: capacity, rate-limits, ramp (default all)
  --json          print the whole report (every run and the medians) as JSON
`;

function positive(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`Expected --${flag} to be a whole number from 1 and up, got \`${text}\``);
  }
  return value;
}

function parseFlags(argv: string[]): AdaptiveOptions & { json: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string' },
      agents: { type: 'string' },
      scenarios: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const names = values.scenarios?.split(',').map((name) => name.trim());
  const unknown = names?.find((name) => !(name in SCENARIOS));
  if (unknown !== undefined) {
    throw new Error(
      `Expected --scenarios to name ${Object.keys(SCENARIOS).join(', ')}, got \`${unknown}\``,
    );
  }
  const rounds = positive('rounds', values.rounds);
  const agents = positive('agents', values.agents);
  return {
    json: values.json === true,
    ...(rounds === undefined ? {} : { rounds }),
    ...(agents === undefined ? {} : { agents }),
    ...(names === undefined ? {} : { scenarios: names as ScenarioName[] }),
  };
}

async function main(argv: string[]): Promise<void> {
  let flags: ReturnType<typeof parseFlags>;
  try {
    flags = parseFlags(argv);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const report = await runAdaptive({ ...flags, log });
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return;
  }
  for (const scenario of report.scenarios) process.stdout.write(`${describeScenario(scenario)}\n`);
  process.stdout.write(`\n${formatMedians(report.medians)}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--model-process')) serveModelProcess();
  else await main(process.argv.slice(2));
}
