/**
 * Helpers of the queue tests: real `cohort worker` processes (the built CLI, as an operator
 * starts it) and polling for a state the test waits on.
 *
 * ```ts
 * const fleet = await startWorkers(rig, 3, [...FAST_STALLS, '--threads', '1']);
 * // … a producer adds jobs; results carry `worker` === one of fleet.names …
 * await fleet.workers[0]!.kill();                          // SIGKILL: its jobs stall, then redeliver
 * expect((await fleet.workers[1]!.term()).code).toBe(0);   // SIGTERM: drains, exits 0
 * afterEach(() => stopWorkers());                          // every worker still running, even on failure
 * ```
 *
 * Workers run with the clean provider environment of `runCli` (no ANTHROPIC_* variables): the
 * model's base URL travels in each job. The ready line is how readiness is known, so `--quiet`
 * must not be among the flags.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { type CliRun, runCli } from './cli-helpers.js';

/** Short stall settings: a SIGKILLed worker's jobs are redelivered within a few seconds. */
export const FAST_STALLS: readonly string[] = [
  '--lock-duration',
  '2s',
  '--stalled-interval',
  '500ms',
];

/** How a worker process ended. */
export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One running `cohort worker` process. */
export interface WorkerProcess {
  /** `HOST/PID`, as it prints it and as its results carry it in `worker`. */
  name: string;
  pid: number;
  /** Everything it wrote on stderr so far. */
  stderr(): string;
  /** Resolves once it has exited (and its output is read to the end). */
  exit: Promise<WorkerExit>;
  /** True until it has exited. */
  alive(): boolean;
  /** SIGKILL (a machine dying): its jobs are left to stall. Resolves once it has exited. */
  kill(): Promise<WorkerExit>;
  /** SIGTERM (a drain): resolves once it has exited. */
  term(): Promise<WorkerExit>;
  /** SIGKILL unless it has exited already; for clean-up. */
  stop(): Promise<void>;
}

/** Workers started together. */
export interface Fleet {
  workers: WorkerProcess[];
  /** Their `HOST/PID` names, in the same order. */
  names: string[];
  /** Stops every one still running (SIGKILL). */
  stop(): Promise<void>;
}

/** Every worker started here and not yet exited, for `stopWorkers` and the exit hook. */
const live = new Set<CliRun>();
process.once('exit', () => {
  for (const run of live) run.child.kill('SIGKILL');
});

const READY = /cohort worker (\S+): taking jobs/;

/**
 * Spawns `n` real `node dist/src/cli/cli.js worker --queue RIG.url …flags` processes and
 * resolves once each has printed its "taking jobs" line. When one exits first, the others are
 * stopped and this rejects with that one's exit and stderr.
 */
export async function startWorkers(
  rig: { url: string },
  n: number,
  flags: readonly string[] = [],
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<Fleet> {
  const runs = Array.from({ length: n }, () =>
    runCli(['worker', '--queue', rig.url, ...flags], options.env ?? {}),
  );
  for (const run of runs) {
    live.add(run);
    void run.exit.then(() => live.delete(run));
  }
  const started = await Promise.allSettled(runs.map(ready));
  const failed = started.find((outcome) => outcome.status === 'rejected');
  if (failed) {
    await Promise.all(runs.map(stopRun));
    throw failed.reason;
  }
  const workers = started.map(
    (outcome) => (outcome as PromiseFulfilledResult<WorkerProcess>).value,
  );
  return {
    workers,
    names: workers.map((worker) => worker.name),
    stop: async () => {
      await Promise.all(workers.map((worker) => worker.stop()));
    },
  };
}

/** SIGKILLs every worker process started by `startWorkers` that is still running. */
export async function stopWorkers(): Promise<void> {
  await Promise.all([...live].map(stopRun));
}

/** Waits for the ready line; an exit before it is a failure that says why. */
async function ready(run: CliRun): Promise<WorkerProcess> {
  const exitedFirst = run.exit.then(({ code, signal }) => {
    throw new Error(
      `cohort worker exited (code ${code}, signal ${signal}) before taking jobs; its stderr:\n${run.stderr()}`,
    );
  });
  await Promise.race([run.waitFor(READY), exitedFirst]);
  // The losing branch of the race must not surface later as an unhandled rejection.
  exitedFirst.catch(() => {});
  const name = READY.exec(run.stderr())![1]!;
  let exited = false;
  void run.exit.then(() => {
    exited = true;
  });
  const signal = (which: NodeJS.Signals) => (): Promise<WorkerExit> => {
    if (!exited) run.child.kill(which);
    return run.exit;
  };
  return {
    name,
    pid: run.child.pid!,
    stderr: run.stderr,
    exit: run.exit,
    alive: () => !exited,
    kill: signal('SIGKILL'),
    term: signal('SIGTERM'),
    stop: () => stopRun(run),
  };
}

async function stopRun(run: CliRun): Promise<void> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
  await run.exit;
}

/**
 * Polls `read` (sync or async) every `intervalMs` until it gives something other than
 * `undefined` or `false`, and resolves with that. Rejects after `timeoutMs` naming `what`, or
 * as soon as `stopOn` settles first (e.g. a producer's exit: the state will never come).
 */
export async function pollUntil<T>(
  read: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  options: { timeoutMs?: number; intervalMs?: number; stopOn?: Promise<unknown> } = {},
): Promise<T> {
  const { timeoutMs = 60_000, intervalMs = 50 } = options;
  let stopped = false;
  void options.stopOn?.then(() => {
    stopped = true;
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined && value !== false) return value;
    if (stopped) throw new Error(`gave up waiting for ${what}: what it waited on ended first`);
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Whole lines in a results file so far (0 when it does not exist yet). */
export function countLines(file: string): number {
  if (!existsSync(file)) return 0;
  const text = readFileSync(file);
  let count = 0;
  for (let at = text.indexOf(10); at !== -1; at = text.indexOf(10, at + 1)) count++;
  return count;
}

/** A queue's job counts by state, read through BullMQ itself (default prefix `bull`). */
export async function jobCounts(
  rig: { socket: string },
  name: string,
  prefix = 'bull',
): Promise<Record<string, number>> {
  const queue = new Queue(name, { connection: { path: rig.socket }, prefix });
  try {
    return await queue.getJobCounts();
  } finally {
    await queue.close();
  }
}
