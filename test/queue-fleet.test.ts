import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatchResultLine } from '../src/cli/results/file.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { type CliRun, runCli, writeTasks } from './cli-helpers.js';
import { scripted, TEST_TOOLS, tempDir } from './helpers.js';
import {
  countLines,
  FAST_STALLS,
  jobCounts,
  pollUntil,
  startWorkers,
  stopWorkers,
} from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// A fleet as an operator runs one: a private redis-server, three real `cohort worker` processes
// and the real `cohort batch --queue` as the producer, with workers SIGKILLed, drained, the
// producer SIGKILLed and Redis restarted under them. What must hold each time: exactly one
// result line per task.

const QUEUE = 'fleet';
/** One thread each: three workers and the producer share two cores. */
const WORKER_FLAGS = [
  ...FAST_STALLS,
  '--queue-name',
  QUEUE,
  '--threads',
  '1',
  '--logs',
  'failed',
  '--drain-timeout',
  '1s',
];

/**
 * The workers' temp dir: each keeps its log folders under its own `cohort/<time>-<pid>` there, as
 * on machines of its own, and none under the machine's shared one.
 */
const WORKER_ENV = { env: { TMPDIR: tempDir('cohort-fleet-') } };

let rig: RedisRig | undefined;
let model: ScriptedModel | undefined;
const producers: CliRun[] = [];

afterEach(async () => {
  for (const producer of producers.splice(0)) {
    if (producer.child.exitCode === null && producer.child.signalCode === null) {
      producer.child.kill('SIGKILL');
    }
    await producer.exit;
  }
  await stopWorkers();
  await model?.close();
  model = undefined;
  await rig?.stop();
  rig = undefined;
});

/**
 * Tasks of three steps (two `echo` calls, then the reply), the later ones slowed, so a worker
 * that dies is caught with jobs between steps and their checkpoints in Redis: most of a job's
 * time is after its first checkpoint, whatever pace the governor lets the first steps go at.
 */
function stepTasks(count: number): string {
  return writeTasks(
    Array.from({ length: count }, (_, index) =>
      scripted(
        [
          { calls: [{ name: 'echo', input: { value: `a${index}` } }] },
          { delayMs: 150, calls: [{ name: 'echo', input: { value: `b${index}` } }] },
          { delayMs: 150, reply: `done ${index}` },
        ],
        `Task ${index}.`,
      ),
    ),
  );
}

/** `cohort batch TASKS --out OUT --queue …`, killed in afterEach should the test fail first. */
function batch(tasks: string, out: string, flags: string[]): CliRun {
  const producer = runCli([
    'batch',
    tasks,
    '--out',
    out,
    '--queue',
    rig!.url,
    '--queue-name',
    QUEUE,
    '--tools',
    TEST_TOOLS,
    '--logs',
    'failed',
    ...flags,
  ]);
  producers.push(producer);
  return producer;
}

/** The whole lines of a results file (a tail torn by a SIGKILLed producer is left out). */
function readLines(file: string): BatchResultLine[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .slice(0, -1)
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as BatchResultLine);
}

/** Exactly one complete line per task `t0…t(count-1)`. */
function expectOneCompleteLinePerTask(lines: BatchResultLine[], count: number): void {
  const ids = lines.map((line) => line.taskId);
  const duplicates = ids.filter((id, index) => ids.indexOf(id) !== index);
  expect(duplicates, 'task ids with more than one line').toEqual([]);
  expect(lines).toHaveLength(count);
  expect(new Set(ids)).toEqual(new Set(Array.from({ length: count }, (_, index) => `t${index}`)));
  const notComplete = lines.filter((line) => line.outcome !== 'complete');
  expect(notComplete.slice(0, 3), `${notComplete.length} line(s) not complete`).toEqual([]);
}

/**
 * The task ids of the jobs finished in Redis (completed or failed). A batch job's id is
 * `b<hash of the results path>-<task id, URI-encoded>@<task version>` (batchJobId).
 */
async function finishedTaskIds(redis: RedisRig): Promise<string[]> {
  const queue = new Queue(QUEUE, { connection: { path: redis.socket } });
  try {
    const jobs = await queue.getJobs(['completed', 'failed']);
    return jobs.map((job) =>
      decodeURIComponent(job.id!.slice(job.id!.indexOf('-') + 1, job.id!.lastIndexOf('@'))),
    );
  } finally {
    await queue.close();
  }
}

describe.skipIf(redisMissing)(
  redisMissing ? `queue fleet (skipped: ${redisMissing})` : 'queue fleet',
  () => {
    // 400 tasks at concurrency 200 leave each worker with jobs in flight at the kill and at the
    // drain, as 2,000 and 800 did: the producer keeps 200 in flight (at the drain, all that are
    // left), however many tasks there are.
    it('400 tasks: one worker SIGKILLed at 25%, one drained at 50%, one line per task', async () => {
      const tasks = 400;
      rig = await startRedis();
      const out = path.join(tempDir(), 'results.jsonl');
      // Started with the workers: its first jobs wait in Redis for them.
      const producer = batch(stepTasks(tasks), out, ['--concurrency', '200']);
      const fleet = await startWorkers(rig, 3, WORKER_FLAGS, WORKER_ENV);
      const [victim, drained, survivor] = fleet.workers;

      await pollUntil(() => countLines(out) >= tasks / 4, 'a quarter of the lines', {
        stopOn: producer.exit,
      });
      await victim!.kill();
      await pollUntil(() => countLines(out) >= tasks / 2, 'half of the lines', {
        stopOn: producer.exit,
      });
      // A drain: it takes no new job, hands back what is still running after --drain-timeout,
      // and exits 0.
      expect(await drained!.term()).toEqual({ code: 0, signal: null });
      expect(drained!.stderr()).toMatch(/cohort worker: drained after \d+ result\(s\)/);

      const exit = await producer.exit;
      expect(exit.code, producer.stderr()).toBe(0);
      const lines = readLines(out);
      expectOneCompleteLinePerTask(lines, tasks);
      expect(lines.every((line) => line.host === os.hostname())).toBe(true);
      const workers = new Set(lines.map((line) => line.worker));
      expect([...workers].every((name) => fleet.names.includes(name!))).toBe(true);
      expect(workers.size).toBeGreaterThan(1);
      expect(survivor!.alive()).toBe(true);
      // A child resumed from its Redis checkpoint counts the restored steps but made no
      // provider calls for them: fewer calls than steps is that resume, seen in the result.
      const resumed = lines.filter((line) => line.usage.providerCalls < line.usage.steps);
      expect(resumed.length, 'results resumed from a checkpoint').toBeGreaterThan(0);
    }, 180_000);

    it('a producer SIGKILLed mid-run: the rerun takes what the workers finished, a third adds nothing', async () => {
      // Sized as the Redis restarts below: 50 in flight at the kill are as many orphans as 100.
      const tasks = 200;
      const concurrency = 50;
      rig = await startRedis();
      // The model lives in this process, so it outlives the producer and the jobs the workers
      // keep running while no producer is alive still reach it.
      const own = await startScriptedModel({ port: 0 });
      model = own;
      let starts = 0;
      own.on('request', (request: { turn: number }) => {
        if (request.turn === 0) starts++;
      });
      const tasksFile = stepTasks(tasks);
      const out = path.join(tempDir(), 'results.jsonl');
      const flags = ['--concurrency', String(concurrency), '--base-url', own.url];
      const first = batch(tasksFile, out, flags);
      await startWorkers(rig, 3, WORKER_FLAGS, WORKER_ENV);
      await pollUntil(() => countLines(out) >= tasks * 0.3, '30% of the lines', {
        stopOn: first.exit,
      });
      first.child.kill('SIGKILL');
      await first.exit;
      const written = countLines(out);
      // The workers go on without a producer: every job it had added ends up finished in Redis.
      await pollUntil(async () => {
        const counts = await jobCounts(rig!, QUEUE);
        return counts.waiting! + counts.active! + counts.delayed! + counts.prioritized! === 0;
      }, 'the jobs left by the dead producer to finish');
      const writtenIds = new Set(readLines(out).map((line) => line.taskId));
      // Finished jobs whose task has no line yet: results only Redis holds now.
      const orphans = (await finishedTaskIds(rig)).filter((id) => !writtenIds.has(id));
      expect(orphans.length).toBeGreaterThan(0);
      const startsBeforeRerun = starts;

      const second = batch(tasksFile, out, flags);
      const secondExit = await second.exit;
      expect(secondExit.code, second.stderr()).toBe(0);
      expect(second.stderr()).toMatch(new RegExp(`${written} already in`));
      expectOneCompleteLinePerTask(readLines(out), tasks);
      // Every task started once, and a rerun starts again none of the jobs the workers finished
      // for the dead producer: its starts are the tasks it had never added.
      expect(starts - tasks, 'tasks started more than once').toBeLessThanOrEqual(concurrency);
      expect(starts - startsBeforeRerun, 'starts by the rerun').toBeLessThanOrEqual(
        tasks - written - orphans.length,
      );

      const before = readFileSync(out, 'utf8');
      const requests = own.stats.requests;
      const third = batch(tasksFile, out, flags);
      expect((await third.exit).code, third.stderr()).toBe(0);
      expect(third.stderr()).toMatch(
        new RegExp(`${tasks} task\\(s\\), ${tasks} already in .*, 0 to run`),
      );
      expect(readFileSync(out, 'utf8')).toBe(before);
      expect(own.stats.requests).toBe(requests);
    }, 120_000);

    it.each([
      { persist: false, what: 'without persistence' },
      { persist: true, what: 'with append-only persistence' },
    ])(
      'Redis killed and restarted mid-run ($what): one line per task, the same workers finish it',
      async ({ persist }) => {
        // 200 tasks at concurrency 50: at the outage at most 110 lines are written and 50 tasks
        // in flight, so about 90 tasks are added after it, plenty for each of the three workers.
        const tasks = 200;
        const concurrency = 50;
        rig = await startRedis({ persist });
        const out = path.join(tempDir(), 'results.jsonl');
        const producer = batch(stepTasks(tasks), out, ['--concurrency', String(concurrency)]);
        const fleet = await startWorkers(rig, 3, WORKER_FLAGS, WORKER_ENV);

        await pollUntil(() => countLines(out) >= tasks * 0.3, '30% of the lines', {
          stopOn: producer.exit,
        });
        await rig.kill();
        // Read once Redis is down: the producer has admitted at most `concurrency` tasks past
        // the lines written, in file order, so every task from here on is added after the outage.
        const firstAfter = countLines(out) + concurrency;
        // A deliberate outage (kill() did the kill, restart() only brings it back after it).
        await rig.restart({ downMs: 500 });

        const exit = await producer.exit;
        expect(exit.code, producer.stderr()).toBe(0);
        const lines = readLines(out);
        expectOneCompleteLinePerTask(lines, tasks);
        expect(fleet.workers.map((worker) => worker.alive())).toEqual([true, true, true]);
        // Those tasks' jobs were added, and so run, after Redis came back: by the workers that
        // lived through the outage, every one of them reconnected.
        const after = lines.filter((line) => Number(line.taskId.slice(1)) >= firstAfter);
        expect(after.length).toBeGreaterThan(0);
        const workers = new Set(after.map((line) => line.worker));
        expect([...workers].every((name) => fleet.names.includes(name!))).toBe(true);
        expect(workers.size, 'workers that took jobs after the restart').toBe(3);
      },
      120_000,
    );

    it('an idle worker drains at once on SIGTERM and exits 0', async () => {
      rig = await startRedis();
      // A drain timeout far past the test's own: only a drain that does not wait can pass.
      const fleet = await startWorkers(
        rig,
        1,
        ['--threads', '1', '--drain-timeout', '10m'],
        WORKER_ENV,
      );
      const idle = fleet.workers[0]!;
      expect(await idle.term()).toEqual({ code: 0, signal: null });
      expect(idle.stderr()).toMatch(/cohort worker: drained after 0 result\(s\)/);
    }, 30_000);

    it('a bad flag exits 2 with a message; an unreachable Redis exits 1 naming its socket', async () => {
      const missing = path.join(tempDir(), 'no-such.sock');
      const bad = runCli(['worker', '--queue', missing, '--threads', 'zero']);
      const unknown = runCli(['worker', '--queue', missing, '--bogus']);
      const zero = runCli(['worker', '--queue', missing, '--connect-timeout', '0']);
      const spawned = Date.now();
      const unreachable = runCli([
        'worker',
        '--queue',
        missing,
        '--threads',
        '1',
        '--connect-timeout',
        '1s',
      ]);
      producers.push(bad, unknown, zero, unreachable);
      expect((await bad.exit).code).toBe(2);
      expect(bad.stderr()).toMatch(
        /Expected `--threads` to be a whole number from 1 to 256, got `zero`/,
      );
      expect((await unknown.exit).code).toBe(2);
      expect(unknown.stderr()).toMatch(/Expected a known option, got `--bogus`/);
      expect((await zero.exit).code).toBe(2);
      expect(zero.stderr()).toMatch(/Expected `--connect-timeout` to be at least 1ms, got `0`/);
      // The worker gives up after its connect timeout: 1 s here, where the default would wait 10 s.
      expect((await unreachable.exit).code).toBe(1);
      expect(Date.now() - spawned).toBeLessThan(9500);
      expect(unreachable.stderr()).toContain(`Could not reach Redis at ${missing}`);
      expect(unreachable.stderr()).not.toMatch(/taking jobs/);
    }, 30_000);
  },
);
