import type { Socket } from 'node:net';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CheckpointRun, Checkpoints } from '../src/main/runners/queue/checkpoints.js';
import {
  EventsReader,
  parseReturnValue,
  type QueueEventHandlers,
} from '../src/main/runners/queue/events-reader.js';
import { QueueKeys } from '../src/main/runners/queue/job.js';
import { inOneWrite, WriteWindow } from '../src/main/runners/queue/write-window.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// The queue's batched round trips: the window itself, the events reader and the checkpoint
// writes, on a real redis-server. What a window sends, and that nothing is lost or reordered by
// sending many at once.

describe('WriteWindow', () => {
  it('sends what one window gathered together, once, and resolves every push with it', async () => {
    const sent: number[][] = [];
    const batch = new WriteWindow<number>(async (items) => {
      sent.push(items);
    }, 20);
    const pushes = [batch.push(1), batch.push(2), batch.push(3)];
    expect(batch.waiting).toBe(3);
    expect(sent).toEqual([]);
    await Promise.all(pushes);
    expect(sent).toEqual([[1, 2, 3]]);
    // The next push opens a new window.
    await batch.push(4);
    expect(sent).toEqual([[1, 2, 3], [4]]);
  });

  it('a window of 0 ms gathers one turn of the event loop', async () => {
    const sent: string[][] = [];
    const batch = new WriteWindow<string>(async (items) => {
      sent.push(items);
    }, 0);
    const first = [batch.push('a'), batch.push('b')];
    await Promise.all(first);
    await batch.push('c');
    expect(sent).toEqual([['a', 'b'], ['c']]);
  });

  it('flush sends at once, and discard takes items out before their window', async () => {
    const sent: number[][] = [];
    const batch = new WriteWindow<number>(async (items) => {
      sent.push(items);
    }, 60_000);
    const pushed = [batch.push(1), batch.push(2), batch.push(3)];
    batch.discard((item) => item === 2);
    await batch.flush();
    await Promise.all(pushed);
    expect(sent).toEqual([[1, 3]]);
    // Nothing waiting: a flush sends nothing.
    await batch.flush();
    expect(sent).toHaveLength(1);
  });
});

describe('parseReturnValue', () => {
  it('reads the JSON a worker answered, and hands back text that is not JSON as it is', () => {
    expect(parseReturnValue('{"id":"a","outcome":"complete"}')).toEqual({
      id: 'a',
      outcome: 'complete',
    });
    expect(parseReturnValue('not json')).toBe('not json');
    expect(parseReturnValue(undefined)).toBeUndefined();
  });
});

describe.skipIf(redisMissing)(
  redisMissing ? `batched queue I/O (skipped: ${redisMissing})` : 'batched queue I/O',
  () => {
    let rig: RedisRig;
    const clients: Redis[] = [];
    const client = () => {
      const made = rig.client();
      clients.push(made);
      return made;
    };
    beforeAll(async () => {
      rig = await startRedis();
    });
    afterAll(async () => {
      for (const made of clients) made.disconnect();
      await rig?.stop();
    });

    /** Waits until `check` holds, polling; fails the test after `withinMs`. */
    async function until(check: () => boolean, withinMs = 5000): Promise<void> {
      const deadline = Date.now() + withinMs;
      while (!check()) {
        if (Date.now() > deadline) throw new Error('condition not met in time');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }

    /** A started reader on `key`: a read blocks `blockMs`, takes at most `count` entries. */
    async function startedReader(
      redis: Redis,
      key: string,
      handlers: QueueEventHandlers,
      gatherMs: number,
      blockMs = 1000,
      count = 100,
    ): Promise<EventsReader> {
      const reader = new EventsReader(redis, key, handlers, { gatherMs, blockMs, count });
      await reader.start();
      return reader;
    }

    function recorder() {
      const seen: string[] = [];
      return {
        seen,
        handlers: {
          active: (jobId: string) => seen.push(`active ${jobId}`),
          completed: (jobId: string, value: string | undefined) =>
            seen.push(`completed ${jobId} ${value}`),
          failed: (jobId: string, reason: string) => seen.push(`failed ${jobId} ${reason}`),
          duplicated: (jobId: string) => seen.push(`duplicated ${jobId}`),
        },
      };
    }

    it('the events reader starts after the last entry, reads the four events in order and skips the rest', async () => {
      const writer = client();
      const key = 'bull:reader-order:events';
      await writer.xadd(key, '*', 'event', 'completed', 'jobId', 'before', 'returnvalue', '1');
      const { seen, handlers } = recorder();
      const reader = await startedReader(client(), key, handlers, 5);
      await writer.xadd(key, '*', 'event', 'added', 'jobId', 'a', 'name', 'x');
      await writer.xadd(key, '*', 'event', 'active', 'jobId', 'a', 'prev', 'waiting');
      await writer.xadd(key, '*', 'event', 'completed', 'jobId', 'a', 'returnvalue', '{"n":1}');
      await writer.xadd(key, '*', 'event', 'failed', 'jobId', 'b', 'failedReason', 'boom');
      await writer.xadd(key, '*', 'event', 'duplicated', 'jobId', 'c');
      await writer.xadd(key, '*', 'event', 'removed', 'jobId', 'a', 'prev', 'completed');
      await until(() => seen.length >= 4);
      reader.stop();
      expect(seen).toEqual(['active a', 'completed a {"n":1}', 'failed b boom', 'duplicated c']);
    });

    it('reads more entries than one read takes, and goes on from the last after its connection is cut', async () => {
      const writer = client();
      const key = 'bull:reader-cut:events';
      const readerClient = client();
      const { seen, handlers } = recorder();
      const reader = await startedReader(readerClient, key, handlers, 5, 500, 7);
      const many = writer.pipeline();
      for (let n = 0; n < 50; n++) many.xadd(key, '*', 'event', 'active', 'jobId', `j${n}`);
      await many.exec();
      await until(() => seen.length === 50);
      // The reader's connection goes away and comes back (ioredis reconnects on its own).
      readerClient.disconnect(true);
      for (let n = 50; n < 60; n++)
        await writer.xadd(key, '*', 'event', 'active', 'jobId', `j${n}`);
      await until(() => seen.length === 60, 10_000);
      reader.stop();
      expect(seen).toEqual(Array.from({ length: 60 }, (_, n) => `active j${n}`));
    });

    it('readPast resolves once every entry written before it has reached the handlers', async () => {
      const writer = client();
      const key = 'bull:reader-past:events';
      const { seen, handlers } = recorder();
      // A long gather: without readPast's wait, the later entries would not be read for a minute.
      const reader = await startedReader(client(), key, handlers, 60_000);
      // Nothing in the stream yet: nothing to wait for.
      await reader.readPast(writer);
      await writer.xadd(key, '*', 'event', 'active', 'jobId', 'a');
      await until(() => seen.length === 1);
      // The reader now sits in its gather pause; these land behind it.
      await writer.xadd(key, '*', 'event', 'completed', 'jobId', 'a', 'returnvalue', '"x"');
      await writer.xadd(key, '*', 'event', 'removed', 'jobId', 'a', 'prev', 'completed');
      const past = reader.readPast(writer);
      let resolved = false;
      void past.then(() => {
        resolved = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(resolved).toBe(false);
      // A stop lets every waiter go, read or not.
      reader.stop();
      await past;
      expect(seen).toEqual(['active a']);
      // A reader that keeps reading releases the waiter itself, after handling what came before.
      const { seen: seen2, handlers: handlers2 } = recorder();
      const reader2 = await startedReader(client(), key, handlers2, 5);
      await writer.xadd(key, '*', 'event', 'completed', 'jobId', 'b', 'returnvalue', '"y"');
      await reader2.readPast(writer);
      expect(seen2).toEqual(['completed b "y"']);
      reader2.stop();
    });

    it("checkpoint writes of many runs go as one call; each lands only while its run's token holds the lock", async () => {
      const redis = client();
      const keys = new QueueKeys('bull', 'ckpt-batch');
      const lost: CheckpointRun[] = [];
      const checkpoints = new Checkpoints<CheckpointRun>(redis, keys, (run) => lost.push(run));
      const runs = ['a', 'b', 'c'].map((jobId) => ({ jobId, run: { token: `t-${jobId}` } }));
      // a and b hold their locks; c's lock is another run's.
      await redis.set(keys.lock('a'), 't-a');
      await redis.set(keys.lock('b'), 't-b');
      await redis.set(keys.lock('c'), 'someone-else');
      const before = await scriptCalls(redis);
      for (const { jobId, run } of runs) {
        checkpoints.save(run, jobId, { replace: true, lines: `${jobId}0\n` });
        checkpoints.save(run, jobId, { replace: false, lines: `${jobId}1\n` });
        checkpoints.save(run, jobId, { replace: false, lines: `${jobId}2\n` });
      }
      await Promise.all(runs.map(({ run }) => checkpoints.written(run)));
      expect((await scriptCalls(redis)) - before).toBe(1);
      expect((await redis.lrange(keys.checkpoint('a'), 0, -1)).join('')).toBe('a0\na1\na2\n');
      expect((await redis.lrange(keys.checkpoint('b'), 0, -1)).join('')).toBe('b0\nb1\nb2\n');
      expect(await redis.exists(keys.checkpoint('c'))).toBe(0);
      expect(lost).toEqual([runs[2]!.run]);
      // A replace starts the list over; appends after it follow it.
      const [a] = runs;
      checkpoints.save(a!.run, 'a', { replace: false, lines: 'a3\n' });
      checkpoints.save(a!.run, 'a', { replace: true, lines: 'A\n' });
      checkpoints.save(a!.run, 'a', { replace: false, lines: 'A1\n' });
      await checkpoints.written(a!.run);
      expect((await redis.lrange(keys.checkpoint('a'), 0, -1)).join('')).toBe('A\nA1\n');
    });

    it('inOneWrite sends the commands it starts, BullMQ adds among them, in one socket write', async () => {
      const redis = client();
      const queue = new Queue('one-write', { connection: redis });
      // The add script loaded first: a first call may go again as EVAL, a write of its own.
      await queue.add('warm', {}, { jobId: 'warm' });
      const socket = redis.stream as Socket;
      let writes = 0;
      const counted = socket as unknown as Record<
        '_write' | '_writev',
        (...args: unknown[]) => void
      >;
      for (const name of ['_write', '_writev'] as const) {
        const original = counted[name]!.bind(socket);
        counted[name] = (...args: unknown[]) => {
          writes++;
          original(...args);
        };
      }
      const answers = await Promise.all(
        inOneWrite(redis, () => [
          queue.add('a', { n: 1 }, { jobId: 'a' }).then((job) => job.id),
          queue.add('b', { n: 2 }, { jobId: 'b' }).then((job) => job.id),
          redis.set('one-write', 'v'),
          redis.get('one-write'),
        ]),
      );
      expect(answers).toEqual(['a', 'b', 'OK', 'v']);
      expect(writes).toBe(1);
      // Both jobs are in Redis, whole.
      const jobs = await Promise.all([queue.getJob('a'), queue.getJob('b')]);
      expect(jobs.map((job) => job?.data)).toEqual([{ n: 1 }, { n: 2 }]);
      await queue.close();
    });

    it('a forgotten run writes nothing of what waited; a failed write stops appends until a replace', async () => {
      const redis = client();
      const keys = new QueueKeys('bull', 'ckpt-forget');
      const checkpoints = new Checkpoints<CheckpointRun>(redis, keys, () => {});
      const run: CheckpointRun = { token: 't' };
      await redis.set(keys.lock('j'), 't');
      checkpoints.save(run, 'j', { replace: true, lines: 'x\n' });
      checkpoints.forget(run);
      await checkpoints.written(run);
      expect(await redis.exists(keys.checkpoint('j'))).toBe(0);
      // A list of another type makes the script fail: the write fails, as with Redis refusing.
      await redis.set(keys.checkpoint('j'), 'not a list');
      checkpoints.save(run, 'j', { replace: false, lines: 'y\n' });
      await checkpoints.written(run);
      expect(run.checkpointBroken).toBe(true);
      await redis.del(keys.checkpoint('j'));
      checkpoints.save(run, 'j', { replace: false, lines: 'hole\n' });
      await checkpoints.written(run);
      expect(await redis.exists(keys.checkpoint('j'))).toBe(0);
      checkpoints.save(run, 'j', { replace: true, lines: 'whole\n' });
      await checkpoints.written(run);
      expect(run.checkpointBroken).toBe(false);
      expect(await redis.lrange(keys.checkpoint('j'), 0, -1)).toEqual(['whole\n']);
    });
  },
);

/** Script calls Redis has run (EVALSHA and EVAL), from its own command counts. */
async function scriptCalls(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats');
  let calls = 0;
  for (const match of stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) {
    calls += Number(match[2]);
  }
  return calls;
}
