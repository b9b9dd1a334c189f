/**
 * Entry of a measuring process. The bench forks one per case, so every engine starts from the
 * same clean process: its own RSS baseline, heap, JIT state and event loop, with nothing left
 * over from the engine measured before it. It takes one Job on the IPC channel and answers once.
 */
import { EngineStartError } from './engines.js';
import type { Job, JobReply } from './jobs.js';

/** Each kind's module is loaded only for its own job: a case's process holds no other case's code. */
async function measure(job: Job) {
  switch (job.kind) {
    case 'concurrency':
      return (await import('../concurrency/concurrency-case.js')).measureConcurrency(job);
    case 'spawn':
      return (await import('../spawn/spawn-case.js')).measureSpawn(job);
    case 'governor':
      return (await import('../governor/governor-case.js')).measureGovernor(job);
    case 'transport':
      return (await import('../transport/transport-case.js')).measureTransport(job);
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
