import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisBuckets } from '../src/main/runners/queue/redis-buckets.js';
import { Governor } from '../src/shared/governor/governor.js';
import type { AdmitRequest } from '../src/shared/governor/types.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// The fleet's shared rate-limit buckets, on a real redis-server: what a lease grants, and that
// several governors leasing from one bucket together stay within its rate.

const request = (key: string): AdmitRequest => ({
  key,
  label: key,
  inputTokens: 10,
  maxTokens: 10,
  priority: false,
});

describe.skipIf(redisMissing)(
  redisMissing ? `shared limits (skipped: ${redisMissing})` : 'shared limits',
  () => {
    let rig: RedisRig;
    beforeAll(async () => {
      rig = await startRedis();
    });
    afterAll(() => rig?.stop());

    it('a fresh bucket grants a second of its rate, then nothing, with the wait until more', async () => {
      const client = rig.client();
      try {
        const store = new RedisBuckets(client, 'fresh');
        // 600 a minute: 10 a second, and a fresh bucket holds one second's worth.
        const first = await store.lease('k', 'requests', 600, 25);
        expect(first.granted).toBe(10);
        expect(first.waitMs).toBeGreaterThan(0);
        const second = await store.lease('k', 'requests', 600, 5);
        expect(second.granted).toBeLessThanOrEqual(1);
        // Another bucket of the same key, and the same bucket of another key, are apart.
        expect((await store.lease('k', 'input', 600, 5)).granted).toBe(5);
        expect((await store.lease('other', 'requests', 600, 5)).granted).toBe(5);
        const ttl = await client.pttl(store.keyOf('k', 'requests'));
        expect(ttl).toBeGreaterThan(0);
      } finally {
        client.disconnect();
      }
    });

    it('two clients share one bucket: together they are granted no more than its rate allows', async () => {
      const [a, b] = [rig.client(), rig.client()];
      try {
        const stores = [new RedisBuckets(a, 'pair'), new RedisBuckets(b, 'pair')];
        const started = Date.now();
        let granted = 0;
        for (let round = 0; round < 40; round++) {
          const grants = await Promise.all(
            stores.map((store) => store.lease('acct', 'requests', 1200, 3)),
          );
          granted += grants.reduce((sum, grant) => sum + grant.granted, 0);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const elapsed = Date.now() - started;
        // 1200 a minute is 20 a second: a second's worth to start, then the refill; + 1 for
        // rounding at the edges.
        expect(granted).toBeLessThanOrEqual(20 + (elapsed * 1200) / 60_000 + 1);
        expect(granted).toBeGreaterThan(20);
      } finally {
        a.disconnect();
        b.disconnect();
      }
    });

    it('three governors leasing from Redis admit, together, what one account allows', async () => {
      const clients = [rig.client(), rig.client(), rig.client()];
      const governors = clients.map(
        (client) =>
          new Governor(
            { rpm: 600, initialConcurrency: 1000 },
            {
              store: new RedisBuckets(client, 'gov'),
            },
          ),
      );
      const controller = new AbortController();
      try {
        const started = Date.now();
        let admitted = 0;
        // Each governor has 30 requests to send: 90 in all, against 10 a second shared.
        const all = governors.flatMap((governor) =>
          Array.from({ length: 30 }, async () => {
            const admission = await governor.admit(request('acct'), controller.signal);
            if (!admission.ok) return;
            admitted++;
            governor.settle(admission.permit, {
              outcome: 'ok',
              usage: { inputTokens: 10, outputTokens: 10 },
            });
          }),
        );
        // Stop after a bit more than one second: a second's burst plus about a second of refill.
        await new Promise((resolve) => setTimeout(resolve, 1200));
        const elapsed = Date.now() - started;
        controller.abort();
        await Promise.all(all);
        // Alone, each governor's own bucket (600 a minute, a second's burst) would let 10 go at
        // once and 10 a second after: three of them, 30 and more. Shared, they stay within one.
        expect(admitted).toBeLessThanOrEqual(10 + (elapsed * 600) / 60_000 + 1);
        expect(admitted).toBeGreaterThanOrEqual(10);
      } finally {
        controller.abort();
        for (const client of clients) client.disconnect();
      }
    });

    it('with Redis away, nothing is granted and a wait is named, rather than an error', async () => {
      const client = rig.client();
      client.disconnect();
      const store = new RedisBuckets(client, 'away');
      const grant = await store.lease('k', 'requests', 600, 5);
      expect(grant).toEqual({ granted: 0, waitMs: expect.any(Number) });
      expect(grant.waitMs).toBeGreaterThan(0);
    });
  },
);
