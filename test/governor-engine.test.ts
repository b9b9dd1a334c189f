/**
 * The rate-limit governor through the whole engine: the real `Engine`, its real worker pool (each
 * provider request asks main's governor over the child's port), the official SDK and the scripted
 * model with its rate limits, spend cap and faults over HTTP. The governor on its own is in
 * governor.test.ts. Nothing here asserts a duration: waits are on events and on governor states.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EngineOptions } from '../src/main/engine.js';
import type { GovernorState } from '../src/shared/governor/types.js';
import type { AgentResult } from '../src/shared/result.js';
import type { ScriptedModelOptions, ScriptedModelStats } from '../src/testing/index.js';
import { eventLog, type Rig, scripted, startRig } from './helpers.js';

let rig: Rig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** One thread unless a test says: the governor is main's, and every thread costs a start-up. */
async function open(options: EngineOptions, modelOptions: ScriptedModelOptions = {}): Promise<Rig> {
  rig = await startRig({ threads: 1, ...options }, modelOptions);
  return rig;
}

/** The states of every key the engine's governor knows; it must have one. */
function statesOf(current: Rig): GovernorState[] {
  const governor = current.engine.governor;
  if (!governor) throw new Error('Expected the engine to have a governor, got none');
  return governor.states();
}

function onlyState(current: Rig): GovernorState {
  const states = statesOf(current);
  if (states.length !== 1) throw new Error(`Expected one governor key, got ${states.length}`);
  return states[0] as GovernorState;
}

/** Every key has given back everything: nothing held, in flight or queued. */
function expectAllReturned(current: Rig): void {
  expect(current.engine.governor?.held).toBe(0);
  for (const state of statesOf(current)) {
    expect(state, state.label).toMatchObject({ inFlight: 0, queued: 0 });
  }
}

/** Resolves after the scripted model has checked `count` more requests, counting from now. */
function requestsSeen(current: Rig, count: number): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const onRequest = () => {
      if (++seen < count) return;
      current.model.off('request', onRequest);
      resolve();
    };
    current.model.on('request', onRequest);
  });
}

const waitForState = (check: () => void) => vi.waitFor(check, { timeout: 10_000, interval: 10 });

describe('the shared pause, end to end: an rpm limit that binds', () => {
  const AGENTS = 40;
  // A bucket of one second: 20 requests at once, then 20 a second. 80 requests take ~3 s.
  const LIMITS: ScriptedModelOptions = { rpm: 1200, bucketSeconds: 1 };

  async function runAll(options: EngineOptions): Promise<{
    results: AgentResult[];
    stats: ScriptedModelStats;
    states: GovernorState[] | undefined;
  }> {
    const current = await open({ ...options, provider: { maxRetries: 2 } }, LIMITS);
    const results = await Promise.all(
      Array.from({ length: AGENTS }, (_, index) =>
        current.engine.run({
          title: `agent ${index}`,
          prompt: scripted([{ calls: [{ name: 'echo', input: {} }] }, { reply: `done ${index}` }]),
        }),
      ),
    );
    const states = current.engine.governor?.states();
    const stats = current.model.stats;
    await current.close();
    rig = undefined;
    return { results, stats, states };
  }

  it('every agent completes, with far fewer 429s than the same run without the governor', async () => {
    const governed = await runAll({});
    const ungoverned = await runAll({ governor: { enabled: false } });

    const failed = (results: AgentResult[]) => results.filter((r) => r.outcome !== 'complete');
    expect(failed(governed.results)).toEqual([]);
    expect(governed.results.map((result) => result.text)).toEqual(
      Array.from({ length: AGENTS }, (_, index) => `done ${index}`),
    );
    // Without the governor every agent retries on its own, and the burst is refused again and
    // again: agents fail, or at least the server refuses many times more often.
    expect(ungoverned.stats.rateLimited429).toBeGreaterThan(AGENTS / 2);
    expect(governed.stats.rateLimited429 * 4).toBeLessThan(ungoverned.stats.rateLimited429);
    expect(failed(ungoverned.results).length).toBeGreaterThan(0);
    // It learned the server's limit from the headers.
    expect(governed.states?.[0]?.requests).toMatchObject({ limit: 1200, source: 'learned' });
    expect(governed.states?.[0]).toMatchObject({ inFlight: 0, queued: 0 });
  });
});

describe('a cancel releases what the request held, through the engine', () => {
  it('agents cancelled while their requests are in flight or queued leave nothing held', async () => {
    // The server sends headers at once, then holds the first token for a minute.
    const current = await open(
      { governor: { initialConcurrency: 2, maxConcurrency: 2 } },
      { ttftMs: 60_000 },
    );
    const inFlight = requestsSeen(current, 2);
    const controllers = Array.from({ length: 5 }, () => new AbortController());
    const results = controllers.map((controller, index) =>
      current.engine.run({
        title: `hung ${index}`,
        prompt: scripted([{ reply: `never ${index}` }]),
        signal: controller.signal,
      }),
    );
    await inFlight;
    await waitForState(() => expect(onlyState(current)).toMatchObject({ inFlight: 2, queued: 3 }));
    expect(current.engine.governor?.held).toBe(2);

    for (const controller of controllers) controller.abort('user');
    for (const result of await Promise.all(results)) {
      expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
    }
    expectAllReturned(current);
    // Only the two admitted ever reached the server.
    expect(current.model.stats.requests).toBe(2);
  });
});

describe('a worker crash returns its holdings', () => {
  it('the permit of a request in flight and the place of a queued one come back when the worker dies', async () => {
    // One thread: every agent below shares the worker that dies. A configured rpm of 1 lets one
    // request of the model out and queues the next; the culprit uses another model, another key.
    const current = await open({ threads: 1, maxCrashes: 1, governor: { rpm: 1 } });
    const log = eventLog();
    const hung = requestsSeen(current, 1);
    const waiters = ['first', 'second'].map((title) => {
      const controller = new AbortController();
      const result = current.engine.run({
        title,
        prompt: scripted([{ reply: `${title} done`, delayMs: 60_000 }]),
        signal: controller.signal,
        onEvent: log.onEvent,
      });
      return { controller, result };
    });
    await hung;
    await waitForState(() => expect(onlyState(current)).toMatchObject({ inFlight: 1, queued: 1 }));

    const culprit = await current.engine.run({
      title: 'culprit',
      model: 'another-model',
      prompt: scripted([{ calls: [{ name: 'exit', input: {} }] }]),
    });
    expect(culprit).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });

    // Both waiters were not blamed: they resume on a fresh worker and ask again. What the dead
    // worker held is gone: no permit in flight, and only the two fresh requests queued.
    await waitForState(() => expect(log.resumed()).toHaveLength(2));
    const key = () => statesOf(current).find((state) => !state.label.startsWith('another-model'));
    await waitForState(() => expect(key()?.queued).toBe(2));
    expect(key()?.inFlight).toBe(0);
    expect(current.engine.governor?.held).toBe(0);

    for (const waiter of waiters) waiter.controller.abort('user');
    for (const waiter of waiters) {
      expect(await waiter.result).toMatchObject({ outcome: 'cancelled' });
    }
    expectAllReturned(current);
  });
});

describe('paced retries', () => {
  const fourRefusals = scripted([
    { reply: 'made it', error: { status: 429, retryAfterMs: 1 }, faultAttempts: 4 },
  ]);

  it("429s the governor paces do not use up an agent's retries", async () => {
    const current = await open({ provider: { maxRetries: 1 } });
    const result = await current.engine.run({ title: 'paced', prompt: fourRefusals });
    expect(result).toMatchObject({ outcome: 'complete', text: 'made it' });
    expect(result.usage.providerCalls).toBe(5);
    expect(onlyState(current)).toMatchObject({ rateLimited: 4, admitted: 5 });
    expect(current.model.stats.rateLimited429).toBe(4);
  });

  it('without the governor the same 429s fail the agent once its retries are spent', async () => {
    const current = await open({ provider: { maxRetries: 1 }, governor: { enabled: false } });
    const result = await current.engine.run({ title: 'unpaced', prompt: fourRefusals });
    expect(result).toMatchObject({ outcome: 'failed', code: 'rate_limited' });
    expect(current.model.stats.rateLimited429).toBe(2);
  });

  it('a 529 that never ends fails overloaded once governor.patienceMs has passed', async () => {
    const current = await open({ governor: { patienceMs: 200 } });
    const result = await current.engine.run({
      title: 'patient',
      prompt: scripted([{ reply: 'never', error: { status: 529, retryAfterMs: 1 } }]),
    });
    expect(result).toMatchObject({ outcome: 'failed', code: 'overloaded' });
    expect(result.reason).toContain('governor.patienceMs');
    // More attempts than maxRetries allows: they were paced, and patience ended them.
    expect(current.model.stats.overloaded529).toBeGreaterThan(3);
    expectAllReturned(current);
  });
});

describe('the spend limit', () => {
  it('shuts the key: agents fail quota_exhausted, saying why, and no further request goes out', async () => {
    const current = await open(
      { governor: { initialConcurrency: 1, maxConcurrency: 1 } },
      { spendCapTokens: 1 },
    );
    // Answered in full below the cap; its usage carries the key past it.
    const first = await current.engine.run({ title: 'first', prompt: scripted([{ reply: 'ok' }]) });
    expect(first.outcome).toBe('complete');

    const before = current.model.stats.requests;
    const batch = await Promise.all(
      Array.from({ length: 6 }, (_, index) =>
        current.engine.run({ title: `late ${index}`, prompt: scripted([{ reply: 'no' }]) }),
      ),
    );
    for (const result of batch) {
      expect(result).toMatchObject({ outcome: 'failed', code: 'quota_exhausted' });
      expect(result.reason).toMatch(/the spend limit is reached/);
    }
    // One request learned the limit; the queued ones failed in the governor without going out.
    expect(current.model.stats.requests - before).toBe(1);
    expect(onlyState(current).exhausted).toMatch(/the spend limit is reached/);

    // While the key is shut, a new agent fails at once too, and the server hears nothing.
    const later = await current.engine.run({ title: 'later', prompt: scripted([{ reply: 'no' }]) });
    expect(later).toMatchObject({ outcome: 'failed', code: 'quota_exhausted' });
    expect(current.model.stats.requests - before).toBe(1);
    expectAllReturned(current);
  });
});
