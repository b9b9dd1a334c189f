/** One concurrency case, run inside a fresh measuring process (see engine-process.ts). */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AgentEvent } from '../../src/shared/events.js';
import {
  type AgentOutcome,
  type AgentResult,
  emptyOutcomeCounts,
  emptyUsage,
} from '../../src/shared/result.js';
import { type LimitedRun, runLimited } from '../common/limiter.js';
import { builtPath } from '../common/paths.js';
import { MainThreadProbe, type ProbeFigures } from '../common/probes.js';
import { agentPrompt, CHARS_PER_TOKEN, sharedSystemPrompt } from '../common/scenario.js';
import { spread } from '../common/stats.js';
import { startEngine } from '../engines/engines.js';
import type { ConcurrencyJob, ConcurrencyMeasurement, SharedSystem } from '../engines/jobs.js';

/** An agent whose cache writes reach this share of the shared prompt wrote the prefix itself. */
const PREFIX_WRITE_SHARE = 0.9;

/** Agents of `results` that wrote a shared prefix themselves (see `prefixWriters`). */
function prefixWriters(results: readonly AgentResult[], system: SharedSystem): number {
  const threshold = PREFIX_WRITE_SHARE * (system.chars / CHARS_PER_TOKEN);
  return results.filter((result) => result.usage.cacheWriteTokens >= threshold).length;
}

export async function measureConcurrency(job: ConcurrencyJob): Promise<ConcurrencyMeasurement> {
  const { scenario, concurrency } = job;
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-'));
  const retries = { rate_limited: 0, overloaded: 0 };
  const onEvent = (event: AgentEvent): void => {
    if (event.type !== 'provider-retry') return;
    if (event.code === 'rate_limited' || event.code === 'overloaded') retries[event.code]++;
  };
  const prompts = Array.from({ length: scenario.agents }, (_, index) =>
    agentPrompt(index, scenario),
  );
  const { system } = job;
  const systems = system
    ? Array.from({ length: system.prefixes }, (_, prefix) =>
        sharedSystemPrompt(system.chars, prefix),
      )
    : [];
  const baselineRssBytes = process.memoryUsage.rss();
  const begin = performance.now();
  const engine = await startEngine(job.engine, {
    provider: job.provider,
    logDir,
    toolModules: [builtPath('bench/common/work-tool.js')],
    concurrency,
    threads: job.threads,
    ...(job.governorOff ? { governor: { enabled: false } } : {}),
    ...(job.tracing ? { tracing: true } : {}),
    ...(job.cache === undefined ? {} : { cache: job.cache }),
  });
  const startMs = performance.now() - begin;
  const probe = new MainThreadProbe();
  probe.start();
  const cpuBefore = process.cpuUsage();
  let run: LimitedRun<AgentResult>;
  let probed: ProbeFigures;
  let cpu: NodeJS.CpuUsage;
  try {
    run = await runLimited(scenario.agents, concurrency, (index) =>
      engine.run({
        prompt: prompts[index]!,
        ...(systems.length === 0 ? {} : { system: systems[index % systems.length] }),
        title: `bench ${index}`,
        // Room for the nudge step a confused real model may need; the script never uses it.
        maxSteps: scenario.steps + 2,
        onEvent,
      }),
    );
  } finally {
    probed = probe.stop();
    cpu = process.cpuUsage(cpuBefore);
    await engine.close();
    rmSync(logDir, { recursive: true, force: true });
  }
  const outcomes: Record<AgentOutcome, number> = emptyOutcomeCounts();
  const usage = emptyUsage();
  const reasons = new Set<string>();
  let rateLimited = retries.rate_limited;
  let overloaded = retries.overloaded;
  let costUsd: number | null = null;
  for (const result of run.results) {
    outcomes[result.outcome]++;
    usage.providerCalls += result.usage.providerCalls;
    usage.steps += result.usage.steps;
    usage.inputTokens += result.usage.inputTokens;
    usage.outputTokens += result.usage.outputTokens;
    usage.cacheReadTokens += result.usage.cacheReadTokens;
    usage.cacheWriteTokens += result.usage.cacheWriteTokens;
    if (result.usage.costUsd !== undefined) costUsd = (costUsd ?? 0) + result.usage.costUsd;
    if (result.outcome !== 'complete' && reasons.size < 5) {
      reasons.add(`${result.outcome}: ${result.reason ?? ''}`.slice(0, 200));
    }
    // The last attempt's 429/529 is no retry event: it is in the failure reason.
    if (result.code === 'rate_limited') rateLimited++;
    if (result.code === 'overloaded') overloaded++;
  }
  return {
    engine: job.engine,
    concurrency,
    agents: scenario.agents,
    threads: engine.threads,
    outcomes,
    failureReasons: [...reasons],
    startMs,
    makespanMs: run.makespanMs,
    providerCalls: usage.providerCalls,
    steps: usage.steps,
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    cacheReadTokens: usage.cacheReadTokens,
    cacheWriteTokens: usage.cacheWriteTokens,
    ...(system ? { prefixWriters: prefixWriters(run.results, system) } : {}),
    costUsd,
    latencyMs: spread(run.latenciesMs),
    rateLimited,
    overloaded,
    eventLoopDelayMs: probed.eventLoopDelay,
    baselineRssBytes,
    peakRssBytes: probed.peakRssBytes,
    maxLive: run.maxLive,
    processCpuMs: (cpu.user + cpu.system) / 1000,
  };
}
