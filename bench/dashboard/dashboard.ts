/**
 * The `dashboard` part: what the live dashboard costs the engine. The same agents (`--agents`,
 * default 1000, × `--steps`, default 3: work-tool steps of no CPU, then the reply) run on a
 * default-like engine (default threads, governor on, journal on) in four cases, each on a fresh
 * engine in this process against one scripted model in a process of its own:
 *   off            no dashboard;
 *   steps-off      `serveDashboard(engine, { steps: false })`;
 *   default        `serveDashboard(engine)`: each step's usage comes from its worker;
 *   default+client the same, with a live client in a process of its own reading `/api/events`
 *                  the whole time, as the page does (dashboard-client.ts).
 * The figure is the CPU time of this process (`process.cpuUsage()`: main and worker threads)
 * per provider call, from the dashboard served to the dashboard closed; the cases run
 * interleaved round by round (their order rotated each round), and each case's ratio to `off`
 * is taken within its round, then the median over `--runs` rounds.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serveDashboard } from '../../src/main/dashboard/dashboard.js';
import { Engine } from '../../src/main/engine.js';
import type { AgentResult } from '../../src/shared/result.js';
import { loadFlags, startModelProcess } from '../common/model-process.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from '../common/part.js';
import { builtPath } from '../common/paths.js';
import { agentPrompt, type Scenario, scenarioOf } from '../common/scenario.js';
import { median } from '../common/stats.js';
import { formatCount, formatGrid } from '../common/table.js';
import { rotate } from '../concurrency/concurrency.js';
import type { ClientTally } from './dashboard-client.js';

/** The part's own defaults where no flag says otherwise. */
const DEFAULTS = { agents: 1000, ttftMs: 200, cpuMs: 0 };

export const DASHBOARD_CASES = ['off', 'steps-off', 'default', 'default+client'] as const;
export type DashboardCase = (typeof DASHBOARD_CASES)[number];

const CASE_NOTES: Record<DashboardCase, string> = {
  off: 'no dashboard',
  'steps-off': 'dashboard, steps: false',
  default: 'dashboard, default options',
  'default+client': 'dashboard, default options, one live client',
};

/** One case of one round, as measured. */
export interface DashboardRun {
  case: DashboardCase;
  round: number;
  agents: number;
  complete: number;
  providerCalls: number;
  steps: number;
  /** This process's CPU (user + system, all threads) from serve to close, in ms. */
  cpuMs: number;
  cpuPerCallMs: number;
  wallMs: number;
  /** What the live client read (the `default+client` case only). */
  client?: ClientTally;
}

export interface DashboardSettings {
  scenario: Scenario;
  runs: number;
  threads: number | undefined;
}

export function dashboardSettings({ options }: Pick<BenchContext, 'options'>): DashboardSettings {
  return {
    scenario: scenarioOf(options, DEFAULTS),
    runs: options.runs,
    threads: options.threads,
  };
}

/** A running dashboard client process; `done` resolves to what it read once the stream ends. */
interface LiveClient {
  child: ChildProcess;
  done: Promise<ClientTally>;
}

/** Starts dashboard-client.js on `url` and resolves once its stream is open. */
async function startClient(url: string): Promise<LiveClient> {
  const child = spawn(process.execPath, [builtPath('bench/dashboard/dashboard-client.js'), url], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  let output = '';
  let connected: () => void = () => {};
  const isConnected = new Promise<void>((resolve) => {
    connected = resolve;
  });
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => {
    output += chunk;
    if (output.startsWith('connected\n')) connected();
  });
  const done = exited.then(([code]) => {
    const last = output.trim().split('\n').at(-1) ?? '';
    if (code !== 0 || !last.startsWith('{')) {
      throw new Error(`dashboard client exited with code ${code}: ${output}`);
    }
    return JSON.parse(last) as ClientTally;
  });
  await Promise.race([isConnected, done]);
  return { child, done };
}

/**
 * Runs every agent of the scenario on a fresh engine, watched as `kind` says (exported so that
 * one case can be run alone, e.g. under `node --cpu-prof`).
 */
export async function runDashboardCase(
  settings: DashboardSettings,
  modelUrl: string,
  kind: DashboardCase,
  round: number,
  agents = settings.scenario.agents,
): Promise<DashboardRun> {
  const { scenario } = settings;
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-dashboard-'));
  try {
    const engine = await Engine.start({
      logDir,
      toolModules: [builtPath('bench/common/work-tool.js')],
      maxSteps: scenario.steps + 1,
      ...(settings.threads === undefined ? {} : { threads: settings.threads }),
      provider: { baseURL: modelUrl, model: 'cohort-bench' },
    });
    try {
      const dashboard =
        kind === 'off'
          ? undefined
          : await serveDashboard(engine, kind === 'steps-off' ? { steps: false } : {});
      const client =
        kind === 'default+client' && dashboard ? await startClient(dashboard.url) : undefined;
      let results: AgentResult[];
      let tally: ClientTally | undefined;
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      try {
        results = await Promise.all(
          Array.from({ length: agents }, (_, index) =>
            engine.run({ prompt: agentPrompt(index, scenario), streamText: false }),
          ),
        );
      } finally {
        // The dashboard's last delta and `end` are its cost too; the client then exits.
        await dashboard?.close();
        tally = await client?.done;
      }
      const cpu = process.cpuUsage(cpuBefore);
      const wallMs = performance.now() - started;
      const cpuMs = (cpu.user + cpu.system) / 1000;
      const providerCalls = results.reduce((sum, result) => sum + result.usage.providerCalls, 0);
      return {
        case: kind,
        round,
        agents,
        complete: results.filter((result) => result.outcome === 'complete').length,
        providerCalls,
        steps: results.reduce((sum, result) => sum + result.usage.steps, 0),
        cpuMs,
        cpuPerCallMs: cpuMs / Math.max(1, providerCalls),
        wallMs,
        ...(tally === undefined ? {} : { client: tally }),
      };
    } finally {
      await engine.close();
    }
  } finally {
    rmSync(logDir, { recursive: true, force: true });
  }
}

/** The medians of each case's rounds; `ratioToOff` pairs each round with its own `off`. */
export interface DashboardSummary {
  case: DashboardCase;
  note: string;
  agents: number;
  complete: number;
  providerCalls: number;
  cpuPerCallMs: number;
  /** Median over rounds of (this case's CPU per call ÷ the `off` case's of the same round). */
  ratioToOff: number;
  ratios: number[];
  wallS: number;
}

export function summarize(runs: readonly DashboardRun[]): DashboardSummary[] {
  const offByRound = new Map(
    runs.filter((item) => item.case === 'off').map((item) => [item.round, item.cpuPerCallMs]),
  );
  return DASHBOARD_CASES.map((kind) => {
    const mine = runs.filter((item) => item.case === kind);
    const of = (pick: (item: DashboardRun) => number) => median(mine.map(pick));
    const ratios = mine.flatMap((item) => {
      const off = offByRound.get(item.round);
      return off === undefined || off === 0 ? [] : [item.cpuPerCallMs / off];
    });
    return {
      case: kind,
      note: CASE_NOTES[kind],
      agents: mine[0]?.agents ?? 0,
      complete: of((item) => item.complete),
      providerCalls: of((item) => item.providerCalls),
      cpuPerCallMs: of((item) => item.cpuPerCallMs),
      ratioToOff: median(ratios),
      ratios,
      wallS: of((item) => item.wallMs) / 1000,
    };
  });
}

function report(settings: DashboardSettings, runs: DashboardRun[]): PartReport {
  const summary = summarize(runs);
  const { scenario } = settings;
  const rows: BenchRow[] = summary.flatMap((item) => {
    const row = (metric: string, value: number, unit: string): BenchRow => ({
      part: 'dashboard',
      case: item.case,
      metric,
      value,
      unit,
      note: item.note,
    });
    return [
      row('cpu per call', item.cpuPerCallMs, 'ms'),
      row('cpu per call ÷ off', item.ratioToOff, 'ratio'),
      row('wall', item.wallS, 's'),
    ];
  });
  const clients = runs.flatMap((item) => (item.client ? [item.client] : []));
  const clientLine =
    clients.length === 0
      ? []
      : [
          `live client (median of ${clients.length}): ${formatCount(median(clients.map((item) => item.events.delta ?? 0)))} deltas, ` +
            `${(median(clients.map((item) => item.streamBytes)) / 1024).toFixed(0)} KiB of events`,
        ];
  const table = [
    `dashboard: ${scenario.agents} agents × ${scenario.steps} steps (work-tool steps of ${scenario.cpuMs} ms CPU, then the reply), ttft ${scenario.ttftMs} ms; ` +
      `a fresh engine per case (threads ${settings.threads ?? 'default'}, governor on, journal on); the scripted model and the client in processes of their own; ` +
      `CPU of this process (all threads) per provider call; cases interleaved, medians of ${settings.runs} round(s), ratios paired by round`,
    formatGrid(
      ['case', 'complete', 'calls', 'cpu ms/call', '÷ off', 'wall s', ''],
      summary.map((item) => [
        item.case,
        `${formatCount(item.complete)}/${item.agents}`,
        formatCount(item.providerCalls),
        item.cpuPerCallMs.toFixed(3),
        item.ratioToOff.toFixed(3),
        item.wallS.toFixed(2),
        item.note,
      ]),
      [1, 2, 3, 4, 5],
    ),
    ...clientLine,
  ].join('\n');
  return { rows, table, data: { scenario, threads: settings.threads, runs, summary } };
}

async function run(context: BenchContext): Promise<PartReport> {
  const settings = dashboardSettings(context);
  const { scenario } = settings;
  const model = await startModelProcess(loadFlags({ ttftMs: scenario.ttftMs, tps: scenario.tps }));
  const runs: DashboardRun[] = [];
  try {
    // The first engine in this process runs cold (its JIT, the dashboard's too): an unmeasured
    // case with a live client on a quarter of the agents goes first.
    const warmUp = await runDashboardCase(
      settings,
      model.url,
      'default+client',
      -1,
      Math.ceil(scenario.agents / 4),
    );
    context.log(
      `bench: dashboard, warm-up (not measured): ${warmUp.complete}/${warmUp.agents} complete`,
    );
    for (let round = 0; round < settings.runs; round++) {
      for (const kind of rotate(DASHBOARD_CASES, round)) {
        const measured = await runDashboardCase(settings, model.url, kind, round);
        runs.push(measured);
        context.log(
          `bench: dashboard, ${kind}, round ${round + 1}/${settings.runs}: ${measured.complete}/${measured.agents} complete in ${(measured.wallMs / 1000).toFixed(1)} s, ` +
            `${measured.providerCalls} calls, ${measured.cpuPerCallMs.toFixed(3)} cpu ms/call`,
        );
      }
    }
  } finally {
    await model.stop();
  }
  return report(settings, runs);
}

/** The `dashboard` part of `npm run bench`. */
export const dashboardPart: BenchPart = {
  name: 'dashboard',
  description:
    "the live dashboard's cost to the engine: CPU per call with none, with steps off, at its defaults, and with a live client",
  run,
};
