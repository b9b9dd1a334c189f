/**
 * The processes of a `scale` case: `cohort worker` processes (the built CLI, as a user starts
 * them), each counting its Redis commands (scale-count-preload.ts), and the measuring process
 * (scale-case.ts). Both take `--cpu-prof` flags under `--profile`, one folder per process.
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { builtPath } from '../common/paths.js';
import { PROFILE_ENV } from '../engines/fork.js';
import type { ScaleJob, ScaleMeasurement, ScaleReply } from './scale-case.js';
import { SNAPSHOT_DIR_ENV } from './scale-count.js';

/** How long a worker may take to say it is taking jobs, and to exit once told to drain. */
const READY_WITHIN_MS = 60_000;
const EXIT_WITHIN_MS = 30_000;
/** How much of a worker's stderr an error message keeps. */
const KEPT_OUTPUT_CHARS = 4000;

let profiled = 0;

/** `--cpu-prof` flags into a new folder of `--profile DIR` named for `slug`; none without it. */
export function profileArgs(env: NodeJS.ProcessEnv, slug: string): string[] {
  const root = env[PROFILE_ENV];
  if (!root) return [];
  let dir: string;
  do {
    profiled++;
    dir = path.join(root, `${String(profiled).padStart(2, '0')}-${slug}`);
  } while (existsSync(dir));
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

export interface WorkerFleet {
  pids: number[];
  /** Where each worker writes its snapshots (scale-count.ts). */
  snapshotDir: string;
  /** Drains them (SIGTERM) and waits for every exit; removes their folders. */
  stop(): Promise<void>;
}

export interface FleetSetup {
  count: number;
  socket: string;
  queueName: string;
  threads: number;
  /** Jobs each worker takes at once (`--concurrency`). */
  concurrency: number;
  governorOff: boolean;
  env: NodeJS.ProcessEnv;
  /** Names the profile folders. */
  slug: string;
}

/** Starts `count` workers and resolves once each has said it is taking jobs. */
export async function startWorkers(setup: FleetSetup): Promise<WorkerFleet> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cohort-scale-fleet-'));
  const snapshotDir = path.join(root, 'snapshots');
  const children: ChildProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((child) => end(child)));
    rmSync(root, { recursive: true, force: true });
  };
  try {
    mkdirSync(snapshotDir);
    for (let index = 0; index < setup.count; index++) {
      children.push(
        spawn(
          process.execPath,
          [
            ...profileArgs(setup.env, `${setup.slug}-worker-${index + 1}`),
            '--import',
            pathToFileURL(builtPath('bench/scale/scale-count-preload.js')).href,
            builtPath('src/cli/cli.js'),
            'worker',
            '--queue',
            setup.socket,
            '--queue-name',
            setup.queueName,
            '--threads',
            String(setup.threads),
            '--concurrency',
            String(setup.concurrency),
            '--log-dir',
            path.join(root, `logs-${index + 1}`),
            ...(setup.governorOff ? ['--governor', 'off'] : []),
          ],
          {
            env: { ...setup.env, [SNAPSHOT_DIR_ENV]: snapshotDir },
            stdio: ['ignore', 'ignore', 'pipe'],
          },
        ),
      );
    }
    await Promise.all(children.map((child) => ready(child)));
  } catch (error) {
    await stop();
    throw error;
  }
  return { pids: children.map((child) => child.pid!), snapshotDir, stop };
}

/** Resolves on the worker's `taking jobs` line; rejects with its output if it exits first. */
function ready(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    let isReady = false;
    const timer = setTimeout(
      () =>
        reject(new Error(`cohort worker did not start within ${READY_WITHIN_MS} ms:\n${output}`)),
      READY_WITHIN_MS,
    );
    // Read to the end either way: a full pipe would stall the worker.
    child.stderr?.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-KEPT_OUTPUT_CHARS);
      if (!isReady && /: taking jobs/.test(output)) {
        isReady = true;
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (!isReady) reject(new Error(`cohort worker exited (${signal ?? code}):\n${output}`));
    });
  });
}

async function end(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), EXIT_WITHIN_MS);
  await exited;
  clearTimeout(timer);
}

/** Runs one case in a fresh measuring process (scale-case.ts) and returns what it measured. */
export async function measureScaleCase(
  job: ScaleJob,
  env: NodeJS.ProcessEnv,
  slug: string,
): Promise<ScaleMeasurement> {
  const child = fork(builtPath('bench/scale/scale-case.js'), [], {
    execArgv: profileArgs(env, `${slug}-producer`),
    env,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  try {
    const reply = await new Promise<ScaleReply>((resolve, reject) => {
      child.once('message', (message) => resolve(message as ScaleReply));
      child.once('exit', (code, signal) =>
        reject(new Error(`measuring process exited (${signal ?? code}) before it answered`)),
      );
      child.send(job);
    });
    if (!reply.ok) throw new Error(`measuring process failed (${slug}): ${reply.error}`);
    return reply.measurement;
  } finally {
    const timer = setTimeout(() => child.kill('SIGKILL'), EXIT_WITHIN_MS);
    await exited;
    clearTimeout(timer);
  }
}
