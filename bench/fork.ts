/** Runs one Job in a fresh measuring process (engine-process.ts) and returns its measurement. */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import type { Job, JobReply } from './jobs.js';
import { builtPath } from './paths.js';

/** A measuring process answered with a failure; `phase` says whether the engine even started. */
export class MeasuringError extends Error {
  override readonly name = 'MeasuringError';
  readonly phase: 'start' | 'measure';

  constructor(message: string, phase: 'start' | 'measure') {
    super(message);
    this.phase = phase;
  }
}

/**
 * Like `inFreshProcess`, but an engine that failed to START is given one more fresh process:
 * the bench measures running agents, and a start failure is reported (`log`, `startFailures`)
 * rather than ending the whole sweep. A failure while measuring is never retried.
 */
export async function measureInFreshProcess<Measurement>(
  job: Job,
  options: { env: NodeJS.ProcessEnv; log(line: string): void; startFailures: string[] },
): Promise<Measurement> {
  try {
    return await inFreshProcess<Measurement>(job, options.env);
  } catch (error) {
    if (!(error instanceof MeasuringError) || error.phase !== 'start') throw error;
    const firstLines = error.message.split('\n').slice(0, 3).join(' | ');
    options.startFailures.push(firstLines);
    options.log(`bench: ${describeJob(job)}: the engine failed to start; one retry: ${firstLines}`);
    return inFreshProcess<Measurement>(job, options.env);
  }
}

function profileFlags(env: NodeJS.ProcessEnv): string[] {
  const dir = env.COHORT_BENCH_PROFILE;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/** How long a measuring process may take to exit after it answered. */
const EXIT_GRACE_MS = 30_000;

export async function inFreshProcess<Measurement>(
  job: Job,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Measurement> {
  const child = fork(builtPath('bench/engine-process.js'), [], {
    // Not the parent's flags: under vitest they name its own loaders. COHORT_BENCH_PROFILE=DIR
    // profiles the measuring process and each of its worker threads into DIR.
    execArgv: profileFlags(env),
    env,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  try {
    const reply = await new Promise<JobReply>((resolve, reject) => {
      child.once('message', (message) => resolve(message as JobReply));
      child.once('exit', (code, signal) =>
        reject(new Error(`measuring process exited (${signal ?? code}) before it answered`)),
      );
      child.send(job);
    });
    if (!reply.ok) {
      throw new MeasuringError(
        `measuring process failed (${describeJob(job)}): ${reply.error}`,
        reply.phase,
      );
    }
    return reply.measurement as Measurement;
  } finally {
    const timer = setTimeout(() => child.kill('SIGKILL'), EXIT_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }
}

function describeJob(job: Job): string {
  if (job.kind === 'governor') return `governor, ${job.label} at ${job.concurrency}`;
  return job.kind === 'concurrency'
    ? `concurrency ${job.concurrency}, ${job.engine}`
    : `spawn, ${job.engine} with ${job.children} children`;
}
