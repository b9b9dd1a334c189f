/**
 * The governor against overload it did not cause and against a dead provider (issue 27): random
 * 529s from a seeded scripted model, overload that depends on load (`maxStreams`), a cold key,
 * a closed port and a refused key. The real `Governor` and the real `Provider`, over HTTP. No
 * assertion reads a duration: the figures are counts the server and the governor keep.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Governor } from '../src/shared/governor/governor.js';
import type { GovernorState } from '../src/shared/governor/types.js';
import { DEFAULT_PROVIDER_CONFIG } from '../src/shared/provider/config.js';
import { Provider } from '../src/shared/provider/provider.js';
import type { ProviderResult } from '../src/shared/provider/types.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { ask, NO_USAGE, never, OK, permitOf, stateOf } from './governor-helpers.js';
import { closedPort } from './helpers.js';

const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()));
});

async function model(options: Parameters<typeof startScriptedModel>[0]): Promise<ScriptedModel> {
  const started = await startScriptedModel({ port: 0, ...options });
  closing.push(() => started.close());
  return started;
}

function provider(baseURL: string): Provider {
  const made = new Provider({
    ...DEFAULT_PROVIDER_CONFIG,
    model: 'cohort-scripted',
    baseURL,
    maxTokens: 256,
    backoffBaseMs: 5,
    backoffMaxMs: 40,
  });
  closing.push(() => made.close());
  return made;
}

/**
 * `count` one-step requests, `concurrency` at a time, each with its own prompt (the scripted
 * model seeds its random roll from the body), through `gate` when given.
 */
async function fanOut(
  target: Provider,
  count: number,
  concurrency: number,
  gate?: Governor,
  signal: AbortSignal = never(),
): Promise<ProviderResult[]> {
  const results: ProviderResult[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const index = next++;
        const request = {
          messages: [{ role: 'user' as const, content: `Say hello, number ${index}.` }],
          tools: [],
        };
        results.push(await target.complete(request, { signal, ...(gate ? { gate } : {}) }));
      }
    }),
  );
  return results;
}

/** Every state the governor published, and whether any of them was paused. */
function watch(governor: Governor): { states: GovernorState[] } {
  const seen = { states: [] as GovernorState[] };
  closing.push(async () => governor.subscribe(() => {})());
  governor.subscribe((state) => seen.states.push(state));
  return seen;
}

describe('random refusals', () => {
  it.each([0.05, 0.2])(
    'at %s the window stays near the demand and the key never pauses',
    async (p) => {
      const server = await model({ overloadProbability: p, seed: 11 });
      const governor = new Governor();
      let paused = false;
      let smallest = Number.POSITIVE_INFINITY;
      let opened = false;
      const sampler = setInterval(() => {
        const state = governor.states()[0];
        if (!state) return;
        if (state.pausedUntil !== undefined) paused = true;
        // The window while the run is at full demand (60 in flight or waiting).
        // The window once the first head opened it, while the run is at full demand.
        opened ||= state.limit >= 60;
        if (opened && state.inFlight + state.queued >= 60) {
          smallest = Math.min(smallest, state.limit);
        }
      }, 2);
      const results = await fanOut(provider(server.url), 600, 60, governor);
      clearInterval(sampler);
      expect(results.every((result) => result.ok)).toBe(true);
      // The server really refused: the rate is the one asked for, give or take chance.
      const { overloaded529, requests } = server.stats;
      expect(overloaded529 / requests).toBeGreaterThan(p / 2);
      expect(stateOf(governor, governor.states()[0]!.key).overloaded).toBe(overloaded529);
      expect(paused).toBe(false);
      // An AIMD that cuts on every refusal settles near sqrt(1/(0.3p)): 8 at 5%, 4 at 20%.
      expect(opened).toBe(true);
      expect(Number.isFinite(smallest)).toBe(true);
      expect(smallest).toBeGreaterThanOrEqual(30);
      expect(governor.held).toBe(0);
    },
  );
});

describe('overload that depends on load', () => {
  it('past a hard capacity the window settles near it, with far fewer 529s than no governor', async () => {
    const run = async (governed: boolean) => {
      const server = await model({ maxStreams: 16, ttftMs: 150 });
      const governor = governed ? new Governor() : undefined;
      // Bounded well inside the test's timeout, so a stall fails with the state that stalled.
      const signal = AbortSignal.timeout(40_000);
      const results = await fanOut(provider(server.url), 300, 64, governor, signal);
      // Without a governor some run out of retries against so many 529s: that is the point.
      const stalled = results.filter((result) => !result.ok);
      if (governed && stalled.length > 0) {
        throw new Error(
          `Expected all 300 governed requests to complete, got ${stalled.length} not ok; server ${JSON.stringify(server.stats)}, governor ${JSON.stringify(governor?.states())}`,
        );
      }
      return { server, governor };
    };
    const governed = await run(true);
    const free = await run(false);
    const state = governed.governor!.states()[0]!;
    expect(state.limit).toBeLessThanOrEqual(32);
    expect(state.limit).toBeGreaterThanOrEqual(4);
    // Fewer by far on a quiet machine (about a third); a busy one answers slower, so more
    // responses are under way at once and both sides meet more of the capacity.
    expect(governed.server.stats.overloaded529).toBeLessThan(free.server.stats.overloaded529 * 0.8);
  });
});

describe('a cold key', () => {
  it.each([
    ['no rate-limit headers', {}],
    ['headers with room to spare', { rpm: 60_000, itpm: 100_000_000 }],
  ])(
    'with %s opens its window on the first response head, not after the first response',
    async (_name, limits) => {
      const server = await model({ ttftMs: 400, ...limits });
      const governor = new Governor();
      let arrived = 0;
      let beforeFirstDone: number | undefined;
      server.on('request', () => arrived++);
      const target = provider(server.url);
      const runs = Array.from({ length: 60 }, (_, index) =>
        target
          .complete(
            { messages: [{ role: 'user', content: `hello ${index}` }], tools: [] },
            { signal: never(), gate: governor },
          )
          .then((result) => {
            beforeFirstDone ??= arrived;
            return result;
          }),
      );
      const results = await Promise.all(runs);
      expect(results.every((result) => result.ok)).toBe(true);
      // The slow start would have let 4 go, then waited a whole response (400 ms) for more.
      expect(beforeFirstDone).toBe(60);
    },
  );
});

describe('the circuit breaker', () => {
  it('opens after connection failures in a row: what is queued fails at once with one message', async () => {
    const port = await closedPort();
    const governor = new Governor({}, { breakerHoldMs: 60_000 });
    const results = await fanOut(provider(`http://127.0.0.1:${port}`), 200, 50, governor);
    expect(results.every((result) => !result.ok && result.error.code === 'connection')).toBe(true);
    const state = governor.states()[0]!;
    expect(state.breaker).toMatchObject({ state: 'open', code: 'connection' });
    expect(state.breaker?.message).toMatch(/unreachable \(5 connection failures in a row/);
    expect(state.breaker?.message).toContain(`127.0.0.1:${port}`);
    // Without the breaker: 200 requests × 5 attempts. With it, a handful went out.
    expect(state.admitted).toBeLessThan(20);
    const messages = new Set(results.map((result) => (result.ok ? '' : result.error.message)));
    const fromBreaker = results.filter(
      (result) => !result.ok && result.error.message === state.breaker?.message,
    );
    expect(fromBreaker.length).toBeGreaterThan(150);
    expect(messages.size).toBeLessThanOrEqual(3);
    expect(governor.held).toBe(0);
    // What the breaker refused says so as data (a batch in another process stops on it); a
    // request whose own attempts failed before it opened does not.
    const flagged = results.filter((result) => !result.ok && result.error.breakerOpen === true);
    expect(flagged).toEqual(fromBreaker);
  });

  it('a refused key opens it at once; an embedded engine probes and closes it when the provider is back', async () => {
    let refuse = true;
    const server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (refuse) {
          response.writeHead(401, { 'content-type': 'application/json' });
          response.end(
            JSON.stringify({
              type: 'error',
              error: { type: 'authentication_error', message: 'invalid x-api-key' },
            }),
          );
          return;
        }
        response.writeHead(529, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ type: 'error', error: { type: 'overloaded_error' } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closing.push(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const governor = new Governor({ patienceMs: 0 }, { breakerHoldMs: 50 });
    const seen = watch(governor);
    const refused = await fanOut(provider(url), 40, 20, governor);
    expect(refused.every((result) => !result.ok && result.error.code === 'auth')).toBe(true);
    // Every one stands behind the open breaker: those it refused, and the few sent, whose own
    // refused key opened it.
    expect(refused.filter((result) => !result.ok && result.error.breakerOpen)).toHaveLength(40);
    const open = governor.states()[0]!;
    expect(open.breaker).toMatchObject({ state: 'open', code: 'auth' });
    expect(open.breaker?.message).toMatch(/API key was refused/);
    // The cold window's 4 went out together; every other request failed on the breaker
    // without being sent.
    expect(open.admitted).toBeLessThanOrEqual(4);
    expect(JSON.stringify(seen.states)).not.toContain('sk-');

    // The key is fixed: after the hold one request probes, and any answer closes the breaker
    // (here a 529: the provider is reachable and knows the key).
    refuse = false;
    await new Promise((resolve) => setTimeout(resolve, 80));
    const probed = await fanOut(provider(url), 1, 1, governor);
    expect(probed[0]).toMatchObject({ ok: false, error: { code: 'overloaded' } });
    expect(governor.states()[0]!.breaker).toBeUndefined();
  });

  it('never opens on 529s, however many: those are pacing, not a dead provider', async () => {
    const server = await model({ overloadProbability: 1, seed: 3 });
    const governor = new Governor({ patienceMs: 300 });
    const results = await fanOut(provider(server.url), 20, 10, governor);
    expect(results.every((result) => !result.ok && result.error.code === 'overloaded')).toBe(true);
    expect(server.stats.overloaded529).toBeGreaterThan(20);
    expect(governor.states()[0]!.breaker).toBeUndefined();
    expect(governor.held).toBe(0);
  });
});

describe('pauses', () => {
  it('a lone 529 without retry-after pauses nothing; one with retry-after pauses the key', async () => {
    const governor = new Governor({ initialConcurrency: 4 });
    const lone = permitOf(await governor.admit(ask(), never()));
    governor.settle(lone, { outcome: 'overloaded', usage: NO_USAGE });
    expect(stateOf(governor).pausedUntil).toBeUndefined();
    expect(stateOf(governor).overloaded).toBe(1);
    const told = permitOf(await governor.admit(ask(), never()));
    governor.settle(told, {
      outcome: 'overloaded',
      usage: NO_USAGE,
      headers: { 'retry-after-ms': '60000' },
    });
    expect(stateOf(governor).pausedUntil).toBeGreaterThan(Date.now() + 30_000);
  });

  it('a round trip refused half or more pauses the key, and the pause doubles while it lasts', async () => {
    const governor = new Governor({ initialConcurrency: 16 });
    const refuseRound = async () => {
      const permits = await Promise.all(
        Array.from({ length: governor.states()[0]?.limit ?? 16 }, () =>
          governor.admit(ask(), never()).then(permitOf),
        ),
      );
      for (const permit of permits)
        governor.settle(permit, { outcome: 'overloaded', usage: NO_USAGE });
      return stateOf(governor).pausedUntil! - Date.now();
    };
    const first = await refuseRound();
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(500);
    // The paused key admits nothing until the pause ends; each successful admission is given
    // back at once so the next round trip can be refused in turn.
    await new Promise((resolve) => setTimeout(resolve, first + 5));
    const second = await refuseRound();
    expect(second).toBeGreaterThan(500);

    // A calm round trip ends the streak: the next refused one pauses 0.5 s again, not 2 s.
    await new Promise((resolve) => setTimeout(resolve, second + 5));
    let calls = 0;
    while (stateOf(governor).refusalRate > 0 && calls++ < 100) {
      governor.settle(permitOf(await governor.admit(ask(), never())), OK);
    }
    expect(stateOf(governor).refusalRate).toBe(0);
    let pausedFor = 0;
    for (let index = 0; index < 8 && pausedFor <= 0; index++) {
      governor.settle(permitOf(await governor.admit(ask(), never())), {
        outcome: 'overloaded',
        usage: NO_USAGE,
      });
      pausedFor = (stateOf(governor).pausedUntil ?? 0) - Date.now();
    }
    expect(pausedFor).toBeGreaterThan(0);
    expect(pausedFor).toBeLessThanOrEqual(500);
  });

  it('a refused request waits in the queue no longer than its patience, even under a long pause', async () => {
    let requests = 0;
    const server = http.createServer((request, response) => {
      requests++;
      request.resume();
      request.on('end', () => {
        response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '30' });
        response.end(JSON.stringify({ type: 'error', error: { type: 'rate_limit_error' } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closing.push(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const governor = new Governor();
    const result = await provider(url).complete(
      { messages: [{ role: 'user', content: 'hi' }], tools: [] },
      { signal: never(), gate: governor, patienceMs: 100 },
    );
    expect(result).toMatchObject({ ok: false, error: { code: 'rate_limited' } });
    expect(result.ok ? '' : result.error.message).toMatch(
      /still refused after .* of paced retries; the limit is set by the agent's patienceMs/,
    );
    // It went out once, and did not wait out the 30 s pause for a second try: it left the queue
    // when its patience was spent, while the key is still paused.
    expect(requests).toBe(1);
    const state = governor.states()[0]!;
    expect(state.pausedUntil).toBeGreaterThan(Date.now() + 20_000);
    expect(state).toMatchObject({ queued: 0, inFlight: 0 });
    expect(governor.held).toBe(0);
  });
});
