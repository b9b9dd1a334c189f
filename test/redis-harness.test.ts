import { existsSync, readdirSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { probeRedis, type RedisRig, redisMissing, startRedis } from './redis.js';

const rigs: RedisRig[] = [];
const clients: Redis[] = [];

async function rig(options: { persist?: boolean } = {}): Promise<RedisRig> {
  const started = await startRedis(options);
  rigs.push(started);
  return started;
}

function client(from: RedisRig): Redis {
  const made = from.client();
  // The server is killed under it on purpose; the reconnection attempts' errors are expected.
  made.on('error', () => {});
  clients.push(made);
  return made;
}

afterEach(async () => {
  for (const made of clients.splice(0)) made.disconnect();
  await Promise.all(rigs.splice(0).map((started) => started.stop()));
});

describe.skipIf(redisMissing)(
  redisMissing ? `redis harness (skipped: ${redisMissing})` : 'redis harness',
  () => {
    it('starts a private server on a socket in its own folder, with no TCP port', async () => {
      const started = await rig();
      expect(started.url).toBe(started.socket);
      expect(started.socket.startsWith(started.dir)).toBe(true);
      const redis = client(started);
      await redis.set('greeting', 'hello');
      expect(await redis.get('greeting')).toBe('hello');
      expect(await redis.config('GET', 'port')).toEqual(['port', '0']);
      expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
    });

    it('gives each rig its own server and data', async () => {
      const [one, two] = await Promise.all([rig(), rig()]);
      expect(one.socket).not.toBe(two.socket);
      await client(one).set('owner', 'one');
      expect(await client(two).get('owner')).toBeNull();
    });

    it('restart() kills the server and brings it back on the same socket without its data', async () => {
      const started = await rig();
      const before = client(started);
      const pidBefore = await serverPid(before);
      await before.set('kept', 'no');
      await started.restart({ downMs: 50 });
      const after = client(started);
      expect(await serverPid(after)).not.toBe(pidBefore);
      expect(await after.get('kept')).toBeNull();
      // The client made before the restart reconnects on its own.
      expect(await before.ping()).toBe('PONG');
    });

    it('with persist: true a restart keeps the data (append-only, fsync always)', async () => {
      const started = await rig({ persist: true });
      const before = client(started);
      const pidBefore = await serverPid(before);
      await before.set('kept', 'yes');
      await started.restart();
      const after = client(started);
      expect(await serverPid(after)).not.toBe(pidBefore);
      expect(await after.get('kept')).toBe('yes');
    });

    it('kill() then start() brings the server back; start() on a running one is refused', async () => {
      const started = await rig();
      await expect(started.start()).rejects.toThrow(/already running/);
      await started.kill();
      const probe = started.client();
      probe.on('error', () => {});
      // Nothing listens now: the socket refuses (or is gone), so a command cannot be answered.
      probe.options.retryStrategy = () => null;
      probe.options.maxRetriesPerRequest = 0;
      await expect(probe.ping()).rejects.toThrow();
      probe.disconnect();
      await started.start();
      expect(await client(started).ping()).toBe('PONG');
    });

    it('stop() ends the server and removes its folder, and is idempotent', async () => {
      const started = await rig();
      expect(readdirSync(started.dir)).toContain('r.sock');
      await Promise.all([started.stop(), started.stop()]);
      expect(existsSync(started.dir)).toBe(false);
      await started.stop();
      await expect(started.start()).rejects.toThrow(/was stopped/);
    });

    it('stop() after kill() still removes the folder', async () => {
      const started = await rig({ persist: true });
      await started.kill();
      await started.stop();
      expect(existsSync(started.dir)).toBe(false);
    });
  },
);

describe('redis harness, whether or not redis-server is here', () => {
  const absent = 'cohort-no-such-redis-server';

  it('names the reason to skip when the program is missing', () => {
    expect(probeRedis(absent, {})).toBe(
      'redis-server is not installed (Debian package redis-server)',
    );
  });

  it('throws instead when COHORT_REQUIRE_REDIS=1, so CI cannot pass by skipping', () => {
    expect(() => probeRedis(absent, { COHORT_REQUIRE_REDIS: '1' })).toThrow(
      'COHORT_REQUIRE_REDIS is set but redis-server is not installed',
    );
  });

  it('redisMissing agrees with a probe of the real program', () => {
    expect(redisMissing).toBe(probeRedis('redis-server', {}));
  });
});

async function serverPid(redis: Redis): Promise<string> {
  const info = await redis.info('server');
  const pid = /process_id:(\d+)/.exec(info)?.[1];
  if (pid === undefined) throw new Error(`no process_id in INFO: ${info}`);
  return pid;
}
