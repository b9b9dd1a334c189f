/**
 * The `lanes` part: the same agents (`--agents`, default 1000, × `--steps`, default 3: tool
 * steps, then the reply) in the realtime lane and in the batches lane, side by side in one run.
 * Each case gets a fresh engine and a fresh scripted model in this process, so the model's own
 * counters say how every step went: real-time requests (`POST /v1/messages`), batch requests
 * and batches. A batch of the model takes `--batch-latency-ms` (default 2 s) to end, stated in
 * the output; the real API's take minutes to hours, so the makespan of the batches lane here
 * shows the lane's mechanics (one batch per step of agents advancing together), not its real
 * wait. Dollars are at the scripted model's prices (Sonnet's), the batches lane at half of them.
 * The cases' order alternates each run; the figures are medians over `--runs`.
 */
import { Engine } from '../../src/main/engine.js';
import type { Lane } from '../../src/shared/lane/lane.js';
import type { AgentResult } from '../../src/shared/result.js';
import { startScriptedModel } from '../../src/testing/index.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from '../common/part.js';
import { builtPath } from '../common/paths.js';
import { agentPrompt, type Scenario, scenarioOf } from '../common/scenario.js';
import { median } from '../common/stats.js';
import { formatGrid } from '../common/table.js';
import { rotate } from '../concurrency/concurrency.js';

/** The part's own defaults where no flag says otherwise. */
const DEFAULTS = { agents: 1000, ttftMs: 200, cpuMs: 0 };

/** The lane's collector settings: how long a first waiting step waits, and the first poll. */
const BATCH_WINDOW_MS = 1000;
const BATCH_POLL_MS = 250;

const LANES: readonly Exclude<Lane, 'auto'>[] = ['realtime', 'batches'];

/** One case of one run, as measured. */
export interface LaneRun {
  lane: Exclude<Lane, 'auto'>;
  run: number;
  agents: number;
  complete: number;
  makespanMs: number;
  /** `POST /v1/messages` the model answered. */
  realtimeRequests: number;
  /** Requests the model took inside Message Batches. */
  batchRequests: number;
  batches: number;
  costUsd: number;
  steps: number;
}

export interface LanesSettings {
  scenario: Scenario;
  batchLatencyMs: number;
  runs: number;
  threads: number | undefined;
}

export function lanesSettings(context: BenchContext): LanesSettings {
  const { options } = context;
  return {
    scenario: scenarioOf(options, DEFAULTS),
    batchLatencyMs: options.batchLatencyMs,
    runs: options.runs,
    threads: options.threads,
  };
}

/** Runs every agent of the scenario in `lane` on a fresh engine and model. */
async function runLane(
  settings: LanesSettings,
  lane: Exclude<Lane, 'auto'>,
  run: number,
): Promise<LaneRun> {
  const { scenario } = settings;
  const model = await startScriptedModel({
    port: 0,
    ttftMs: scenario.ttftMs,
    tokensPerSecond: scenario.tps,
    batchLatencyMs: settings.batchLatencyMs,
  });
  try {
    const engine = await Engine.start({
      lane,
      batchWindowMs: BATCH_WINDOW_MS,
      batchPollMs: BATCH_POLL_MS,
      logs: 'none',
      toolModules: [builtPath('bench/common/work-tool.js')],
      maxSteps: scenario.steps + 1,
      ...(settings.threads === undefined ? {} : { threads: settings.threads }),
      provider: { baseURL: model.url, model: 'cohort-scripted' },
    });
    let results: AgentResult[];
    const started = performance.now();
    try {
      results = await Promise.all(
        Array.from({ length: scenario.agents }, (_, index) =>
          engine.run({ prompt: agentPrompt(index, scenario), streamText: false }),
        ),
      );
    } finally {
      await engine.close();
    }
    const makespanMs = performance.now() - started;
    const stats = model.stats;
    return {
      lane,
      run,
      agents: scenario.agents,
      complete: results.filter((result) => result.outcome === 'complete').length,
      makespanMs,
      realtimeRequests: stats.messages,
      batchRequests: stats.batchRequests,
      batches: stats.batchesCreated,
      costUsd: results.reduce((sum, result) => sum + (result.usage.costUsd ?? 0), 0),
      steps: results.reduce((sum, result) => sum + result.usage.steps, 0),
    };
  } finally {
    await model.close();
  }
}

/** The medians of each lane's runs. */
export interface LaneSummary {
  lane: Exclude<Lane, 'auto'>;
  agents: number;
  complete: number;
  makespanS: number;
  realtimeRequests: number;
  batchRequests: number;
  batches: number;
  costUsd: number;
}

export function summarize(runs: readonly LaneRun[]): LaneSummary[] {
  return LANES.map((lane) => {
    const mine = runs.filter((item) => item.lane === lane);
    const of = (pick: (item: LaneRun) => number) => median(mine.map(pick));
    return {
      lane,
      agents: mine[0]?.agents ?? 0,
      complete: of((item) => item.complete),
      makespanS: Number((of((item) => item.makespanMs) / 1000).toFixed(2)),
      realtimeRequests: of((item) => item.realtimeRequests),
      batchRequests: of((item) => item.batchRequests),
      batches: of((item) => item.batches),
      costUsd: of((item) => item.costUsd),
    };
  });
}

function report(settings: LanesSettings, runs: LaneRun[]): PartReport {
  const summary = summarize(runs);
  const { scenario } = settings;
  const rows: BenchRow[] = summary.flatMap((item) => {
    const row = (metric: string, value: number, unit: string): BenchRow => ({
      part: 'lanes',
      case: item.lane,
      metric,
      value,
      unit,
    });
    return [
      row('makespan', item.makespanS, 's'),
      row('real-time requests', item.realtimeRequests, 'requests'),
      row('batch requests', item.batchRequests, 'requests'),
      row('batches', item.batches, 'batches'),
      row('cost', item.costUsd, 'USD'),
    ];
  });
  const [realtime, batches] = summary;
  const ratio =
    realtime && batches && realtime.costUsd > 0 ? batches.costUsd / realtime.costUsd : Number.NaN;
  const table = [
    `lanes: ${scenario.agents} agents × ${scenario.steps} steps, ttft ${scenario.ttftMs} ms; a Message Batch of the scripted model ends ${settings.batchLatencyMs} ms after its create (the real API's: minutes to hours); window ${BATCH_WINDOW_MS} ms, first poll ${BATCH_POLL_MS} ms; medians of ${settings.runs} run(s)`,
    formatGrid(
      ['lane', 'complete', 'makespan s', 'real-time requests', 'batch requests', 'batches', '$'],
      summary.map((item) => [
        item.lane,
        `${item.complete}/${item.agents}`,
        item.makespanS.toFixed(2),
        String(item.realtimeRequests),
        String(item.batchRequests),
        String(item.batches),
        item.costUsd.toFixed(4),
      ]),
      [1, 2, 3, 4, 5, 6],
    ),
    `batches lane: ${Number.isFinite(ratio) ? `${(ratio * 100).toFixed(1)}% of the realtime lane's dollars` : 'no dollars to compare'}`,
  ].join('\n');
  return {
    rows,
    table,
    data: {
      scenario,
      batchLatencyMs: settings.batchLatencyMs,
      batchWindowMs: BATCH_WINDOW_MS,
      batchPollMs: BATCH_POLL_MS,
      runs,
      summary,
    },
  };
}

async function run(context: BenchContext): Promise<PartReport> {
  const settings = lanesSettings(context);
  const runs: LaneRun[] = [];
  for (let round = 0; round < settings.runs; round++) {
    for (const lane of rotate(LANES, round)) {
      const measured = await runLane(settings, lane, round);
      runs.push(measured);
      context.log(
        `bench: lanes, ${lane}, run ${round + 1}/${settings.runs}: ${measured.complete}/${measured.agents} complete in ${(measured.makespanMs / 1000).toFixed(1)} s, ` +
          `${measured.realtimeRequests} real-time request(s), ${measured.batchRequests} batch request(s) in ${measured.batches} batch(es), $${measured.costUsd.toFixed(4)}`,
      );
    }
  }
  return report(settings, runs);
}

/** The `lanes` part of `npm run bench`. */
export const lanesPart: BenchPart = {
  name: 'lanes',
  description:
    'the realtime lane and the batches lane side by side: makespan, real-time and batch requests, batches, dollars',
  run,
};
