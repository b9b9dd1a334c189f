/**
 * The `peers` part: cohort at its defaults side by side with the loops people write on other
 * libraries: by hand on the official SDK (`sdk-loop`), the Vercel AI SDK's `generateText` with
 * tools and `stopWhen` (`ai-sdk`), LangChain's `ChatAnthropic` with bound tools (`langchain`).
 * The same scenario as the concurrency part's target (2,000 agents × 3 steps at concurrency 200,
 * ttft 200 ms, no tool CPU) on one scripted model in its own process; each case in a fresh
 * measuring process (concurrency-case.ts), the engines' order rotated round by round. Figures:
 * CPU per provider call, efficiency and wall time, medians over the rounds with their spread.
 */
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import { loadFlags, processCpuMs, startModelProcess } from '../common/model-process.js';
import type { BenchOptions } from '../common/options.js';
import type { BenchContext, BenchPart, PartReport } from '../common/part.js';
import { idealAgentMs, idealMakespanMs, type Scenario, scenarioOf } from '../common/scenario.js';
import { formatTable } from '../common/table.js';
import { rotate } from '../concurrency/concurrency.js';
import { type EngineName, PEER_ENGINES } from '../engines/engines.js';
import { localModelEnv, measureInFreshProcess } from '../engines/fork.js';
import type { ConcurrencyJob, ConcurrencyMeasurement } from '../engines/jobs.js';
import { peersChartSpec } from './peers-chart.js';
import { peersGrid, peersRows, type RoundMeasurement, summarisePeers } from './peers-summary.js';

/** The part's own defaults where no flag says otherwise: the throughput target's scenario. */
const DEFAULTS = { agents: 2000, concurrency: 200, ttftMs: 200, cpuMs: 0, runs: 3 };

export interface PeersSettings {
  scenario: Scenario;
  concurrency: number;
  engines: EngineName[];
  rounds: number;
}

export function peersSettings(options: BenchOptions): PeersSettings {
  const given = (flag: string) => options.given.includes(flag);
  return {
    scenario: scenarioOf(options, DEFAULTS),
    // One level: the highest of a list.
    concurrency: given('concurrency') ? Math.max(...options.concurrency) : DEFAULTS.concurrency,
    engines: given('engines') ? options.engines : [...PEER_ENGINES],
    rounds: given('runs') ? options.runs : DEFAULTS.runs,
  };
}

async function run(context: BenchContext): Promise<PartReport> {
  const { options, log } = context;
  const settings = peersSettings(options);
  const { scenario, concurrency, engines, rounds } = settings;
  const server = await startModelProcess(
    loadFlags({ ttftMs: scenario.ttftMs, tps: scenario.tps, jitter: options.jitter }),
  );
  const provider: Partial<ProviderConfig> = {
    baseURL: server.url,
    model: 'cohort-bench',
    maxRetries: options.maxRetries,
    transport: options.transport,
  };
  const env = localModelEnv();
  const measurements: RoundMeasurement[] = [];
  const startFailures: string[] = [];
  const job = (engine: EngineName, agents: number): ConcurrencyJob => ({
    kind: 'concurrency',
    engine,
    concurrency,
    scenario: { ...scenario, agents },
    provider,
    // cohort at its defaults: the governor on, unless --governor off asks otherwise.
    ...(options.governor ? {} : { governorOff: true }),
    ...(engine === 'cohort' && options.threads !== undefined ? { threads: options.threads } : {}),
  });
  try {
    // The scripted model's first calls run cold (its JIT): an unmeasured case on a quarter of the
    // agents goes first, or round 1's first engine would pay for it.
    const warmUp = await measureInFreshProcess<ConcurrencyMeasurement>(
      job('sdk-loop', Math.ceil(scenario.agents / 4)),
      { env, log, startFailures },
    );
    log(
      `bench: peers, warm-up (not measured): ${warmUp.outcomes.complete}/${warmUp.agents} complete`,
    );
    for (let round = 0; round < rounds; round++) {
      for (const engine of rotate(engines, round)) {
        const modelCpuBefore = processCpuMs(server.child.pid);
        const measurement = await measureInFreshProcess<ConcurrencyMeasurement>(
          job(engine, scenario.agents),
          { env, log, startFailures },
        );
        const modelCpuAfter = processCpuMs(server.child.pid);
        measurement.modelCpuMs =
          modelCpuBefore === undefined || modelCpuAfter === undefined
            ? null
            : modelCpuAfter - modelCpuBefore;
        measurements.push({ ...measurement, round });
        const seconds = measurement.makespanMs / 1000;
        const efficiency = idealMakespanMs(scenario, concurrency) / measurement.makespanMs;
        log(
          `bench: peers, ${engine}, round ${round + 1}/${rounds}: ` +
            `${measurement.outcomes.complete}/${measurement.agents} complete in ${seconds.toFixed(2)} s, ` +
            `${(measurement.processCpuMs / Math.max(1, measurement.providerCalls)).toFixed(2)} cpu ms/call, ` +
            `efficiency ${efficiency.toFixed(3)}`,
        );
      }
    }
  } finally {
    await server.stop();
  }
  const { summary, ratios } = summarisePeers({ measurements, engines, rounds, scenario });
  const rows = peersRows(summary, ratios);
  const subtitle =
    `${scenario.agents} agents × ${scenario.steps} steps at concurrency ${concurrency}; ` +
    `scripted model (own process): ttft ${scenario.ttftMs} ms, tps ${scenario.tps || 'unpaced'}, ` +
    `cpu ${scenario.cpuMs} ms/tool call; cohort at its defaults (transport ${options.transport}, ` +
    `governor ${options.governor ? 'on' : 'off'}, logs on); ${options.maxRetries} retries each; ` +
    `medians of ${rounds} round(s), lowest–highest round in brackets`;
  const failures = measurements
    .filter((item) => item.failureReasons.length > 0)
    .map(
      (item) =>
        `not complete: ${item.engine}, round ${item.round + 1}: ${item.failureReasons.join(' | ')}`,
    );
  const table = [
    `${subtitle}; ideal agent time ${idealAgentMs(scenario).toFixed(0)} ms`,
    '',
    peersGrid(summary, ratios),
    ...(failures.length > 0 ? ['', ...failures.slice(0, 10)] : []),
    '',
    formatTable(rows),
  ].join('\n');
  return {
    rows,
    table,
    data: {
      scenario,
      concurrency,
      engines,
      rounds,
      transport: options.transport,
      governor: options.governor,
      maxRetries: options.maxRetries,
      idealAgentMs: idealAgentMs(scenario),
      idealMakespanMs: idealMakespanMs(scenario, concurrency),
      summary,
      ratios,
      startFailures,
      measurements,
    },
    chart: peersChartSpec({ summary, engines, subtitle }),
  };
}

/** The `peers` part of `npm run bench`. */
export const peersPart: BenchPart = {
  name: 'peers',
  description:
    'cohort at its defaults vs sdk-loop, the Vercel AI SDK and LangChain: CPU per call, efficiency, wall',
  run,
};
