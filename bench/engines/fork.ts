/** Runs one Job in a fresh measuring process (engine-process.ts) and returns its measurement. */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { builtPath } from '../common/paths.js';
import type { Job, JobReply } from './jobs.js';

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

/**
 * The variable that asks for CPU profiles: `--profile DIR` sets it for the run (run.ts), and
 * setting it by hand does the same for any caller of `inFreshProcess`.
 */
export const PROFILE_ENV = 'COHORT_BENCH_PROFILE';

/** Cases profiled by this process so far: numbers each case's folder, in the order run. */
let profiledCases = 0;

/**
 * Node writes one .cpuprofile per thread with these flags: the process and each worker, all into
 * one folder per case (`03-concurrency-200-cohort`), so a summary can say which case it shows.
 */
/**
 * The environment of a measuring process that talks to the local scripted model: no credentials
 * (they would travel to it in headers) and no proxy (the undici transport would honour one and
 * the SDK's fetch would not, so the two would no longer be compared on the same path).
 */
export function localModelEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of NOT_FOR_THE_LOCAL_MODEL) delete env[name];
  return env;
}

export const NOT_FOR_THE_LOCAL_MODEL = [
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_AUTH_TOKEN',
  'ANTHROPIC_BASE_URL',
  'HTTPS_PROXY',
  'HTTP_PROXY',
  'https_proxy',
  'http_proxy',
];

function profileFlags(env: NodeJS.ProcessEnv, job: Job): string[] {
  const root = env[PROFILE_ENV];
  if (!root) return [];
  const slug = describeJob(job)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
  let dir: string;
  do {
    profiledCases++;
    dir = path.join(root, `${String(profiledCases).padStart(2, '0')}-${slug}`);
  } while (existsSync(dir));
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

/** How long a measuring process may take to exit after it answered. */
const EXIT_GRACE_MS = 30_000;

export async function inFreshProcess<Measurement>(
  job: Job,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Measurement> {
  // A cache folder of its own: every case starts cold, with no governor state an earlier case
  // (or the user's own runs) left, and leaves none behind.
  const cache = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-cache-'));
  const child = fork(builtPath('bench/engines/engine-process.js'), [], {
    // Not the parent's flags: under vitest they name its own loaders. PROFILE_ENV=DIR profiles
    // the measuring process and each of its worker threads into a folder of DIR per case.
    execArgv: profileFlags(env, job),
    env: { ...env, XDG_CACHE_HOME: cache },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit').finally(() => rmSync(cache, { recursive: true, force: true }));
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
  if (job.kind === 'transport') return `transport ${job.transport} at ${job.concurrency}`;
  return job.kind === 'concurrency'
    ? `concurrency ${job.concurrency}, ${job.engine}${job.cache === undefined ? '' : `, cache ${job.cache}`}`
    : `spawn, ${job.engine} with ${job.children} children`;
}
