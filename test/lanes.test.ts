import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EngineWarning } from '../src/index.js';
import type { ScriptStep } from '../src/testing/index.js';
import { type Rig, scripted, startRig } from './helpers.js';

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
});
