import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkQueueName,
  checkQueueUrl,
  describeRedis,
  redisOptionsOf,
} from '../src/main/runners/queue/connection.js';
import { UsageError } from '../src/shared/errors.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

const SECRET = 's3cr3t-Pw';

/** The thrown error, which the test requires to be a UsageError. */
function refusal(run: () => unknown): UsageError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return error as UsageError;
  }
  throw new Error('expected a UsageError, nothing was thrown');
}

/** The options without the three that every form shares (checked on their own below). */
function addressOf(url: string): Record<string, unknown> {
  const {
    maxRetriesPerRequest: _retries,
    retryStrategy: _strategy,
    disconnectTimeout: _disconnect,
    ...address
  } = redisOptionsOf(url);
  return address;
}

describe('redisOptionsOf', () => {
  it.each([
    ['redis://:pw@h:6380/2', { host: 'h', port: 6380, password: 'pw', db: 2 }],
    ['redis://h', { host: 'h', port: 6379 }],
    ['redis://h/', { host: 'h', port: 6379 }],
    ['redis://h:7000/0', { host: 'h', port: 7000, db: 0 }],
    ['redis://user:pw@h', { host: 'h', port: 6379, username: 'user', password: 'pw' }],
    ['redis://user@h', { host: 'h', port: 6379, username: 'user' }],
    ['redis://:p%40ss%2Fw@h', { host: 'h', port: 6379, password: 'p@ss/w' }],
    ['redis://:p@ss@h', { host: 'h', port: 6379, password: 'p@ss' }],
    ['redis://[::1]:6390', { host: '::1', port: 6390 }],
    ['redis://127.0.0.1:6379/15', { host: '127.0.0.1', port: 6379, db: 15 }],
    [
      'rediss://:pw@cache.example:6380/1',
      {
        host: 'cache.example',
        port: 6380,
        password: 'pw',
        db: 1,
        tls: {},
      },
    ],
    ['unix:///run/redis/r.sock', { path: '/run/redis/r.sock' }],
    ['unix:///tmp/with%20space.sock', { path: '/tmp/with space.sock' }],
    ['/run/redis/r.sock', { path: '/run/redis/r.sock' }],
    ['./r.sock', { path: './r.sock' }],
    ['sockets/r.sock', { path: 'sockets/r.sock' }],
  ])('%s', (url, address) => {
    expect(addressOf(url)).toEqual(address);
  });

  it('waits for Redis forever: no per-request retry limit, a capped backoff', () => {
    for (const url of ['redis://h', 'rediss://h', 'unix:///r.sock', '/r.sock']) {
      const options = redisOptionsOf(url);
      expect(options.maxRetriesPerRequest).toBeNull();
      const delays = [1, 2, 5, 10, 11, 1000, 1e6].map((attempt) =>
        options.retryStrategy?.(attempt),
      );
      expect(delays).toEqual([200, 400, 1000, 2000, 2000, 2000, 2000]);
      // A disconnect destroys a socket that has not closed within 200 ms, rather than 2 s.
      expect(options.disconnectTimeout).toBe(200);
    }
  });

  it('refuses what it cannot read, without showing the password', () => {
    const error = refusal(() => redisOptionsOf(`ftp://:${SECRET}@h`));
    expect(error.message).toContain('`queue.url`');
    expect(error.message).not.toContain(SECRET);
  });
});

describe('checkQueueUrl', () => {
  it('returns an accepted value unchanged', () => {
    for (const url of ['redis://:pw@h:6380/2', 'rediss://h', 'unix:///r.sock', './r.sock']) {
      expect(checkQueueUrl('queue.url', url)).toBe(url);
    }
  });

  it.each([
    ['an empty string', ''],
    ['an ftp URL', 'ftp://h/file'],
    ['an http URL', 'http://h:6379'],
    ['a bare host', 'localhost'],
    ['a host and port', 'localhost:6379'],
    ['a bare file name', 'r.sock'],
    ['no host', 'redis://'],
    ['no host, only a path', 'redis:///2'],
    ['port 0', 'redis://h:0'],
    ['a port past 65535', 'redis://h:65536'],
    ['a path that is no database number', 'redis://h/cache'],
    ['a negative database', 'redis://h/-1'],
    ['a database with a sub-path', 'redis://h/1/2'],
    ['a query', 'redis://h?db=2'],
    ['a fragment', 'redis://h#x'],
    ['a unix URL with a host', 'unix://r.sock'],
    ['a unix URL that names a folder', 'unix:///run/'],
    ['a one-slash URL', 'redis:/h'],
    ['a one-slash unix URL', 'unix:/r.sock'],
    ['a newline', '/tmp/r.sock\n'],
    ['a bad percent-escape in the password', 'redis://:%zz@h'],
  ])('refuses %s', (_label, value) => {
    const error = refusal(() => checkQueueUrl('queue.url', value));
    expect(error.message).toMatch(
      /^Expected `queue\.url` to be a redis:\/\/ or rediss:\/\/ URL or a unix socket path/,
    );
  });

  it.each([
    ['a number', 6379, '`6379` (number)'],
    ['nothing', undefined, 'nothing'],
    ['null', null, '`null` (null)'],
  ])('refuses %s, saying what arrived', (_label, value, shown) => {
    expect(refusal(() => checkQueueUrl('--queue', value)).message).toBe(
      `Expected \`--queue\` to be a redis:// or rediss:// URL or a unix socket path, got ${shown}`,
    );
  });

  it('says what was wrong when it can', () => {
    expect(refusal(() => checkQueueUrl('--queue', 'redis://h/cache')).message).toBe(
      'Expected `--queue` to be a redis:// or rediss:// URL or a unix socket path, with a ' +
        'database number as its path (`/0`, `/1`, …), got `redis://h/cache` (string)',
    );
  });

  it.each([
    ['an unknown scheme', `ftp://user:${SECRET}@h`],
    ['a bad database', `redis://:${SECRET}@h/cache`],
    ['port 0', `redis://u:${SECRET}@h:0`],
    ['a query', `redis://:${SECRET}@h?x=1`],
    ['a query holding it', `redis://h?password=${SECRET}`],
    ['a password with a slash (unparseable)', `redis://:ab/${SECRET}@h`],
    ['a password with an @ and a slash', `redis://:a@b/${SECRET}@h:99999`],
    ['a password with a newline', `redis://:${SECRET}\n@h`],
  ])('never shows the password: %s', (_label, value) => {
    const message = refusal(() => checkQueueUrl('queue.url', value)).message;
    expect(message).toMatch(/^Expected `queue\.url` to be /);
    expect(message).not.toContain(SECRET);
  });
});

describe('describeRedis', () => {
  it.each([
    [`redis://:${SECRET}@h:6380/2`, 'redis://:***@h:6380/2'],
    [`redis://user:${SECRET}@h`, 'redis://user:***@h'],
    [`rediss://:${SECRET}%40x@h`, 'rediss://:***@h'],
    [`unix://:${SECRET}@/run/r.sock`, 'unix://:***@/run/r.sock'],
    [`redis://:p@${SECRET}@h/1`, 'redis://:***@h/1'],
    [`redis://:${SECRET}@h?db=1`, 'redis://:***@h?…'],
    [`redis://h?password=${SECRET}`, 'redis://h?…'],
    [`redis://h#${SECRET}`, 'redis://h?…'],
    [`redis://:x/${SECRET}@h`, 'redis://:***@h'],
    [`redis://:a@b/${SECRET}@h:99999`, 'redis://:***@h:99999'],
    [`redis://us/er:${SECRET}@h`, 'redis://***@h'],
    [`redis://${SECRET}@h`, 'redis://***@h'],
    ['redis://user@h:6380', 'redis://***@h:6380'],
    ['redis://user:@h:6380', 'redis://user:***@h:6380'],
    ['redis://h', 'redis://h'],
    ['unix:///run/r.sock', 'unix:///run/r.sock'],
    ['/run/r.sock', '/run/r.sock'],
    ['./r.sock', './r.sock'],
  ])('%s → %s', (url, shown) => {
    expect(describeRedis(url)).toBe(shown);
    expect(describeRedis(url)).not.toContain(SECRET);
  });
});

describe('checkQueueName', () => {
  it.each(['cohort', 'agents-2', 'team.alpha_beta', 'with space', 'ünïcødé-名前', 'x'.repeat(100)])(
    'accepts %j',
    (name) => {
      expect(checkQueueName('queue.name', name)).toBe(name);
    },
  );

  it.each([
    ['an empty name', ''],
    ['a colon', 'bull:cohort'],
    ['101 characters', 'x'.repeat(101)],
    ['a newline', 'co\nhort'],
    ['a tab', 'co\thort'],
    ['an escape', 'co\x1bhort'],
    ['a zero-width space', 'co\u200bhort'],
    ['a number', 7],
    ['nothing', undefined],
  ])('refuses %s', (_label, value) => {
    const error = refusal(() => checkQueueName('--queue-name', value));
    expect(error.message).toMatch(
      /^Expected `--queue-name` to be a queue name of 1 to 100 printable characters without `:`, got /,
    );
  });
});

describe.skipIf(redisMissing)(
  redisMissing ? `queue connection (skipped: ${redisMissing})` : 'queue connection',
  () => {
    let rig: RedisRig;
    beforeAll(async () => {
      rig = await startRedis();
    });
    afterAll(() => rig?.stop());

    it.each([
      ['the socket path', () => rig.socket],
      ['a unix:// URL', () => `unix://${rig.socket}`],
    ])('a client made from %s PINGs the real server', async (_label, url) => {
      const client = new Redis(redisOptionsOf(checkQueueUrl('queue.url', url())));
      try {
        expect(await client.ping()).toBe('PONG');
      } finally {
        client.disconnect();
      }
    });
  },
);
