import path from 'node:path';
import { describe, it } from 'vitest';
import type { QueueStatus } from '../src/main/runners/queue/inspector.js';
import { type CliRun, readResultLines, runCli, writeTasks } from './cli-helpers.js';
import { scripted, tempDir } from './helpers.js';
import { pollUntil, startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// What a newcomer meets in queue mode: a batch with no worker says so after 10 s, with the
// command that starts one, and shows the wait in its progress lines; `cohort queue status` shows
// the jobs and the workers; a Redis that cannot be reached is said at once. Real processes (the
// built CLI), a private redis-server and a real `cohort worker`.

const QUEUE = 'status-q';
const SECRET = 's3cr3t-Pw';

/** Starts the built CLI; every process it started is killed when the test ends, however. */
function starter(onTestFinished: (hook: () => Promise<void>) => void): (args: string[]) => CliRun {
  const runs: CliRun[] = [];
  onTestFinished(async () => {
    for (const run of runs) {
      if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
      await run.exit;
    }
  });
  return (args) => {
    const run = runCli(args);
    runs.push(run);
    return run;
  };
}

/** `cohort queue status --json` on the rig's queue, parsed; it must exit 0. */
async function status(
  cli: (args: string[]) => CliRun,
  rig: RedisRig,
): Promise<QueueStatus & { type: string }> {
  const run = cli(['queue', 'status', '--queue', rig.url, '--queue-name', QUEUE, '--json']);
  const { code } = await run.exit;
  if (code !== 0) throw new Error(`queue status exited ${code}: ${run.stderr()}`);
  return JSON.parse(run.stdout());
}

/** Resolves with the time `pattern` showed on `run`'s stderr; rejects if it exits first. */
async function seen(run: CliRun, pattern: RegExp): Promise<number> {
  const exited = run.exit.then(({ code }) => {
    throw new Error(
      `exited (code ${code}) before printing ${pattern}; its stderr:\n${run.stderr()}`,
    );
  });
  exited.catch(() => {});
  await Promise.race([run.waitFor(pattern), exited]);
  return Date.now();
}

describe.skipIf(redisMissing)(
  redisMissing ? `queue status (skipped: ${redisMissing})` : 'queue status',
  () => {
    // Concurrent: the other tests run while this one's batch waits its 10 s.
    it.concurrent('a batch with no worker says so with the command to start one; a worker then finishes it', async ({
      expect,
      onTestFinished,
    }) => {
      const rig = await startRedis();
      onTestFinished(async () => {
        await stopWorkers();
        await rig.stop();
      });
      const cli = starter(onTestFinished);
      const tasks = 3;
      // Each task's reply is held 1.5 s and the worker takes one at a time: it is caught running.
      const tasksFile = writeTasks(
        Array.from({ length: tasks }, (_, index) =>
          scripted([{ delayMs: 1500, reply: `done ${index}` }], `Task ${index}.`),
        ),
      );
      const out = path.join(tempDir(), 'results.jsonl');
      const batch = cli([
        'batch',
        tasksFile,
        '--out',
        out,
        '--queue',
        rig.url,
        '--queue-name',
        QUEUE,
      ]);

      // While it waits: the queue holds the jobs and no worker.
      // Printed just before the batch adds its jobs and begins to watch them.
      const addingAt = await seen(batch, /cohort batch: 3 task\(s\), 3 to run/);
      const waiting = await pollUntil(
        async () => {
          const read = await status(cli, rig);
          return read.counts.waiting === tasks && read.workers.length === 0 && read;
        },
        'the jobs waiting in the queue',
        { stopOn: batch.exit, timeoutMs: 9000, intervalMs: 200 },
      );
      expect(waiting).toMatchObject({
        type: 'queue-status',
        queue: QUEUE,
        redis: rig.url,
        paused: false,
        counts: { waiting: tasks, active: 0, failed: 0, delayed: 0 },
        workers: [],
      });
      const text = cli(['queue', 'status', '--queue', rig.url, '--queue-name', QUEUE]);
      expect((await text.exit).code, text.stderr()).toBe(0);
      expect(text.stdout()).toBe(
        `queue ${QUEUE} at ${rig.url}\n` +
          `jobs: ${tasks} waiting, 0 active, 0 completed, 0 failed\n` +
          `workers: none connected; start one with: cohort worker --queue ${rig.url} --queue-name ${QUEUE}\n`,
      );

      // The real threshold: 10 s after the batch began adding jobs, and once.
      const message = `cohort batch: no worker has taken a job for 10s (${tasks} waiting in queue ${QUEUE} at ${rig.url}); start one with: cohort worker --queue ${rig.url} --queue-name ${QUEUE}\n`;
      const saidAt = await seen(batch, /no worker has taken a job/);
      expect(saidAt - addingAt).toBeGreaterThanOrEqual(9500);
      // A reading a second, on a machine shared with other work: seconds of slack, not tens.
      expect(saidAt - addingAt).toBeLessThan(15_000);
      expect(batch.stderr()).toContain(message);
      // Off a terminal, a progress line says what it waits for, though nothing settled.
      await seen(batch, /cohort batch: 0\/3 done \(waiting for a worker\)/);

      const fleet = await startWorkers(rig, 1, [
        '--queue-name',
        QUEUE,
        '--threads',
        '1',
        '--concurrency',
        '1',
      ]);
      const name = fleet.names[0]!;
      const running = await pollUntil(
        async () => {
          const read = await status(cli, rig);
          return read.workers[0]?.running ? read : undefined;
        },
        'the worker running the jobs',
        { stopOn: batch.exit, timeoutMs: 10_000, intervalMs: 100 },
      );
      expect(running.workers).toHaveLength(1);
      const [worker] = running.workers;
      expect(worker).toMatchObject({ name, connected: true, running: 1 });
      expect(running.counts.active).toBe(1);
      expect(worker!.oldestRunningMs).toBeGreaterThanOrEqual(0);
      expect(worker!.oldestRunningMs).toBeLessThan(10_000);

      const exit = await batch.exit;
      expect(exit.code, batch.stderr()).toBe(0);
      expect(readResultLines(out).map((line) => line.outcome)).toEqual(
        Array(tasks).fill('complete'),
      );
      const stderr = batch.stderr();
      // Told once, and the progress moved on from the wait.
      expect(stderr.split(message)).toHaveLength(2);
      expect(stderr).toMatch(/cohort batch: 3\/3 done \(3 complete\), /);

      // The worker, done, stays connected and idle.
      const after = cli(['queue', 'status', '--queue', rig.url, '--queue-name', QUEUE]);
      expect((await after.exit).code, after.stderr()).toBe(0);
      expect(after.stdout()).toMatch(
        new RegExp(
          `^workers: 1 connected\\n  ${name.replace(/[.]/g, '\\.')}  idle, connected for \\d+s$`,
          'm',
        ),
      );
    }, 40_000);

    it.concurrent('refuses a Redis it cannot reach at once, without its password, and bad flags, exit 2', async ({
      expect,
      onTestFinished,
    }) => {
      const cli = starter(onTestFinished);
      const checks: [string[], RegExp][] = [
        [
          // A refused connection fails at once, not after --connect-timeout (which would fail
          // the test by its own timeout): the message names the refusal, not a wait.
          ['--queue', `redis://:${SECRET}@127.0.0.1:1`, '--connect-timeout', '5m'],
          /^cohort: Could not reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1: connect ECONNREFUSED/,
        ],
        [
          ['--queue', path.join(tempDir(), 'no.sock'), '--connect-timeout', '5m'],
          /^cohort: Could not reach Redis at \/.*\/no\.sock: connect ENOENT/,
        ],
        [
          ['--queue', `ftp://:${SECRET}@h`],
          /^cohort: Expected `--queue` to be a redis:\/\/ or rediss:\/\/ URL or a unix socket path/,
        ],
        [[], /^cohort: Expected `--queue REDIS`, got nothing/],
        [
          ['--queue', '/r.sock', '--connect-timeout', '0'],
          /^cohort: Expected `--connect-timeout` to be at least 1ms/,
        ],
      ];
      const done = await Promise.all(
        checks.map(async ([flags, pattern]) => {
          const run = cli(['queue', 'status', ...flags]);
          return { run, pattern, exit: await run.exit };
        }),
      );
      for (const { run, pattern, exit } of done) {
        expect(exit.code, run.stderr()).toBe(2);
        expect(run.stderr()).toMatch(pattern);
        expect(run.stderr()).not.toContain(SECRET);
        expect(run.stdout()).toBe('');
      }
    });

    it.concurrent('has a subcommand, a help and exit codes', async ({ expect, onTestFinished }) => {
      const cli = starter(onTestFinished);
      const unknown = cli(['queue', 'drain']);
      const help = cli(['help', 'queue']);
      const viaFlag = cli(['queue', 'status', '--help']);
      const listed = cli(['--help']);
      expect((await unknown.exit).code).toBe(2);
      expect(unknown.stderr()).toMatch(/^cohort: Expected a subcommand \(status\), got `drain`/);
      expect((await help.exit).code).toBe(0);
      expect(help.stdout()).toMatch(/^Usage: cohort queue status --queue REDIS/);
      expect(help.stdout()).toMatch(
        /Exit codes:\n {2}0 {2}the status was read\n {2}2 {2}a usage error/,
      );
      expect((await viaFlag.exit).code).toBe(0);
      expect(viaFlag.stdout()).toBe(help.stdout());
      expect((await listed.exit).code).toBe(0);
      expect(listed.stdout()).toMatch(/^ {2}queue status --queue REDIS {4}a queue's jobs/m);
    });
  },
);
