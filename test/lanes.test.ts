import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EngineWarning } from '../src/index.js';
import { BatchCollector } from '../src/main/lanes/batch-collector.js';
import { batchPrice, customIdOf } from '../src/shared/lane/lane.js';
import { DEFAULT_PROVIDER_CONFIG } from '../src/shared/provider/config.js';
import type { ProviderResult } from '../src/shared/provider/types.js';
import { type ScriptStep, startScriptedModel } from '../src/testing/index.js';
import { agentCall, type Rig, scripted, startRig, usageError } from './helpers.js';

// The batches lane against the scripted model's Message Batches API over real HTTP, with real
// worker threads: every step through batches, none through /v1/messages.

const echo = (value: string): ScriptStep => ({ calls: [{ name: 'echo', input: { value } }] });
const threeSteps = (index: number) =>
  scripted([echo(`a${index}`), echo(`b${index}`), { reply: `done ${index}` }], `Task ${index}.`);

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

describe('the batches lane', () => {
  it('runs 60 agents of 3 steps through at most 9 batches, none through /v1/messages, at half the cost', async () => {
    const warnings: EngineWarning[] = [];
    rig = await startRig(
      {
        lane: 'batches',
        batchWindowMs: 60_000,
        batchPollMs: 10,
        onWarning: (w) => warnings.push(w),
      },
      { batchLatencyMs: 20 },
    );
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, index) => rig!.engine.run({ prompt: threeSteps(index) })),
    );
    const stats = rig.model.stats;
    expect(results.map((result) => result.outcome)).toEqual(Array(60).fill('complete'));
    expect(results.map((result) => result.text)).toEqual(
      Array.from({ length: 60 }, (_, index) => `done ${index}`),
    );
    expect(results.every((result) => result.lane === 'batches')).toBe(true);
    expect(results.every((result) => result.usage.steps === 3)).toBe(true);
    expect(stats.messages).toBe(0);
    expect(stats.batchRequests).toBe(180);
    expect(stats.batchesCreated).toBeLessThanOrEqual(9);
    expect(rig.engine.batchesCreated).toBe(stats.batchesCreated);
    expect(warnings).toEqual([]);
    const batchCost = results.reduce((sum, result) => sum + (result.usage.costUsd ?? 0), 0);
    await rig.close();

    // The same run in real time: the same tokens, twice the dollars.
    rig = await startRig({}, {});
    const realtime = await Promise.all(
      Array.from({ length: 60 }, (_, index) => rig!.engine.run({ prompt: threeSteps(index) })),
    );
    expect(rig.model.stats.messages).toBe(180);
    const realCost = realtime.reduce((sum, result) => sum + (result.usage.costUsd ?? 0), 0);
    const tokens = (list: typeof results) =>
      list.reduce((sum, result) => sum + result.usage.inputTokens + result.usage.outputTokens, 0);
    expect(tokens(results)).toBe(tokens(realtime));
    expect(batchCost * 2).toBeCloseTo(realCost, 9);
    expect(realtime.every((result) => result.lane === undefined)).toBe(true);
  });

  it('counts a usd budget at batch prices: one the realtime price reaches, the batches lane does not', async () => {
    // The realtime cost of the task, measured: the budget sits between it and its half.
    rig = await startRig({}, {});
    const measured = await rig.engine.run({ prompt: threeSteps(1) });
    const realCost = measured.usage.costUsd ?? 0;
    expect(realCost).toBeGreaterThan(0);
    const budget = { usd: realCost * 0.55 };
    const realtime = await rig.engine.run({ prompt: threeSteps(1), budget });
    expect(realtime).toMatchObject({ outcome: 'complete', budgetExceeded: 'usd' });
    await rig.close();

    rig = await startRig({ lane: 'batches', batchPollMs: 10 }, { batchLatencyMs: 5 });
    const batched = await rig.engine.run({ prompt: threeSteps(1), budget });
    expect(batched).toMatchObject({ outcome: 'complete', text: 'done 1', lane: 'batches' });
    expect(batched.budgetExceeded).toBeUndefined();
    expect(batched.usage.steps).toBe(3);
    expect(batched.usage.costUsd).toBeCloseTo(realCost / 2, 9);
    expect(rig.model.stats).toMatchObject({ messages: 0, batchRequests: 3 });
  });

  it('sends an errored step again in the next batch, counted against the retries', async () => {
    rig = await startRig({ lane: 'batches', batchPollMs: 10 }, { batchLatencyMs: 5 });
    const flaky: ScriptStep = {
      error: { status: 500, type: 'api_error', message: 'flaky' },
      faultAttempts: 1,
      reply: 'after a retry',
    };
    const result = await rig.engine.run({ prompt: scripted([flaky]) });
    expect(result).toMatchObject({ outcome: 'complete', text: 'after a retry', lane: 'batches' });
    expect(result.usage.providerCalls).toBe(2);
    expect(rig.model.stats).toMatchObject({ messages: 0, batchesCreated: 2, batchRequests: 2 });

    // One that never succeeds fails as a provider error would, after maxRetries (2) more batches.
    const broken: ScriptStep = { error: { status: 500, type: 'api_error', message: 'down' } };
    const failed = await rig.engine.run({ prompt: scripted([broken]) });
    expect(failed).toMatchObject({ outcome: 'failed', code: 'server_error' });
    expect(failed.usage.providerCalls).toBe(3);
    expect(failed.reason).toContain('down');
  });

  it('fails a step whose batch expired with batch_expired', async () => {
    rig = await startRig(
      { lane: 'batches', batchPollMs: 10 },
      { batchLatencyMs: 5, batchExpireProbability: 1 },
    );
    const result = await rig.engine.run({ prompt: scripted([{ reply: 'never' }]) });
    expect(result).toMatchObject({ outcome: 'failed', code: 'batch_expired' });
    expect(result.reason).toMatch(/expired before it processed this step/);
  });

  it('fails a step whose batch someone else cancelled with batch_canceled', async () => {
    rig = await startRig({ lane: 'batches', batchPollMs: 10 }, { batchLatencyMs: 600_000 });
    const client = new Anthropic({ apiKey: 'lane-key', baseURL: rig.model.url });
    const running = rig.engine.run({
      prompt: scripted([{ reply: 'never' }]),
      provider: { apiKey: 'lane-key' },
    });
    const batch = await vi.waitFor(async () => {
      const page = await client.messages.batches.list();
      expect(page.data).toHaveLength(1);
      return page.data[0]!;
    });
    await client.messages.batches.cancel(batch.id);
    const result = await running;
    expect(result).toMatchObject({ outcome: 'failed', code: 'batch_canceled' });
  });

  it('cancels an open batch when its last agent is cancelled, and at close', async () => {
    rig = await startRig({ lane: 'batches', batchPollMs: 10 }, { batchLatencyMs: 600_000 });
    const client = new Anthropic({ apiKey: 'cancel-key', baseURL: rig.model.url });
    const controller = new AbortController();
    const handle = rig.engine.spawn({
      prompt: scripted([{ reply: 'never' }]),
      provider: { apiKey: 'cancel-key' },
      signal: controller.signal,
    });
    const first = await vi.waitFor(async () => {
      const page = await client.messages.batches.list();
      expect(page.data).toHaveLength(1);
      return page.data[0]!;
    });
    controller.abort();
    expect(await handle.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'user' });
    await vi.waitFor(async () => {
      const batch = await client.messages.batches.retrieve(first.id);
      expect(batch.processing_status).not.toBe('in_progress');
    });

    // The engine closing cancels what is open.
    const second = rig.engine.spawn({
      prompt: scripted([{ reply: 'never' }]),
      provider: { apiKey: 'cancel-key' },
    });
    const open = await vi.waitFor(async () => {
      const page = await client.messages.batches.list();
      expect(page.data).toHaveLength(2);
      return page.data[0]!;
    });
    await rig.engine.close();
    expect(await second.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'shutdown' });
    const closed = await client.messages.batches.retrieve(open.id);
    expect(closed.processing_status).not.toBe('in_progress');
    expect(rig.model.stats.messages).toBe(0);
  });

  it('ignores and reports a results line for an unknown custom id, and retries a step whose line was cut', async () => {
    // Its first batch's file names a stranger and ends mid-line; its second answers every request.
    const odd = await oddBatchServer({
      results: (index, lines) => {
        if (index > 0) return `${lines.join('\n')}\n`;
        lines.splice(1, 0, JSON.stringify({ custom_id: 'stranger', result: { type: 'expired' } }));
        const last = lines.pop()!;
        return [...lines, last.slice(0, 30)].join('\n');
      },
    });
    try {
      const warnings: EngineWarning[] = [];
      rig = await startRig(
        {
          lane: 'batches',
          batchPollMs: 10,
          onWarning: (warning) => warnings.push(warning),
          provider: { baseURL: odd.url },
        },
        {},
      );
      const results = await Promise.all(
        ['one', 'two', 'three'].map((title) =>
          rig!.engine.run({ prompt: `Task ${title}.`, title }),
        ),
      );
      expect(results.map((result) => result.outcome)).toEqual(['complete', 'complete', 'complete']);
      // The first batch held all three; the one whose line was cut went again, alone.
      const { created } = odd;
      expect(created.map((ids) => ids.length)).toEqual([3, 1]);
      expect(created[1]![0]).toBe(created[0]![2]);
      expect(results.find((result) => result.usage.providerCalls === 2)).toBeDefined();
      expect(warnings.map((warning) => warning.code)).toEqual(['batches', 'batches']);
      expect(warnings[0]!.message).toMatch(
        /names a custom_id no step of it has \("stranger"\); ignored/,
      );
      expect(warnings[1]!.message).toMatch(
        /is not whole JSON \(cut mid-line\?\).*its step is retried/,
      );
    } finally {
      await odd.close();
    }
  });

  it('retries a step whose results line cannot be read, and still reads the lines after it', async () => {
    // The first batch's second line is a message with a null content block: the turn cannot be
    // made of it. Its step goes into the next batch; the third line still answers its own.
    const odd = await oddBatchServer({
      results: (index, lines) => {
        if (index === 0) {
          const { custom_id } = JSON.parse(lines[1]!) as { custom_id: string };
          lines[1] = JSON.stringify({
            custom_id,
            result: { type: 'succeeded', message: { content: [null], usage: {} } },
          });
        }
        return `${lines.join('\n')}\n`;
      },
    });
    try {
      rig = await startRig(
        { lane: 'batches', batchPollMs: 10, provider: { baseURL: odd.url } },
        {},
      );
      const results = await Promise.all(
        ['one', 'two', 'three'].map((title) =>
          rig!.engine.run({ prompt: `Task ${title}.`, title }),
        ),
      );
      expect(results.map((result) => result.outcome)).toEqual(['complete', 'complete', 'complete']);
      expect(odd.created.map((ids) => ids.length)).toEqual([3, 1]);
      expect(odd.created[1]![0]).toBe(odd.created[0]![1]);
    } finally {
      await odd.close();
    }
  });

  it('follows a journaled batch only for the same request on the same server', async () => {
    const model = await startScriptedModel({ port: 0, batchLatencyMs: 5 });
    try {
      const client = new Anthropic({ apiKey: 'follow-key', baseURL: model.url });
      // A batch made for another transcript of the same task step: its answer is not this one's.
      const customId = customIdOf('task-1', 1);
      const other = await client.messages.batches.create({
        requests: [
          {
            custom_id: customId,
            params: {
              model: 'cohort-scripted',
              max_tokens: 100,
              messages: [{ role: 'user', content: scripted([{ reply: 'not mine' }]) }],
            },
          },
        ],
      });
      const endpoint = model.url.replace(/\/$/, '');
      for (const journaled of [
        { batchId: other.id, endpoint, digest: 'another-request' },
        { batchId: other.id, endpoint: 'http://127.0.0.1:1', digest: 'another-request' },
      ]) {
        rig = await startRig({
          lane: 'batches',
          batchPollMs: 10,
          batchesInFlight: new Map([[customId, journaled]]),
          provider: { baseURL: model.url },
        });
        const result = await rig.engine.run({
          prompt: scripted([{ reply: 'mine' }]),
          key: 'task-1',
          provider: { apiKey: 'follow-key' },
        });
        expect(result).toMatchObject({ outcome: 'complete', text: 'mine' });
        expect(rig.engine.batchesCreated).toBe(1);
        await rig.close();
        rig = undefined;
      }
    } finally {
      await model.close();
    }
  });

  it('polls a batch again past failed polls, and fails and cancels it only on a final answer', async () => {
    // Five 503s in a row, past maxRetries (2): the batch runs on, so it is polled until it ends.
    const flaky = await oddBatchServer({ polls: [...Array(5).fill({ status: 503 }), null] });
    try {
      rig = await startRig({ lane: 'batches', batchPollMs: 5, provider: { baseURL: flaky.url } });
      const result = await rig.engine.run({ prompt: 'Task.' });
      expect(result.outcome).toBe('complete');
      expect(flaky.cancelled).toEqual([]);
      await rig.close();
      rig = undefined;
    } finally {
      await flaky.close();
    }
    // A 404 will not change: its steps fail, and the batch is cancelled so it is not paid for.
    const gone = await oddBatchServer({ polls: [{ status: 404, type: 'not_found_error' }] });
    try {
      rig = await startRig({ lane: 'batches', batchPollMs: 5, provider: { baseURL: gone.url } });
      const result = await rig.engine.run({ prompt: 'Task.' });
      expect(result).toMatchObject({ outcome: 'failed', code: 'bad_request' });
      await vi.waitFor(() => expect(gone.cancelled).toEqual(['b1']));
    } finally {
      await gone.close();
    }
  });

  it('maps a refused create as a streamed request: a spend limit stops, a 529 is retried', async () => {
    const odd = await oddBatchServer({
      creates: [
        { status: 529, type: 'overloaded_error' },
        { status: 402, type: 'billing_error', details: { error_code: 'spend_limit_reached' } },
      ],
    });
    try {
      rig = await startRig({ lane: 'batches', batchPollMs: 5, provider: { baseURL: odd.url } });
      const result = await rig.engine.run({ prompt: 'Task.' });
      expect(result).toMatchObject({ outcome: 'failed', code: 'quota_exhausted' });
      expect(result.reason).toMatch(/spend limit is reached/);
      expect(odd.created).toEqual([]);
    } finally {
      await odd.close();
    }
  });

  it('fails a step whose base URL does not parse, and the engine goes on', async () => {
    const saved = process.env.ANTHROPIC_BASE_URL;
    process.env.ANTHROPIC_BASE_URL = 'http://[not-a-host';
    try {
      // The engine names no server: the environment's is the one every spawn goes to.
      rig = await startRig({
        lane: 'batches',
        batchPollMs: 5,
        provider: { baseURL: undefined } as never,
      });
      const result = await rig.engine.run({ prompt: 'Task.' });
      expect(result).toMatchObject({ outcome: 'failed', code: 'bad_request' });
      expect(result.reason).toMatch(/is not a URL/);
      const next = await rig.engine.run({
        prompt: scripted([{ reply: 'fine' }]),
        provider: { baseURL: rig.model.url },
      });
      expect(next.text).toBe('fine');
    } finally {
      if (saved === undefined) delete process.env.ANTHROPIC_BASE_URL;
      else process.env.ANTHROPIC_BASE_URL = saved;
    }
  });

  it('sends the key only to its own origin, and never says a results URL query', async () => {
    const warnings: EngineWarning[] = [];
    const odd = await oddBatchServer({ resultsHost: 'localhost', resultFailures: 1 });
    try {
      rig = await startRig({
        lane: 'batches',
        batchPollMs: 5,
        onWarning: (warning) => warnings.push(warning),
        provider: { baseURL: odd.url },
      });
      const result = await rig.engine.run({
        prompt: 'Task.',
        provider: { apiKey: 'sk-ant-api03-lane-secret' },
      });
      expect(result.outcome).toBe('complete');
      // The results were on another origin: asked for twice (one 500), never with the key.
      expect(odd.resultsAuth).toEqual([undefined, undefined]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.message).toMatch(/could not be read whole/);
      expect(warnings[0]!.message).not.toContain('secret-signature');
    } finally {
      await odd.close();
    }
  });

  it('at close, lets a create under way answer, and cancels the batch it made', async () => {
    let release!: () => void;
    const holdCreates = new Promise<void>((resolve) => {
      release = resolve;
    });
    let came!: () => void;
    const createCame = new Promise<void>((resolve) => {
      came = resolve;
    });
    const odd = await oddBatchServer({ polls: [null], holdCreates, onCreate: () => came() });
    const collector = new BatchCollector({ windowMs: 60_000, pollMs: 5, warn: () => {} });
    try {
      const answers: ProviderResult[] = [];
      const leave = collector.join();
      collector.submit({
        agentId: 'ag_closing',
        name: 'ag_closing',
        step: 1,
        params: { model: 'cohort-scripted', max_tokens: 10, messages: [] } as never,
        provider: { ...DEFAULT_PROVIDER_CONFIG, baseURL: odd.url },
        apiKey: undefined,
        answer: (result) => answers.push(result),
      });
      await createCame;
      // The collector closes while the server is still making the batch; then it answers.
      const closing = collector.close();
      release();
      await closing;
      leave();
      expect(odd.created).toHaveLength(1);
      expect(odd.cancelled).toEqual(['b1']);
      expect(answers).toMatchObject([{ ok: false, error: { code: 'aborted' } }]);
    } finally {
      release();
      await odd.close();
    }
  });

  it('counts a withdrawn step out at once, and sends a batch when every member waits', async () => {
    const odd = await oddBatchServer({});
    const collector = new BatchCollector({ windowMs: 600_000, pollMs: 5, warn: () => {} });
    try {
      const answered: string[] = [];
      const step = (agentId: string) => ({
        agentId,
        name: agentId,
        step: 1,
        params: { model: 'cohort-scripted', max_tokens: 10, messages: [] } as never,
        provider: { ...DEFAULT_PROVIDER_CONFIG, baseURL: odd.url },
        apiKey: undefined,
        answer: () => answered.push(agentId),
      });
      const leaves = [collector.join(), collector.join(), collector.join()];
      collector.submit(step('ag_one'));
      const two = collector.submit(step('ag_two'));
      // Two of three wait: the window decides. One withdraws and leaves: still one of two.
      two.withdraw();
      leaves[1]!();
      expect(odd.created).toEqual([]);
      // The last member waits too: the batch goes at once, without the withdrawn step.
      collector.submit(step('ag_three'));
      await vi.waitFor(() => expect(answered.sort()).toEqual(['ag_one', 'ag_three']));
      expect(odd.created).toEqual([['ag_one-s1', 'ag_three-s1']]);
      leaves[0]!();
      leaves[2]!();
    } finally {
      await collector.close();
      await odd.close();
    }
  });

  it('a step whose worker was lost stays in its batch, and its resumed run takes it over', async () => {
    // Batches take ten minutes of the model's clock until the crash; then they end in a blink.
    let fastSince: number | undefined;
    const clock = () =>
      fastSince === undefined
        ? performance.now()
        : fastSince + (performance.now() - fastSince) * 10_000;
    rig = await startRig(
      { lane: 'batches', batchPollMs: 10, threads: 1, agentsPerThread: 2 },
      { batchLatencyMs: 600_000, clock },
    );
    const waiting = rig.engine.spawn({ prompt: scripted([{ reply: 'after the crash' }]) });
    await vi.waitFor(() => expect(rig!.model.stats.batchesCreated).toBe(1));
    // Its neighbour on the one thread (in real time) kills the worker.
    const culprit = await rig.engine.run({
      prompt: scripted([{ calls: [{ name: 'crash', input: {} }] }]),
      lane: 'realtime',
    });
    expect(culprit.code).toBe('worker_crashed');
    fastSince = performance.now();
    const result = await waiting.result;
    expect(result).toMatchObject({ outcome: 'complete', text: 'after the crash' });
    // Its step went into one batch only: the resumed run took over the request already out.
    expect(rig.model.stats).toMatchObject({ batchesCreated: 1, batchRequests: 1 });
  });

  it('splits a batch the server refuses as too large, and never asks the governor', async () => {
    // A server that takes at most 2 requests a batch, answering 413 as the API does past 256 MB.
    const odd = await oddBatchServer({ maxRequests: 2 });
    try {
      rig = await startRig(
        {
          lane: 'batches',
          batchPollMs: 10,
          provider: { baseURL: odd.url },
          governor: { rpm: 1, maxConcurrency: 1 },
        },
        {},
      );
      const results = await Promise.all(
        Array.from({ length: 5 }, (_, index) => rig!.engine.run({ prompt: `Task ${index}.` })),
      );
      expect(results.every((result) => result.outcome === 'complete')).toBe(true);
      expect(odd.refused).toBeGreaterThan(0);
      expect(odd.created.every((ids) => ids.length <= 2)).toBe(true);
      expect(odd.created.flat().sort()).toEqual(results.map((result) => `${result.id}-s1`).sort());
      // The real-time limits pace nothing of the lane: the governor never saw a request.
      expect(rig.engine.governor?.states()).toEqual([]);
    } finally {
      await odd.close();
    }
  });

  it('takes the lane from a spawn, over its group, and passes it to the agents an agent spawns', async () => {
    // A parent waiting on its child is not waiting for a model call, so the child's step goes
    // when the window ends (docs/LANES.md, "Not yet"): a short one keeps this test about the lane.
    rig = await startRig(
      { maxDepth: 2, batchPollMs: 10, batchWindowMs: 100 },
      { batchLatencyMs: 5 },
    );
    const group = rig.engine.group({ lane: 'batches' });
    const parent = await group.run({
      prompt: scripted([
        { calls: [agentCall('child', [{ reply: 'from the child' }])] },
        { reply: 'parent done' },
      ]),
    });
    expect(parent).toMatchObject({ outcome: 'complete', text: 'parent done', lane: 'batches' });
    // The parent's 2 steps and its child's 1, all in batches; not one real-time request.
    expect(rig.model.stats).toMatchObject({ messages: 0, batchRequests: 3 });
    const own = await group.run({ prompt: scripted([{ reply: 'fast' }]), lane: 'realtime' });
    expect(own.lane).toBeUndefined();
    expect(rig.model.stats.messages).toBe(1);
    const plain = await rig.engine.run({ prompt: scripted([{ reply: 'engine default' }]) });
    expect(plain.lane).toBeUndefined();
    expect(rig.model.stats.messages).toBe(2);
  });

  it('names two live steps of one key apart: each custom id once in a batch', async () => {
    rig = await startRig({ lane: 'batches', batchPollMs: 10 }, { batchLatencyMs: 5 });
    const results = await Promise.all(
      ['first', 'second'].map((text) =>
        rig!.engine.run({ prompt: scripted([{ reply: text }]), key: 'same-task' }),
      ),
    );
    expect(results.map((result) => result.text)).toEqual(['first', 'second']);
    expect(rig.model.stats).toMatchObject({ messages: 0, batchesCreated: 1, batchRequests: 2 });
  });

  it('refuses a lane it does not know, and the batches lane with a queue', async () => {
    rig = await startRig({}, {});
    const engine = rig.engine;
    expect(
      usageError(() => engine.spawn({ prompt: 'x', lane: 'overnight' as 'batches' })).message,
    ).toBe('Expected `lane` to be realtime, batches or auto, got `overnight` (string)');
    expect(usageError(() => engine.group({ lane: 'soon' as 'batches' })).message).toContain(
      'Expected `group.lane` to be realtime, batches or auto',
    );
    const { Engine } = await import('../src/index.js');
    await expect(
      Engine.start({ lane: 'batches', queue: { url: 'redis://127.0.0.1:1' } }),
    ).rejects.toThrow('Expected `lane` to be `realtime` with `queue`');
    // A task line or a group's queued spawn is refused by the check, before it could wait.
    const { checkEngine } = await import('../src/main/engine.js');
    const queued = await checkEngine({ queue: { url: 'redis://127.0.0.1:1' } });
    expect(() => queued.checkAgent({ prompt: 'x', lane: 'batches' })).toThrow(
      'Expected `lane` to be `realtime` with `queue`',
    );
    expect(() => queued.checkAgent({ prompt: 'x' })).not.toThrow();
  });

  it('prices a batch step at half of every token price, the cache multipliers on top', () => {
    expect(batchPrice({ inputPerMTok: 3, outputPerMTok: 15 })).toEqual({
      inputPerMTok: 1.5,
      outputPerMTok: 7.5,
    });
    expect(
      batchPrice({
        inputPerMTok: 3,
        outputPerMTok: 15,
        cacheReadPerMTok: 0.3,
        cacheWrite1hPerMTok: 6,
      }),
    ).toEqual({
      inputPerMTok: 1.5,
      outputPerMTok: 7.5,
      cacheReadPerMTok: 0.15,
      cacheWrite1hPerMTok: 3,
    });
  });
});

/** An answer the odd server gives instead of the one asked for: a status and an API error. */
interface Refusal {
  status: number;
  type?: string;
  details?: object;
}

/**
 * A Message Batches server of a few lines, for what the scripted model never does (it writes
 * whole, honest results files and takes any batch within the API's limits): every batch has
 * ended when it is created, each request answered by a `reply` of its custom id; `results` may
 * rewrite a batch's file, and `maxRequests` refuses a larger create with 413. `creates` refuses
 * the first creates, in turn; `polls` makes a batch in progress until its polls have met each
 * refusal in turn (a `null` is an in-progress answer); `results` may refuse a results file
 * (`resultFailures`); `resultsHost` serves the results under another host name (another
 * origin), with a signed query. It records each cancel, and the authorization of each results
 * request.
 */
async function oddBatchServer(options: {
  results?: (index: number, lines: string[]) => string;
  maxRequests?: number;
  creates?: Refusal[];
  polls?: (Refusal | null)[];
  resultFailures?: number;
  resultsHost?: string;
  /** Each create is made at once but answered only when this settles; `onCreate` says it came. */
  holdCreates?: Promise<void>;
  onCreate?: () => void;
}): Promise<{
  url: string;
  created: string[][];
  refused: number;
  cancelled: string[];
  resultsAuth: (string | undefined)[];
  close(): Promise<void>;
}> {
  const created: string[][] = [];
  const cancelled: string[] = [];
  const resultsAuth: (string | undefined)[] = [];
  const creates = [...(options.creates ?? [])];
  const polls = new Map<string, (Refusal | null)[]>();
  let resultFailures = options.resultFailures ?? 0;
  let refused = 0;
  const refuse = (response: http.ServerResponse, refusal: Refusal) => {
    response.statusCode = refusal.status;
    response.end(
      JSON.stringify({
        type: 'error',
        error: {
          type: refusal.type ?? 'api_error',
          message: `refused ${refusal.status}`,
          ...(refusal.details ? { details: refusal.details } : {}),
        },
      }),
    );
  };
  const message = (text: string) => ({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'cohort-scripted',
    content: [{ type: 'tool_use', id: 'toolu_1', name: 'reply', input: { result: text } }],
    stop_reason: 'tool_use',
    usage: { input_tokens: 10, output_tokens: 5 },
  });
  const server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    request.on('end', () => {
      const url = request.url ?? '';
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const resultsOrigin = options.resultsHost
        ? origin.replace('127.0.0.1', options.resultsHost)
        : origin;
      const batch = (id: string, ended = true) => ({
        id,
        type: 'message_batch',
        processing_status: ended ? 'ended' : 'in_progress',
        results_url: `${resultsOrigin}/v1/messages/batches/${id}/results${options.resultsHost ? '?sig=secret-signature' : ''}`,
      });
      response.setHeader('content-type', 'application/json');
      if (request.method === 'POST' && url === '/v1/messages/batches') {
        const ids = (JSON.parse(body) as { requests: { custom_id: string }[] }).requests.map(
          (one) => one.custom_id,
        );
        if (options.maxRequests !== undefined && ids.length > options.maxRequests) {
          refused++;
          response.statusCode = 413;
          response.end(
            JSON.stringify({
              type: 'error',
              error: { type: 'request_too_large', message: 'too large' },
            }),
          );
          return;
        }
        const refusal = creates.shift();
        if (refusal) {
          refuse(response, refusal);
          return;
        }
        created.push(ids);
        const id = `b${created.length}`;
        if (options.polls) polls.set(id, [...options.polls]);
        options.onCreate?.();
        void (options.holdCreates ?? Promise.resolve()).then(() =>
          response.end(JSON.stringify(batch(id, !options.polls))),
        );
        return;
      }
      const cancel = /^\/v1\/messages\/batches\/(b\d+)\/cancel$/.exec(url);
      if (cancel) {
        cancelled.push(cancel[1]!);
        response.end(JSON.stringify(batch(cancel[1]!)));
        return;
      }
      const results = /^\/v1\/messages\/batches\/(b\d+)\/results(\?.*)?$/.exec(url);
      if (results) {
        resultsAuth.push(request.headers.authorization);
        if (resultFailures > 0) {
          resultFailures--;
          refuse(response, { status: 500 });
          return;
        }
        const index = Number(results[1]!.slice(1)) - 1;
        const lines = created[index]!.map((id) =>
          JSON.stringify({ custom_id: id, result: { type: 'succeeded', message: message(id) } }),
        );
        response.end(options.results ? options.results(index, lines) : `${lines.join('\n')}\n`);
        return;
      }
      const retrieve = /^\/v1\/messages\/batches\/(b\d+)$/.exec(url);
      if (retrieve) {
        const left = polls.get(retrieve[1]!);
        if (left !== undefined && left.length > 0) {
          const refusal = left.shift()!;
          if (refusal) refuse(response, refusal);
          else response.end(JSON.stringify(batch(retrieve[1]!, false)));
          return;
        }
        response.end(JSON.stringify(batch(retrieve[1]!)));
        return;
      }
      response.statusCode = 404;
      response.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    created,
    get refused() {
      return refused;
    },
    cancelled,
    resultsAuth,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('the batches lane and a full processing queue', () => {
  it('waits out a create refused 429 for a full queue and tries again, halving a batch larger than the queue', async () => {
    rig = await startRig(
      { lane: 'batches', batchPollMs: 10, batchWindowMs: 60_000 },
      { batchLatencyMs: 300, batchQueueSize: 4 },
    );
    // 10 steps at once: one batch of 10 cannot fit a queue of 4, nor can its halves of 5; halved
    // again, what fits goes, and the rest wait for the retry-after until a batch has ended.
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        rig!.engine.run({ prompt: scripted([{ reply: `done ${index}` }]) }),
      ),
    );
    expect(results.map((result) => result.outcome)).toEqual(Array(10).fill('complete'));
    const stats = rig.model.stats;
    expect(stats.messages).toBe(0);
    expect(stats.batchRequests).toBe(10);
    expect(stats.batchCreatesRefused).toBeGreaterThan(0);
    expect(rig.engine.batchQueueRefusals).toBeGreaterThan(0);
    expect(results.every((result) => result.usage.providerCalls === 1)).toBe(true);
  });

  it('fails a step rate_limited when the queue stays full past the patience', async () => {
    rig = await startRig(
      { lane: 'batches', batchPollMs: 10, governor: { patienceMs: 300 } },
      { batchLatencyMs: 600_000, batchQueueSize: 1 },
    );
    // Someone else's batch of the same key holds the whole queue for ten minutes.
    const client = new Anthropic({ apiKey: 'queue-key', baseURL: rig.model.url, maxRetries: 0 });
    await client.messages.batches.create({
      requests: [
        {
          custom_id: 'theirs',
          params: {
            model: 'cohort-scripted',
            max_tokens: 64,
            messages: [{ role: 'user', content: 'Hi.' }],
          },
        },
      ],
    });
    const result = await rig.engine.run({
      prompt: scripted([{ reply: 'never' }]),
      provider: { apiKey: 'queue-key' },
    });
    expect(result).toMatchObject({ outcome: 'failed', code: 'rate_limited' });
    expect(result.outcome === 'failed' && result.reason).toContain('processing queue');
    // Refused at once, again when the patience ran out, and then no more (no retries spent on it).
    expect(rig.model.stats.batchesCreated).toBe(1);
    expect(rig.model.stats.batchCreatesRefused).toBeGreaterThanOrEqual(2);
    expect(rig.model.stats.batchCreatesRefused).toBeLessThanOrEqual(3);
  });

  it('refuses a create past the queue as the API does: 429 rate_limit_error with retry-after, through the SDK', async () => {
    const { startScriptedModel } = await import('../src/testing/index.js');
    const model = await startScriptedModel({ port: 0, batchLatencyMs: 5_000, batchQueueSize: 2 });
    try {
      const client = new Anthropic({ baseURL: model.url, apiKey: 'test', maxRetries: 0 });
      const request = (id: string) => ({
        custom_id: id,
        params: {
          model: 'cohort-scripted',
          max_tokens: 64,
          messages: [{ role: 'user' as const, content: 'Hi.' }],
        },
      });
      await client.messages.batches.create({ requests: [request('a'), request('b')] });
      const refused = await client.messages.batches
        .create({ requests: [request('c')] })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(Anthropic.RateLimitError);
      const error = refused as InstanceType<typeof Anthropic.RateLimitError>;
      expect(error.status).toBe(429);
      expect(Number(error.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(error.message).toContain('exceeds the limit of 2');
      expect(model.stats).toMatchObject({ batchesCreated: 1, batchCreatesRefused: 1 });
    } finally {
      await model.close();
    }
  });
});
