/** One `governor` case, run inside a fresh measuring process (see engine-process.ts). */
import { setMaxListeners } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Engine } from '../../src/main/engine.js';
import type { AgentEvent } from '../../src/shared/events.js';
import type { Governor } from '../../src/shared/governor/governor.js';
import { type AgentResult, emptyOutcomeCounts } from '../../src/shared/result.js';
import { runLimited } from '../common/limiter.js';
import { builtPath } from '../common/paths.js';
import { agentPrompt } from '../common/scenario.js';
import { EngineStartError } from '../engines/engines.js';
import type { GovernorJob, GovernorMeasurement, GovernorSample } from './governor-jobs.js';

const SAMPLE_EVERY_MS = 1000;

/** Sums of the step-end usage by step, and the retry events, as the agents report them. */
class StepTally {
  readonly inputTokens: number[] = [];
  readonly steps: number[] = [];
  readonly retries = { rateLimited: 0, overloaded: 0 };

  readonly onEvent = (event: AgentEvent): void => {
    if (event.type === 'step-end') {
      const index = event.step - 1;
      this.inputTokens[index] = (this.inputTokens[index] ?? 0) + event.usage.inputTokens;
      this.steps[index] = (this.steps[index] ?? 0) + 1;
    } else if (event.type === 'provider-retry') {
      if (event.code === 'rate_limited') this.retries.rateLimited++;
      if (event.code === 'overloaded') this.retries.overloaded++;
    }
  };

  means(): number[] {
    return Array.from(this.steps, (count, index) =>
      count ? (this.inputTokens[index] ?? 0) / count : 0,
    );
  }
}

function sample(governor: Governor): GovernorSample | undefined {
  const state = governor.states()[0];
  if (!state) return undefined;
  return {
    at: Date.now(),
    limit: state.limit,
    inFlight: state.inFlight,
    queued: state.queued,
    paused: state.pausedUntil !== undefined,
    ...(state.requests ? { requests: state.requests } : {}),
    ...(state.inputTokens ? { inputTokens: state.inputTokens } : {}),
  };
}

async function startCohort(job: GovernorJob, logDir: string): Promise<Engine> {
  try {
    return await Engine.start({
      provider: job.provider,
      logDir,
      toolModules: [builtPath('bench/common/work-tool.js')],
      governor: job.governor,
      ...(job.threads === undefined ? {} : { threads: job.threads }),
    });
  } catch (error) {
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    throw new EngineStartError(`cohort did not start: ${text}`, { cause: error });
  }
}

export async function measureGovernor(job: GovernorJob): Promise<GovernorMeasurement> {
  const { scenario, concurrency } = job;
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-'));
  const tally = new StepTally();
  const samples: GovernorSample[] = [];
  const begin = performance.now();
  const engine = await startCohort(job, logDir);
  const startMs = performance.now() - begin;
  const governor = engine.governor;
  const sampler = setInterval(() => {
    const taken = governor && sample(governor);
    if (taken) samples.push(taken);
  }, SAMPLE_EVERY_MS);
  // A case that would take longer than its cap is cut short rather than hanging the bench.
  const cap = AbortSignal.timeout(job.capMs);
  // Every running agent listens on it until it settles: as many listeners as the concurrency.
  setMaxListeners(0, cap);
  const firstStartAt = Date.now();
  let lastStartAt = firstStartAt;
  let results: AgentResult[];
  const cpuBefore = process.cpuUsage();
  let cpu: NodeJS.CpuUsage;
  try {
    ({ results } = await runLimited(scenario.agents, concurrency, (index) => {
      if (index === scenario.agents - 1) lastStartAt = Date.now();
      return engine.run({
        prompt: agentPrompt(index, scenario),
        title: `bench ${index}`,
        maxSteps: scenario.steps + 2,
        streamText: false,
        signal: cap,
        eventTypes: ['step-end', 'provider-retry'],
        onEvent: tally.onEvent,
      });
    }));
  } finally {
    cpu = process.cpuUsage(cpuBefore);
    clearInterval(sampler);
  }
  const endAt = Date.now();
  const finalState = governor?.states()[0];
  await engine.close();
  rmSync(logDir, { recursive: true, force: true });
  return {
    label: job.label,
    concurrency,
    agents: scenario.agents,
    ...tallyResults(results),
    startMs,
    processCpuMs: (cpu.user + cpu.system) / 1000,
    firstStartAt,
    lastStartAt,
    endAt,
    capped: cap.aborted,
    inputTokensByStep: tally.means(),
    retries: tally.retries,
    samples,
    ...(finalState ? { finalState } : {}),
  };
}

function tallyResults(
  results: AgentResult[],
): Pick<GovernorMeasurement, 'outcomes' | 'failureReasons' | 'providerCalls' | 'inputTokens'> {
  const outcomes = emptyOutcomeCounts();
  const reasons = new Set<string>();
  let providerCalls = 0;
  let inputTokens = 0;
  for (const result of results) {
    outcomes[result.outcome]++;
    providerCalls += result.usage.providerCalls;
    inputTokens += result.usage.inputTokens;
    if (result.outcome !== 'complete' && reasons.size < 5) {
      reasons.add(`${result.outcome}: ${result.reason ?? ''}`.slice(0, 200));
    }
  }
  return { outcomes, failureReasons: [...reasons], providerCalls, inputTokens };
}
