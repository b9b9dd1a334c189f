import { existsSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, type EngineOptions } from '../src/main/engine.js';
import { JOB_NAME } from '../src/main/runners/queue/job.js';
import { Session, type SessionEvent } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import type { AgentEvent } from '../src/shared/events.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { asyncAgent, readTranscript, scripted, TEST_TOOLS, tempDir } from './helpers.js';
import { FAST_STALLS, type Fleet, pollUntil, startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// The library in queue mode, end to end: Engine.start({ queue }) in this process, the scripted
// model here too, and real `cohort worker` processes taking the jobs from a private Redis.

const QUEUE_TOOLS = fileURLToPath(new URL('./fixtures/queue-tools.mjs', import.meta.url));

/** Folders made by this file, removed at the end. */
const folders: string[] = [];
function folder(prefix: string): string {
  const made = tempDir(prefix);
  folders.push(made);
  return made;
}
afterAll(() => {
  for (const made of folders) rmSync(made, { recursive: true, force: true });
});

/** One Redis, one scripted model and one set of workers: what each describe stands on. */
interface Stage {
  rig: RedisRig;
  model: ScriptedModel;
  fleet: Fleet;
  /** The workers' shared run folder: `--run fleet` under their `--log-dir`. */
  workerLogs: string;
}

async function stage(queueName: string, workers: number, flags: string[] = []): Promise<Stage> {
  const rig = await startRedis();
  const model = await startScriptedModel({ port: 0 });
  const logRoot = folder('cq-wlogs-');
  const workerLogs = path.join(logRoot, 'fleet');
  try {
    const fleet = await startWorkers(rig, workers, [
      '--queue-name',
      queueName,
      '--threads',
      '1',
      '--log-dir',
      logRoot,
      '--run',
      'fleet',
      ...flags,
    ]);
    return { rig, model, fleet, workerLogs };
  } catch (error) {
    // No stage to hand back, so nothing else would stop these.
    await model.close();
    await rig.stop();
    throw error;
  }
}

/** Workers first (they hold connections to both), then the model and Redis. */
async function unstage(current: Stage | undefined): Promise<void> {
  await stopWorkers();
  await current?.model.close();
  await current?.rig.stop();
}

function startEngine(
  at: { rig: RedisRig; model: ScriptedModel },
  name: string,
  options: EngineOptions = {},
): Promise<Engine> {
  return Engine.start({
    logDir: folder('cq-logs-'),
    toolModules: [TEST_TOOLS, QUEUE_TOOLS],
    ...options,
    queue: { url: at.rig.socket, name, ...options.queue },
    provider: {
      baseURL: at.model.url,
      model: 'cohort-scripted',
      maxRetries: 2,
      backoffBaseMs: 5,
      backoffMaxMs: 50,
    },
  });
}

/** A child that calls `hold` (appending its worker's pid to `marker`) until it is cancelled. */
function holdPrompt(marker: string): string {
  return scripted([{ calls: [{ name: 'hold', input: { marker } }] }, { reply: 'never' }]);
}

/** The pids `hold` or `die` wrote to `file`, waiting until there are at least `count`. */
async function pidsIn(file: string, count = 1): Promise<number[]> {
  return pollUntil(
    () => {
      if (!existsSync(file)) return undefined;
      const pids = readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
      return pids.length >= count ? pids : undefined;
    },
    `${count} line(s) in ${path.basename(file)}`,
  );
}

/** Polls an async read until it gives something other than undefined or false. */
async function eventually<T>(read: () => Promise<T | undefined | false>, what: string) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await read();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A BullMQ queue handle of the test's own, to look at jobs as Redis holds them. */
async function withQueue<T>(rig: RedisRig, name: string, use: (queue: Queue) => Promise<T>) {
  const queue = new Queue(name, { connection: { path: rig.socket } });
  try {
    return await use(queue);
  } finally {
    await queue.close();
  }
}

/** Counts `agent-settle` events per agent id: exactly one each is the contract. */
function settleCounter() {
  const counts = new Map<string, number>();
  return {
    counts,
    onEvent: (event: AgentEvent) => {
      if (event.type === 'agent-settle') {
        counts.set(event.agentId, (counts.get(event.agentId) ?? 0) + 1);
      }
    },
  };
}

describe.skipIf(redisMissing)(
  redisMissing
    ? `queue engine: results and sessions (skipped: ${redisMissing})`
    : 'queue engine: results and sessions',
  () => {
    const NAME = 'results';
    let current: Stage | undefined;
    let engine: Engine | undefined;
    beforeAll(async () => {
      current = await stage(NAME, 2);
      engine = await startEngine(current, NAME);
    });
    afterAll(async () => {
      await engine?.close();
      await unstage(current);
    });

    it('engine.run returns each remote child’s complete result, once, stamped with its host and worker', async () => {
      const { fleet, workerLogs } = current!;
      const before = engine!.stats;
      const settles = settleCounter();
      const handles = Array.from({ length: 6 }, (_, index) =>
        engine!.spawn(
          {
            title: `task ${index}`,
            prompt: scripted([
              { calls: [{ name: 'echo', input: { value: `v${index}` } }] },
              { reply: `done ${index}` },
            ]),
            onEvent: settles.onEvent,
          },
          { generation: 7 },
        ),
      );
      const results = await Promise.all(handles.map((handle) => handle.result));
      results.forEach((result, index) => {
        expect(result).toMatchObject({
          id: handles[index]!.id,
          title: `task ${index}`,
          outcome: 'complete',
          text: `done ${index}`,
          generation: 7,
          host: os.hostname(),
          usage: { steps: 2, providerCalls: 2 },
        });
        expect(result.worker).toMatch(/^[^/]+\/\d+$/);
        expect(fleet.names).toContain(result.worker);
        // Its journal is the worker's, in the workers' run folder; here the same machine.
        expect(result.logDir).toBe(workerLogs);
        expect(readTranscript(result).length).toBeGreaterThanOrEqual(4);
      });
      expect([...settles.counts.values()]).toEqual([1, 1, 1, 1, 1, 1]);
      expect([...settles.counts.keys()].sort()).toEqual(handles.map((h) => h.id).sort());
      const after = engine!.stats;
      expect(after.workerResults - before.workerResults).toBe(6);
      expect(after.delivered - before.delivered).toBe(6);
      expect(after.mainResults - before.mainResults).toBe(0);
      expect(after.duplicateResults).toBe(0);
      expect(engine!.liveCount).toBe(0);
      // A handle settled is settled: a late cancel changes nothing.
      expect(handles[0]!.cancel()).toBe(false);
    });

    it('a job id spawned again right after its result runs again: the new child gets its own answer', async () => {
      for (const round of [1, 2, 3]) {
        const handle = engine!.spawn(
          { title: `again ${round}`, prompt: scripted([{ reply: `round ${round}` }]) },
          { jobId: 'same-id-again' },
        );
        // The finished job's removal waits for its window; the next add must not find it.
        expect(await handle.result).toMatchObject({ outcome: 'complete', text: `round ${round}` });
      }
    });

    it('a session’s async children run on the workers; their results reach the root’s inbox with the current generation', async () => {
      const { fleet } = current!;
      const session = new Session(engine!, { autoWake: false });
      const events: SessionEvent[] = [];
      const consume = (async () => {
        for await (const event of session.events()) events.push(event);
      })();
      try {
        // A clear first: generation 1 is what the children must carry, not the default 0.
        session.clear();
        expect(session.generation).toBe(1);
        const first = await session.send(
          scripted([
            {
              calls: ['a', 'b', 'c'].map((title) =>
                asyncAgent(title, [{ calls: [{ name: 'echo', input: {} }] }, { reply: title }]),
              ),
            },
            { text: 'started' },
            { text: 'all three are in' },
          ]),
        );
        expect(first).toMatchObject({ outcome: 'ready', text: 'started', generation: 1 });
        await session.waitIdle();
        const pending = session.pending;
        expect(pending.map((result) => result.title).sort()).toEqual(['a', 'b', 'c']);
        for (const result of pending) {
          expect(result).toMatchObject({ outcome: 'complete', generation: 1, text: result.title });
          expect(fleet.names).toContain(result.worker);
        }
        const second = await session.send('Anything new?');
        expect(second.text).toBe('all three are in');
        expect(session.delivered.map((result) => result.id).sort()).toEqual(
          pending.map((result) => result.id).sort(),
        );
        // The root read them in its inbox, each by id.
        const inbox = JSON.stringify(session.transcript);
        for (const result of pending) expect(inbox).toContain(result.id);
      } finally {
        await session.close();
        await consume;
      }
      const settled = events.flatMap((event) =>
        event.type === 'agent-settle' ? [event.result] : [],
      );
      expect(settled).toHaveLength(3);
      for (const result of settled) expect(fleet.names).toContain(result.worker);
    });

    it('the reaper cancels a remote child at its ceiling, with reason ceiling', async () => {
      const marker = path.join(folder('cq-mark-'), 'held');
      const session = new Session(engine!, { autoWake: false, ceilingMs: 2000 });
      try {
        await session.send(
          scripted([
            {
              calls: [
                {
                  name: 'agent',
                  input: { title: 'forever', mode: 'async', prompt: holdPrompt(marker) },
                },
              ],
            },
            { text: 'ok' },
          ]),
        );
        await session.waitIdle();
        const pending = session.pending;
        expect(pending).toHaveLength(1);
        expect(pending[0]).toMatchObject({
          title: 'forever',
          outcome: 'cancelled',
          reason: 'ceiling',
        });
        // When it had reached its worker, it is that worker that answered the cancel.
        if (existsSync(marker)) expect(current!.fleet.names).toContain(pending[0]!.worker);
      } finally {
        await session.close();
      }
      expect(engine!.liveCount).toBe(0);
      expect(engine!.stats.duplicateResults).toBe(0);
    });
  },
);

describe.skipIf(redisMissing)(
  redisMissing
    ? `queue engine: cancel and close (skipped: ${redisMissing})`
    : 'queue engine: cancel and close',
  () => {
    // One worker taking one job at a time: a second child waits in Redis while the first holds,
    // and a next job runs only once the worker's one slot is free again.
    const NAME = 'cancels';
    let current: Stage | undefined;
    let engine: Engine | undefined;
    beforeAll(async () => {
      current = await stage(NAME, 1, ['--concurrency', '1']);
      // A grace far past the test's timeout: a cancelled result that comes at all came from the
      // worker (or from the queue's removal), never from the producer's grace timer.
      engine = await startEngine(current, NAME, { cancelGraceMs: 120_000 });
    });
    afterAll(async () => {
      await engine?.close();
      await unstage(current);
    });

    /** A quick job completes on the one worker: its slot is free and it is healthy. */
    async function expectWorkerFree(): Promise<void> {
      const next = await engine!.run({ prompt: scripted([{ reply: 'next' }]) });
      expect(next).toMatchObject({ outcome: 'complete', text: 'next' });
      expect(next.worker).toBe(current!.fleet.names[0]);
    }

    it('a cancel of a child running on a worker ends it there: one cancelled result, reason user', async () => {
      const { fleet } = current!;
      const marker = path.join(folder('cq-mark-'), 'running');
      const before = engine!.stats;
      const settles = settleCounter();
      const handle = engine!.spawn({ prompt: holdPrompt(marker), onEvent: settles.onEvent });
      expect(await pidsIn(marker)).toEqual([fleet.workers[0]!.pid]);
      await pollUntil(() => handle.status === 'running', 'the handle to be running');
      expect(handle.cancel()).toBe(true);
      const result = await handle.result;
      expect(result).toMatchObject({ id: handle.id, outcome: 'cancelled', reason: 'user' });
      // The worker answered it (the grace timer could not have: it is longer than the test).
      expect(result.worker).toBe(fleet.names[0]);
      expect(engine!.stats.mainResults - before.mainResults).toBe(0);
      expect(settles.counts.get(handle.id)).toBe(1);
      expect(fleet.workers[0]!.alive()).toBe(true);
      await expectWorkerFree();
    });

    it('a cancel of a child waiting in the queue removes its job; the running one is cancelled after', async () => {
      const { rig, fleet } = current!;
      const marks = folder('cq-mark-');
      const settles = settleCounter();
      const first = engine!.spawn({
        prompt: holdPrompt(path.join(marks, 'first')),
        onEvent: settles.onEvent,
      });
      await pidsIn(path.join(marks, 'first'));
      const second = engine!.spawn({
        prompt: holdPrompt(path.join(marks, 'second')),
        onEvent: settles.onEvent,
      });
      await withQueue(rig, NAME, async (queue) => {
        await eventually(
          async () => (await queue.getJobState(second.id)) === 'waiting',
          'the second job to wait in Redis',
        );
        expect(second.status).toBe('queued');
        second.cancel();
        const result = await second.result;
        expect(result).toMatchObject({ id: second.id, outcome: 'cancelled', reason: 'user' });
        // Made by the producer when it took the job out: no worker ever saw it.
        expect(result.worker).toBeUndefined();
        expect(await queue.getJob(second.id)).toBeUndefined();
        const client = rig.client();
        try {
          expect(await client.exists(`bull:${NAME}:${second.id}`)).toBe(0);
          expect(await client.lpos(`bull:${NAME}:wait`, second.id)).toBeNull();
        } finally {
          client.disconnect();
        }
      });
      expect(existsSync(path.join(marks, 'second'))).toBe(false);
      expect(first.status).toBe('running');
      first.cancel();
      expect(await first.result).toMatchObject({
        outcome: 'cancelled',
        reason: 'user',
        worker: fleet.names[0],
      });
      expect(settles.counts.get(first.id)).toBe(1);
      expect(settles.counts.get(second.id)).toBe(1);
      expect(engine!.stats.duplicateResults).toBe(0);
      await expectWorkerFree();
    });

    it('with no worker alive to answer, a cancel still ends in one cancelled result', async () => {
      const { rig, model } = current!;
      // A job no worker ever took: its removal is the answer.
      const idle = await startEngine({ rig, model }, 'nobody', { cancelGraceMs: 200 });
      try {
        const handle = idle.spawn({ prompt: scripted([{ reply: 'never' }]) });
        await withQueue(rig, 'nobody', (queue) =>
          eventually(async () => (await queue.getJobState(handle.id)) === 'waiting', 'the job'),
        );
        handle.cancel();
        expect(await handle.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      } finally {
        await idle.close();
      }
      // A job whose worker was SIGKILLed holding it: it stays locked (default 30 s lock), so it
      // cannot be removed and nobody answers; the producer makes the result after its grace.
      const orphaned = await startEngine({ rig, model }, 'orphan', { cancelGraceMs: 200 });
      try {
        const lone = await startWorkers(rig, 1, [
          '--queue-name',
          'orphan',
          '--threads',
          '1',
          '--log-dir',
          folder('cq-wlogs-'),
        ]);
        const marker = path.join(folder('cq-mark-'), 'orphan');
        const settles = settleCounter();
        const handle = orphaned.spawn({ prompt: holdPrompt(marker), onEvent: settles.onEvent });
        await pidsIn(marker);
        expect((await lone.workers[0]!.kill()).signal).toBe('SIGKILL');
        const before = orphaned.stats;
        handle.cancel();
        const result = await handle.result;
        expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
        expect(result.worker).toBeUndefined();
        expect(orphaned.stats.mainResults - before.mainResults).toBe(1);
        expect(settles.counts.get(handle.id)).toBe(1);
        // Still the dead worker's: the producer's removal could not have been the answer.
        await withQueue(rig, 'orphan', async (queue) => {
          expect(await queue.getJobState(handle.id)).toBe('active');
        });
      } finally {
        await orphaned.close();
      }
    });

    it('close cancels children running and waiting on the queue, one shutdown result each, and leaves the worker idle', async () => {
      const { rig, model, fleet } = current!;
      const closing = await startEngine({ rig, model }, NAME, { cancelGraceMs: 120_000 });
      const marks = folder('cq-mark-');
      const settles = settleCounter();
      const running = closing.spawn({
        prompt: holdPrompt(path.join(marks, 'running')),
        onEvent: settles.onEvent,
      });
      await pidsIn(path.join(marks, 'running'));
      const waiting = closing.spawn({
        prompt: holdPrompt(path.join(marks, 'waiting')),
        onEvent: settles.onEvent,
      });
      await withQueue(rig, NAME, (queue) =>
        eventually(async () => (await queue.getJobState(waiting.id)) === 'waiting', 'the job'),
      );
      await closing.close();
      expect(running.status).toBe('settled');
      expect(waiting.status).toBe('settled');
      const runningResult = await running.result;
      // The whole result in the message: a mismatch shows which part differs.
      expect(runningResult, JSON.stringify(runningResult)).toMatchObject({
        outcome: 'cancelled',
        reason: 'shutdown',
        worker: fleet.names[0],
      });
      // Removed while it waited (the producer's result), or, should the worker's freed slot take
      // it first, answered cancelled by the worker from the cancel kept for it: never run.
      const removed = await waiting.result;
      expect(removed).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
      expect(settles.counts.get(running.id)).toBe(1);
      expect(settles.counts.get(waiting.id)).toBe(1);
      expect(closing.stats.duplicateResults).toBe(0);
      expect(existsSync(path.join(marks, 'waiting'))).toBe(false);
      expect(fleet.workers[0]!.alive()).toBe(true);
      await expectWorkerFree();
    });
  },
);

describe.skipIf(redisMissing)(
  redisMissing
    ? `queue engine: a poison task (skipped: ${redisMissing})`
    : 'queue engine: a poison task',
  () => {
    const NAME = 'poison';
    let current: Stage | undefined;
    let engine: Engine | undefined;
    beforeAll(async () => {
      current = await stage(NAME, 3, [...FAST_STALLS, '--max-deliveries', '2']);
      engine = await startEngine(current, NAME);
    });
    afterAll(async () => {
      await engine?.close();
      await unstage(current);
    });

    it('a task that kills every worker it lands on fails worker_crashed after its deliveries; the survivor runs the next', async () => {
      const { fleet } = current!;
      const deaths = path.join(folder('cq-mark-'), 'deaths');
      const settles = settleCounter();
      const handle = engine!.spawn({
        title: 'poison',
        prompt: scripted([{ calls: [{ name: 'die', input: { file: deaths } }] }, { reply: 'x' }]),
        onEvent: settles.onEvent,
      });
      const result = await handle.result;
      expect(result).toMatchObject({ title: 'poison', outcome: 'failed', code: 'worker_crashed' });
      expect(settles.counts.get(handle.id)).toBe(1);
      // Two deliveries, each on a different worker, each of which died of it.
      const killers = readFileSync(deaths, 'utf8').split('\n').filter(Boolean).map(Number);
      expect(killers).toHaveLength(2);
      expect(new Set(killers).size).toBe(2);
      const byPid = new Map(fleet.workers.map((worker) => [worker.pid, worker]));
      for (const pid of killers) {
        expect(byPid.has(pid)).toBe(true);
        expect((await byPid.get(pid)!.exit).signal).toBe('SIGKILL');
      }
      const survivors = fleet.workers.filter((worker) => !killers.includes(worker.pid));
      expect(survivors).toHaveLength(1);
      expect(survivors[0]!.alive()).toBe(true);
      const next = await engine!.run({ prompt: scripted([{ reply: 'fine' }]) });
      expect(next).toMatchObject({ outcome: 'complete', text: 'fine', worker: survivors[0]!.name });
      expect(engine!.stats.duplicateResults).toBe(0);
    });
  },
);

describe.skipIf(redisMissing)(
  redisMissing
    ? `queue engine: strangers on the queue (skipped: ${redisMissing})`
    : 'queue engine: strangers on the queue',
  () => {
    const NAME = 'real';
    let current: Stage | undefined;
    beforeAll(async () => {
      current = await stage(NAME, 1);
    });
    afterAll(() => unstage(current));

    it('a worker that answers something other than an AgentResult fails the child, code internal', async () => {
      const { rig, model } = current!;
      const engine = await startEngine({ rig, model }, 'garbage');
      const stranger = new Worker('garbage', async () => ({ nonsense: true }), {
        connection: { path: rig.socket },
      });
      try {
        const result = await engine.run({ prompt: scripted([{ reply: 'x' }]) });
        expect(result).toMatchObject({ outcome: 'failed', code: 'internal' });
        expect(result.reason).toMatch(/worker answered garbage/);
        expect(result.worker).toBeUndefined();
        expect(engine.stats.duplicateResults).toBe(0);
      } finally {
        await stranger.close();
        await engine.close();
      }
    });

    it('a cohort worker fails jobs it cannot read, without crashing, and runs the next real one', async () => {
      const { rig, model, fleet } = current!;
      const unreadable = [
        { id: 'bad-version', data: { v: 99, spec: {} }, reason: /version 99/ },
        { id: 'no-spec', data: { v: 1 }, reason: /no agent spec/ },
        { id: 'no-prompt', data: { v: 1, spec: { id: 'x' } }, reason: /lacks its id, prompt/ },
        { id: 'not-object', data: 'text', reason: /no data object/ },
      ];
      await withQueue(rig, NAME, async (queue) => {
        for (const job of unreadable) await queue.add(JOB_NAME, job.data, { jobId: job.id });
        for (const job of unreadable) {
          const failed = await eventually(async () => {
            const found = await queue.getJob(job.id);
            return found?.finishedOn ? found : undefined;
          }, `job ${job.id} to finish`);
          expect(failed.failedReason).toMatch(job.reason);
          // Unrecoverable: failed at its first attempt, never retried or stalled.
          expect(failed.attemptsMade).toBeLessThanOrEqual(1);
        }
      });
      expect(fleet.workers[0]!.alive()).toBe(true);
      const engine = await startEngine({ rig, model }, NAME);
      try {
        const result = await engine.run({ prompt: scripted([{ reply: 'still here' }]) });
        expect(result).toMatchObject({
          outcome: 'complete',
          text: 'still here',
          worker: fleet.names[0],
        });
      } finally {
        await engine.close();
      }
    });
  },
);

describe('queue engine: misuse', () => {
  // None of these reach a Redis: they need no redis-server.
  const hostTool = {
    name: 'host_echo',
    description: 'Echoes.',
    inputSchema: { type: 'object' as const },
    run: () => 'x',
  };

  async function refusal(options: EngineOptions): Promise<Error> {
    try {
      const engine = await Engine.start({ logDir: folder('cq-logs-'), ...options });
      await engine.close();
    } catch (error) {
      return error as Error;
    }
    throw new Error('Expected Engine.start to refuse, it started');
  }

  it('refuses hostTools, maxDepth above 1 and a URL that is not Redis, as usage errors', async () => {
    const url = path.join(folder('cq-none-'), 'r.sock');
    const withHostTools = await refusal({ queue: { url }, hostTools: [hostTool] });
    expect(withHostTools).toBeInstanceOf(UsageError);
    expect(withHostTools.message).toMatch(/hostTools/);
    const deep = await refusal({ queue: { url }, maxDepth: 2 });
    expect(deep).toBeInstanceOf(UsageError);
    expect(deep.message).toMatch(/maxDepth/);
    const ftp = await refusal({ queue: { url: 'ftp://x' } });
    expect(ftp).toBeInstanceOf(UsageError);
    expect(ftp.message).toMatch(/queue\.url/);
  });

  it('an unreachable Redis rejects within connectTimeoutMs, naming it, and leaves nothing running', async () => {
    const socket = path.join(folder('cq-none-'), 'r.sock');
    const handles = () =>
      process
        .getActiveResourcesInfo()
        .filter((kind) => kind === 'PipeWrap' || kind === 'TCPWrap' || kind === 'Timeout').length;
    const baseline = handles();
    const error = await refusal({ queue: { url: socket, connectTimeoutMs: 500 } });
    expect(error.message).toContain(socket);
    expect(error.message).toMatch(/within 500 ms/);
    // ioredis would retry forever: every connection it had must be let go (no timer, no pipe).
    await pollUntil(() => handles() <= baseline, 'the connections to be let go', {
      timeoutMs: 5000,
    });
    const secret = await refusal({
      queue: { url: 'redis://:secret@127.0.0.1:1', connectTimeoutMs: 500 },
    });
    expect(secret.message).toContain('127.0.0.1:1');
    expect(`${secret.message}\n${secret.stack}`).not.toContain('secret');
    await pollUntil(() => handles() <= baseline, 'the connections to be let go', {
      timeoutMs: 5000,
    });
  });
});
