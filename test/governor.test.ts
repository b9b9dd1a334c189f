/**
 * The rate-limit governor (src/shared/governor) on its own: the real `Governor` driven with
 * admissions and settle reports, and with the real `Provider` talking to the scripted model over
 * HTTP. The engine-wide behaviour (workers, ports, crashes, whole runs) is in
 * governor-engine.test.ts. No assertion reads a duration; times are compared only to order events
 * against a pause the test itself set.
 */
import { getEventListeners } from 'node:events';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Governor } from '../src/shared/governor/governor.js';
import type { AdmitRequest, GovernorState } from '../src/shared/governor/types.js';
import { DEFAULT_PROVIDER_CONFIG } from '../src/shared/provider/config.js';
import { estimateInputTokens, Provider } from '../src/shared/provider/provider.js';
import type { ProviderRequest, ToolParam } from '../src/shared/provider/types.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { ask, NO_USAGE, never, OK, permitOf, stateOf } from './governor-helpers.js';
import { latch } from './helpers.js';

/**
 * Records when each request is admitted, by name, and settles it `ok` right away: the next
 * queued request can then go, so a whole queue drains through a window of any size.
 */
class Recorder {
  readonly order: string[] = [];
  readonly admittedAt = new Map<string, number>();
  /** Permits held at each admission: never more than the window. */
  readonly heldAt: number[] = [];
  readonly #governor: Governor;

  constructor(governor: Governor) {
    this.#governor = governor;
  }

  admit(name: string, overrides: Partial<AdmitRequest> = {}): Promise<void> {
    return this.#governor.admit(ask(overrides), never()).then((admission) => {
      this.order.push(name);
      this.admittedAt.set(name, Date.now());
      this.heldAt.push(this.#governor.held);
      this.#governor.settle(permitOf(admission), OK);
    });
  }
}

describe('fairness under contention', () => {
  it('admits in order of arrival, a priority request ahead of earlier normal ones, and every one', async () => {
    const governor = new Governor({ initialConcurrency: 1, maxConcurrency: 1 });
    const first = permitOf(await governor.admit(ask(), never()));
    const recorder = new Recorder(governor);
    const pending = ['a', 'b', 'c', 'd', 'e'].map((name) => recorder.admit(name));
    // A retry of an agent already mid-run, queued after all of them.
    pending.push(recorder.admit('retry', { priority: true }));
    expect(stateOf(governor)).toMatchObject({ limit: 1, inFlight: 1, queued: 6 });
    expect(recorder.order).toEqual([]);
    governor.settle(first, OK);
    await Promise.all(pending);
    expect(recorder.order).toEqual(['retry', 'a', 'b', 'c', 'd', 'e']);
    expect(recorder.heldAt.every((held) => held === 1)).toBe(true);
    expect(governor.held).toBe(0);
    expect(stateOf(governor)).toMatchObject({ inFlight: 0, queued: 0, admitted: 7 });
  });

  it('for any mix of arrivals: priority ones first, each kind first come first served, none left', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.boolean(), { minLength: 1, maxLength: 30 }), async (kinds) => {
        const governor = new Governor({ initialConcurrency: 1, maxConcurrency: 1 });
        const first = permitOf(await governor.admit(ask(), never()));
        const recorder = new Recorder(governor);
        const names = kinds.map((priority, index) => `${priority ? 'p' : 'n'}${index}`);
        const pending = names.map((name, index) =>
          recorder.admit(name, { priority: kinds[index] === true }),
        );
        governor.settle(first, OK);
        await Promise.all(pending);
        const expectedOrder = [
          ...names.filter((name) => name.startsWith('p')),
          ...names.filter((name) => name.startsWith('n')),
        ];
        expect(recorder.order).toEqual(expectedOrder);
        expect(governor.held).toBe(0);
      }),
      { numRuns: 40 },
    );
  });
});

describe('the shared pause on retry-after', () => {
  it("holds every queued request of the key until the told instant, and not another key's", async () => {
    const governor = new Governor({ initialConcurrency: 1 });
    const told = permitOf(await governor.admit(ask(), never()));
    const recorder = new Recorder(governor);
    const pending = [recorder.admit('b'), recorder.admit('c')];
    const refusedAt = Date.now();
    governor.settle(told, {
      outcome: 'rate_limited',
      usage: NO_USAGE,
      headers: { 'retry-after': '1', 'retry-after-ms': '300' },
    });
    const paused = stateOf(governor);
    expect(paused.pausedUntil).toBeGreaterThanOrEqual(refusedAt + 300);
    expect(paused).toMatchObject({ inFlight: 0, queued: 2, rateLimited: 1 });
    // A request that arrives during the pause waits too, even one that goes before new agents.
    pending.push(recorder.admit('late retry', { priority: true }));
    // Another key (another account or model) is not paused: it is admitted while they wait.
    const other = await governor.admit(ask({ key: 'another key' }), never());
    expect(other.ok).toBe(true);
    expect(recorder.order).toEqual([]);
    expect(stateOf(governor).queued).toBe(3);
    await Promise.all(pending);
    expect(recorder.order).toEqual(['late retry', 'b', 'c']);
    for (const [name, at] of recorder.admittedAt) {
      expect(at, `${name} admitted before the pause ended`).toBeGreaterThanOrEqual(refusedAt + 300);
    }
    governor.settle(permitOf(other), OK);
    expect(governor.held).toBe(0);
  });
});

describe('a cancel releases what the request held', () => {
  it('a queued request that is cancelled resolves aborted at once, leaves the queue, and leaves no listener', async () => {
    const governor = new Governor({ initialConcurrency: 1 });
    const holder = permitOf(await governor.admit(ask(), never()));
    const controller = new AbortController();
    const cancelled = governor.admit(ask(), controller.signal);
    const behindSignal = new AbortController().signal;
    const behind = governor.admit(ask(), behindSignal);
    expect(stateOf(governor)).toMatchObject({ inFlight: 1, queued: 2 });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);

    controller.abort('user');
    // Resolves with nothing settled: the slot it waited for is still held.
    expect(await cancelled).toEqual({ ok: false, reason: 'aborted' });
    expect(stateOf(governor)).toMatchObject({ inFlight: 1, queued: 1 });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);

    // The slot goes to the request behind it, which holds no listener once admitted.
    governor.settle(holder, OK);
    const next = permitOf(await behind);
    expect(getEventListeners(behindSignal, 'abort')).toHaveLength(0);
    expect(stateOf(governor)).toMatchObject({ inFlight: 1, queued: 0, admitted: 2 });
    governor.settle(next, OK);
    expect(governor.held).toBe(0);
  });

  it('permits of two keys are told apart: settling each gives back its own', async () => {
    const governor = new Governor();
    const mine = permitOf(await governor.admit(ask(), never()));
    const theirs = permitOf(await governor.admit(ask({ key: 'another key' }), never()));
    expect(governor.held).toBe(2);
    expect(stateOf(governor).inFlight).toBe(1);
    expect(stateOf(governor, 'another key').inFlight).toBe(1);
    governor.settle(theirs, OK);
    expect(stateOf(governor)).toMatchObject({ inFlight: 1 });
    expect(stateOf(governor, 'another key')).toMatchObject({ inFlight: 0 });
    governor.settle(mine, OK);
    expect(governor.held).toBe(0);
    expect(stateOf(governor)).toMatchObject({ inFlight: 0 });
  });

  it('a request whose signal is already aborted is refused without queueing or a listener', async () => {
    const governor = new Governor({ initialConcurrency: 1 });
    const controller = new AbortController();
    controller.abort('user');
    expect(await governor.admit(ask(), controller.signal)).toEqual({
      ok: false,
      reason: 'aborted',
    });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect(governor.held).toBe(0);
    expect(stateOf(governor)).toMatchObject({ inFlight: 0, queued: 0, admitted: 0 });
  });
});

describe('adaptive concurrency', () => {
  it('a cut past a hard capacity lands on the responses under way when the provider refused', async () => {
    // A key alone on a provider that gives at most 48 responses at once, with 100 in flight.
    // Refused requests back off before they try again, so a round trip sees fewer refusals
    // than the 52% the excess would suggest; a cut by that share alone (to 78) stays past the
    // capacity, where the next round trip is refused as often and the cut is taken back.
    const governor = new Governor({ initialConcurrency: 100 });
    const admitMany = (count: number) =>
      Promise.all(
        Array.from({ length: count }, () => governor.admit(ask(), never()).then(permitOf)),
      );
    const first = await admitMany(100);
    const streaming = first.slice(0, 48);
    for (const permit of streaming) governor.opened(permit, {});
    // The other 52 were refused at once and back off.
    for (const permit of first.slice(48))
      governor.settle(permit, { outcome: 'overloaded', usage: NO_USAGE });
    // The next round trip: 22 of its 100 attempts refused while the 48 responses go on.
    const retries = await admitMany(52);
    for (const permit of retries.slice(0, 22))
      governor.settle(permit, { outcome: 'overloaded', usage: NO_USAGE });
    const rest = [...retries.slice(22), ...(await admitMany(48))];
    for (const permit of rest) {
      governor.opened(permit, {});
      governor.settle(permit, OK);
    }
    const { limit, refusalRate } = stateOf(governor);
    expect(refusalRate).toBeCloseTo(0.22);
    expect(limit).toBeLessThanOrEqual(48);
    expect(limit).toBeGreaterThanOrEqual(40);
  });

  it('refusals that come whatever is under way cut by the share that got through, not to a capacity', async () => {
    const governor = new Governor({ initialConcurrency: 100 });
    const admitMany = (count: number) =>
      Promise.all(
        Array.from({ length: count }, () => governor.admit(ask(), never()).then(permitOf)),
      );
    for (const permit of await admitMany(100)) {
      governor.opened(permit, {});
      governor.settle(permit, OK);
    }
    // The next round trip: 11 of 100 refused at moments spread over it, while from 4 to 85
    // other responses were under way.
    const round = await admitMany(100);
    const answered: number[] = [];
    round.forEach((permit, index) => {
      if (index % 9 === 4) {
        governor.settle(permit, { outcome: 'overloaded', usage: NO_USAGE });
      } else {
        governor.opened(permit, {});
        answered.push(permit);
      }
    });
    for (const permit of answered) governor.settle(permit, OK);
    const { limit, refusalRate } = stateOf(governor);
    expect(refusalRate).toBeCloseTo(0.11);
    // 100 in flight, 11% refused: the cut keeps 89.
    expect(limit).toBe(89);
  });

  it('a burst of 529s cuts the window once; successes grow it back only while it is full', async () => {
    const governor = new Governor({ initialConcurrency: 8 });
    const permits = await Promise.all(
      Array.from({ length: 8 }, () => governor.admit(ask(), never()).then(permitOf)),
    );
    expect(stateOf(governor)).toMatchObject({ limit: 8, inFlight: 8 });
    for (const permit of permits) {
      governor.settle(permit, {
        outcome: 'overloaded',
        usage: NO_USAGE,
        headers: { 'retry-after': '1', 'retry-after-ms': '1' },
      });
    }
    const cut = stateOf(governor).limit;
    expect(cut).toBeLessThan(8);
    // Eight attempts in flight together report one congestion: cut once, not eight times.
    expect(cut).toBeGreaterThan(1);
    expect(stateOf(governor).overloaded).toBe(8);

    // One request at a time never fills the window: successes then earn nothing.
    for (let index = 0; index < 20; index++) {
      const permit = permitOf(await governor.admit(ask(), never()));
      governor.settle(permit, OK);
    }
    expect(stateOf(governor).limit).toBe(cut);

    // A saturated key: every admission fills the window, and the window grows past where it was.
    const recorder = new Recorder(governor);
    await Promise.all(Array.from({ length: 200 }, (_, index) => recorder.admit(`r${index}`)));
    expect(stateOf(governor).limit).toBeGreaterThan(8);
    expect(governor.held).toBe(0);
  });

  it('never grows past maxConcurrency', async () => {
    const governor = new Governor({ initialConcurrency: 2, maxConcurrency: 3 });
    const recorder = new Recorder(governor);
    await Promise.all(Array.from({ length: 100 }, (_, index) => recorder.admit(`r${index}`)));
    expect(stateOf(governor).limit).toBe(3);
    expect(Math.max(...recorder.heldAt)).toBeLessThanOrEqual(3);
  });
});

describe('the governor with the real Provider against the scripted model', () => {
  const RPM = 600;
  const ITPM = 100_000;
  let model: ScriptedModel;

  beforeAll(async () => {
    model = await startScriptedModel({ port: 0, rpm: RPM, itpm: ITPM });
  });

  afterAll(async () => {
    await model.close();
  });

  function provider(): Provider {
    return new Provider({
      ...DEFAULT_PROVIDER_CONFIG,
      model: 'cohort-scripted',
      baseURL: model.url,
      maxTokens: 256,
      backoffBaseMs: 5,
      backoffMaxMs: 50,
    });
  }

  const hello: ProviderRequest = { messages: [{ role: 'user', content: 'Say hello.' }], tools: [] };

  /** Runs one request through `governor`, and returns the key's state as the server got it. */
  async function stateWhenServed(governor: Governor): Promise<GovernorState | undefined> {
    const served = latch<GovernorState | undefined>();
    // The server is in this process: its handler runs before any response can reach the client.
    const onRequest = () => served.open(governor.states()[0]);
    model.once('request', onRequest);
    const result = await provider().complete(hello, { signal: never(), gate: governor });
    expect(result.ok).toBe(true);
    return served.opened;
  }

  it('learns the limits from the headers when nothing is configured', async () => {
    const governor = new Governor();
    const before = await stateWhenServed(governor);
    expect(before?.requests).toBeUndefined();
    expect(before?.inputTokens).toBeUndefined();
    const after = stateOf(governor, governor.states()[0]?.key);
    expect(after.requests).toMatchObject({ limit: RPM, source: 'learned' });
    expect(after.inputTokens).toMatchObject({ limit: ITPM, source: 'learned' });
    // The model sets no output limit, so none is invented.
    expect(after.outputTokens).toBeUndefined();
    expect(after).toMatchObject({ inFlight: 0, queued: 0, admitted: 1 });
  });

  it('uses configured limits until the first response, then the learned ones', async () => {
    const governor = new Governor({ rpm: 50, itpm: 5000, otpm: 700 });
    const before = await stateWhenServed(governor);
    expect(before?.requests).toMatchObject({ limit: 50, source: 'configured' });
    expect(before?.inputTokens).toMatchObject({ limit: 5000, source: 'configured' });
    expect(before?.inFlight).toBe(1);
    const after = stateOf(governor, governor.states()[0]?.key);
    expect(after.requests).toMatchObject({ limit: RPM, source: 'learned' });
    expect(after.inputTokens).toMatchObject({ limit: ITPM, source: 'learned' });
    // The server reports no output limit: the configured one stays.
    expect(after.outputTokens).toMatchObject({ limit: 700, source: 'configured' });
  });

  it("the input estimate is within a factor of 1.5 of the server's usage.input_tokens", async () => {
    const tools: ToolParam[] = [
      {
        name: 'read_file',
        description: 'Reads a file of the workspace and returns its text.',
        input_schema: {
          type: 'object',
          properties: { path: { type: 'string', description: 'Path inside the workspace.' } },
          required: ['path'],
        },
      },
      {
        name: 'search',
        description: 'Searches the workspace for a pattern and lists the matching lines.',
        input_schema: {
          type: 'object',
          properties: { pattern: { type: 'string' }, limit: { type: 'number' } },
          required: ['pattern'],
        },
      },
    ];
    const prose = 'Read the notes in the workspace and write a short digest of each of them. ';
    const shapes: Record<string, ProviderRequest> = {
      prompt: { messages: [{ role: 'user', content: prose.repeat(3) }], tools: [] },
      'long prompt': { messages: [{ role: 'user', content: prose.repeat(200) }], tools: [] },
      'system and tools': {
        system: 'You are a careful assistant that answers in short sentences. '.repeat(4),
        messages: [{ role: 'user', content: prose.repeat(2) }],
        tools,
      },
      'tool transcript': {
        messages: [
          { role: 'user', content: prose },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'Reading the first file.' },
              { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'a.md' } },
            ],
          },
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 'toolu_1',
                content: 'line of notes\n'.repeat(40),
              },
            ],
          },
        ],
        tools,
      },
    };
    for (const [shape, request] of Object.entries(shapes)) {
      const result = await provider().complete(request, { signal: never() });
      if (!result.ok)
        throw new Error(`Expected ${shape} to be answered, got ${result.error.message}`);
      const served = result.turn.usage.inputTokens;
      const ratio = estimateInputTokens(request) / served;
      expect(
        ratio,
        `${shape}: estimated ${estimateInputTokens(request)}, served ${served}`,
      ).toBeGreaterThan(1 / 1.5);
      expect(
        ratio,
        `${shape}: estimated ${estimateInputTokens(request)}, served ${served}`,
      ).toBeLessThan(1.5);
    }
  });
});
