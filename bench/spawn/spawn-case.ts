/** One spawn/memory case, run inside a fresh measuring process (see engine-process.ts). */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentEvent } from '../../src/shared/events.js';
import {
  type AgentOutcome,
  type AgentResult,
  emptyOutcomeCounts,
} from '../../src/shared/result.js';
import { scriptBlock } from '../../src/testing/index.js';
import { MainThreadProbe } from '../common/probes.js';
import { median, spread } from '../common/stats.js';
import { startEngine } from '../engines/engines.js';
import type { SpawnJob, SpawnMeasurement } from '../engines/jobs.js';

/** A child that asks once and is kept waiting (ten minutes) until it is cancelled. */
const PARKED = `Wait for the answer.\n\n${scriptBlock({ steps: [{ delayMs: 600_000, reply: 'x' }] })}`;
const QUICK = `Reply at once.\n\n${scriptBlock({ steps: [{ reply: 'warm' }] })}`;
/** Warm-up children: enough to give every thread (up to 256) its first child. */
const WARM_UP = 256;

export async function measureSpawn(job: SpawnJob): Promise<SpawnMeasurement> {
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-'));
  const baselineRssBytes = process.memoryUsage.rss();
  const begin = performance.now();
  const engine = await startEngine(job.engine, {
    // Neither the request timeout nor the stream idle timer may end a parked request.
    provider: {
      ...job.provider,
      requestTimeoutMs: 3_600_000,
      idleTimeoutMs: 3_600_000,
      maxRetries: 0,
    },
    logDir,
    toolModules: [],
    concurrency: job.children,
    threads: job.threads,
    // "First request" is the child's `step-start`, which the loop emits before the rate-limit
    // governor admits the request. With the governor on (the engine's default), its slow-start
    // window would hold all but a few hundred parked requests on main, so the bench would time
    // loop starts, not requests reaching the provider. Off, every child's request goes out.
    governor: { enabled: false },
    agentsPerThread:
      job.engine === 'cohort'
        ? Math.ceil(Math.max(job.children, WARM_UP) / (job.threads ?? os.availableParallelism()))
        : undefined,
  });
  const startMs = performance.now() - begin;
  const results: Promise<AgentResult>[] = [];
  try {
    // Warm: each thread has built its provider client and opened connections.
    const warm = Math.min(WARM_UP, engine.name === 'cohort' ? job.children : engine.threads);
    await Promise.all(
      Array.from({ length: warm }, (_, index) =>
        engine.run({ prompt: QUICK, title: `warm ${index}`, maxSteps: 1 }),
      ),
    );
    await sleep(200);
    const warmRssBytes = process.memoryUsage.rss();
    const probe = new MainThreadProbe();
    probe.start();
    const firstRequest: number[] = [];
    const spawnBegin = performance.now();
    for (let first = 0; first < job.children; first += job.wave) {
      const size = Math.min(job.wave, job.children - first);
      await Promise.all(
        Array.from({ length: size }, (_, offset) => {
          const index = first + offset;
          return new Promise<void>((resolve) => {
            const spawnedAt = performance.now();
            const onEvent = (event: AgentEvent): void => {
              if (event.type === 'step-start' && event.step === 1) {
                firstRequest.push(performance.now() - spawnedAt);
                resolve();
              } else if (event.type === 'agent-settle') resolve();
            };
            const result = engine.run({
              prompt: PARKED,
              title: `parked ${index}`,
              maxSteps: 1,
              onEvent,
            });
            results.push(result);
            // A child that settled early (it should not) must not hang the bench.
            void result.then(() => resolve());
          });
        }),
      );
    }
    const spawnAllMs = performance.now() - spawnBegin;
    // Let the last requests reach the server and the heaps settle, then sample for a second.
    await sleep(1000);
    const samples: number[] = [];
    for (let sample = 0; sample < 5; sample++) {
      samples.push(probe.sampleRss());
      await sleep(200);
    }
    const probed = probe.stop();
    const closeBegin = performance.now();
    await engine.close();
    const closeMs = performance.now() - closeBegin;
    const outcomes: Record<AgentOutcome, number> = emptyOutcomeCounts();
    for (const result of await Promise.all(results)) outcomes[result.outcome]++;
    return {
      engine: job.engine,
      children: job.children,
      wave: job.wave,
      threads: engine.threads,
      startMs,
      firstRequestMs: spread(firstRequest),
      spawnAllMs,
      baselineRssBytes,
      warmRssBytes,
      liveRssBytes: median(samples),
      peakRssBytes: probed.peakRssBytes,
      closeMs,
      outcomes,
    };
  } finally {
    // Already closed on the measured path (close is idempotent); this covers a failure midway.
    await engine.close();
    rmSync(logDir, { recursive: true, force: true });
  }
}
