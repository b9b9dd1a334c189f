/**
 * Entry of a measuring process. The bench forks one per case, so every engine starts from the
 * same clean process: its own RSS baseline, heap, JIT state and event loop, with nothing left
 * over from the engine measured before it. It takes one Job on the IPC channel and answers once.
 */
import { measureConcurrency } from '../concurrency/concurrency-case.js';
import { measureGovernor } from '../governor/governor-case.js';
import { measureSpawn } from '../spawn/spawn-case.js';
import { measureTransport } from '../transport/transport-case.js';
import { EngineStartError } from './engines.js';
import type { Job, JobReply } from './jobs.js';

function measure(job: Job) {
  switch (job.kind) {
    case 'concurrency':
      return measureConcurrency(job);
    case 'spawn':
      return measureSpawn(job);
    case 'governor':
      return measureGovernor(job);
    case 'transport':
      return measureTransport(job);
  }
}

async function answer(job: Job): Promise<JobReply> {
  try {
    const measurement = await measure(job);
    return { ok: true, measurement };
  } catch (error) {
    return {
      ok: false,
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      phase: error instanceof EngineStartError ? 'start' : 'measure',
    };
  }
}

process.once('message', (job: Job) => {
  void answer(job).then((reply) => {
    process.send?.(reply, () => process.disconnect());
  });
});
