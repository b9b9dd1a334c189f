import { getEventListeners } from 'node:events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RemoteGate } from '../src/shared/governor/remote-gate.js';
import type { GovernorRequest } from '../src/shared/protocol.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../src/shared/provider/config.js';
import { Provider } from '../src/shared/provider/provider.js';
import type { ProviderRequest } from '../src/shared/provider/types.js';
import {
  type ScriptedModel,
  type ScriptStep,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import { nextEvent } from './helpers.js';

let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0, chunkChars: 3 });
});

afterAll(async () => {
  await model.close();
});

function provider(overrides: Partial<ProviderConfig> = {}): Provider {
  return new Provider({
    ...DEFAULT_PROVIDER_CONFIG,
    model: 'cohort-scripted',
    baseURL: model.url,
    backoffBaseMs: 5,
    backoffMaxMs: 100,
    ...overrides,
  });
}

function request(steps: ScriptStep[], history: ProviderRequest['messages'] = []): ProviderRequest {
  return {
    messages: [{ role: 'user', content: `Go.\n${scriptBlock({ steps })}` }, ...history],
    tools: [{ name: 'lookup', description: 'look up', input_schema: { type: 'object' } }],
  };
}

const signal = () => new AbortController().signal;

describe('Provider against the scripted model (real SDK, real HTTP)', () => {
  it('streams text and reports every delta and the usage', async () => {
    const deltas: string[] = [];
    const result = await provider().complete(request([{ text: 'Hello there, streaming world.' }]), {
      signal: signal(),
      onTextDelta: (text) => deltas.push(text),
    });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.turn.text).toBe('Hello there, streaming world.');
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join('')).toBe('Hello there, streaming world.');
    expect(result.turn.stopReason).toBe('end_turn');
    expect(result.turn.usage.inputTokens).toBeGreaterThan(0);
    expect(result.turn.usage.outputTokens).toBe(
      Math.ceil('Hello there, streaming world.'.length / 4),
    );
    expect(result.calls).toBe(1);
  });

  it('assembles tool_use input that arrives in many small deltas', async () => {
    const input = { query: 'a fairly long query string', nested: { list: [1, 2, 3], flag: true } };
    const result = await provider().complete(request([{ calls: [{ name: 'lookup', input }] }]), {
      signal: signal(),
    });
    expect(result.ok && result.turn.calls).toEqual([
      { id: 'toolu_cohort_0_0', name: 'lookup', input },
    ]);
    expect(result.ok && result.turn.stopReason).toBe('tool_use');
  });

  it('keeps multibyte UTF-8 intact across deltas', async () => {
    const text = 'naïve 日本語テキスト 🧪🚀 ok';
    const result = await provider().complete(request([{ text }]), { signal: signal() });
    expect(result.ok && result.turn.text).toBe(text);
  });

  it('plays a multi-step script, step k at assistant turn k', async () => {
    const steps: ScriptStep[] = [
      { calls: [{ name: 'lookup', input: {} }] },
      { text: 'second step' },
    ];
    const second = await provider().complete(
      request(steps, [
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'toolu_cohort_0_0', name: 'lookup', input: {} }],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_cohort_0_0', content: 'found' }],
        },
      ]),
      { signal: signal() },
    );
    expect(second.ok && second.turn.text).toBe('second step');
  });

  it('retries a 429 honouring retry-after-ms, then succeeds', async () => {
    const retries: number[] = [];
    const result = await provider().complete(
      request([{ error: { status: 429, retryAfterMs: 30 }, faultAttempts: 2, text: 'finally' }]),
      { signal: signal(), onRetry: (info) => retries.push(info.waitMs) },
    );
    expect(result.ok && result.turn.text).toBe('finally');
    expect(result.calls).toBe(3);
    expect(retries).toEqual([30, 30]);
  });

  it('gives a typed failure after its retries when the server stays overloaded', async () => {
    const result = await provider({ maxRetries: 3 }).complete(
      request([{ error: { status: 529 } }]),
      {
        signal: signal(),
      },
    );
    expect(result).toMatchObject({
      ok: false,
      calls: 4,
      error: { code: 'overloaded', status: 529 },
    });
  });

  it('classifies a 400 for an unanswered tool_use as bad_request and does not retry', async () => {
    const result = await provider().complete(
      {
        messages: [
          { role: 'user', content: 'hi' },
          {
            role: 'assistant',
            content: [{ type: 'tool_use', id: 'toolu_x', name: 'lookup', input: {} }],
          },
          { role: 'user', content: 'no tool result here' },
        ],
        tools: [],
      },
      { signal: signal() },
    );
    expect(result).toMatchObject({
      ok: false,
      calls: 1,
      error: { code: 'bad_request', status: 400 },
    });
    expect(!result.ok && result.error.message).toMatch(/tool_use/);
  });

  it('detects a stalled stream, retries it, and says stalled when retries run out', async () => {
    const recovered = await provider({ idleTimeoutMs: 100 }).complete(
      request([{ text: 'stall then fine', stall: { ms: 5000 }, faultAttempts: 1 }]),
      { signal: signal() },
    );
    expect(recovered.ok && recovered.turn.text).toBe('stall then fine');
    expect(recovered.calls).toBe(2);
    const stalled = await provider({ idleTimeoutMs: 100, maxRetries: 1 }).complete(
      request([{ text: 'always stalls', stall: { ms: 5000 } }]),
      { signal: signal() },
    );
    expect(stalled).toMatchObject({ ok: false, calls: 2, error: { code: 'stalled' } });
  });

  it('retries a disconnect mid-stream and a malformed event', async () => {
    const disconnect = await provider().complete(
      request([{ text: 'after a reconnect', disconnect: true, faultAttempts: 1 }]),
      {
        signal: signal(),
      },
    );
    expect(disconnect.ok && disconnect.turn.text).toBe('after a reconnect');
    const gone = await provider({ maxRetries: 0 }).complete(
      request([{ text: 'x', disconnect: true }]),
      { signal: signal() },
    );
    expect(gone).toMatchObject({ ok: false, error: { code: 'connection' } });
    const malformed = await provider({ maxRetries: 0 }).complete(
      request([{ text: 'x', malformed: true }]),
      { signal: signal() },
    );
    expect(malformed).toMatchObject({ ok: false, error: { code: 'bad_response' } });
    // A garbled chunk in a stream that began well may not recur: it keeps its retry.
    const garbledOnce = await provider({ maxRetries: 1 }).complete(
      request([{ text: 'clean now', malformed: true, faultAttempts: 1 }]),
      { signal: signal() },
    );
    expect(garbledOnce).toMatchObject({ ok: true, calls: 2 });
    const midStreamError = await provider({ maxRetries: 0 }).complete(
      request([{ text: 'x', error: { status: 529, midStream: true } }]),
      { signal: signal() },
    );
    expect(midStreamError).toMatchObject({ ok: false, error: { code: 'overloaded' } });
  });

  it('aborts mid-stream: the server sees the connection close and the result says aborted', async () => {
    const controller = new AbortController();
    const closed = nextEvent(model, 'client-closed');
    const result = await provider().complete(
      request([{ text: 'a long stream', stall: { ms: 60_000 } }]),
      {
        signal: controller.signal,
        onTextDelta: () => controller.abort('user'),
      },
    );
    expect(result).toMatchObject({ ok: false, error: { code: 'aborted' } });
    await closed;
  });

  it('aborts before the response head: answers at once, and the server still sees the connection close', async () => {
    const controller = new AbortController();
    const arrived = nextEvent(model, 'request');
    const closed = nextEvent(model, 'client-closed');
    const pending = provider().complete(request([{ delayMs: 600_000, text: 'too late' }]), {
      signal: controller.signal,
    });
    await arrived;
    controller.abort('user');
    // Answered before the request is torn down (a later turn): the teardown must still happen.
    expect(await pending).toMatchObject({
      ok: false,
      calls: 1,
      error: { code: 'aborted', message: 'aborted: user' },
    });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await closed;
  });

  it('removes every abort listener it adds, whatever ends the request', async () => {
    const controller = new AbortController();
    const cases: ScriptStep[][] = [
      [{ text: 'plain' }],
      [{ calls: [{ name: 'lookup', input: {} }] }],
      [{ error: { status: 429, retryAfterMs: 1 }, faultAttempts: 1, text: 'retried' }],
      [{ error: { status: 400 } }],
      [{ text: 'x', disconnect: true, faultAttempts: 1 }],
      [{ text: 'x', malformed: true }],
      [{ text: 'x', stall: { ms: 2000 }, faultAttempts: 1 }],
    ];
    for (const steps of cases) {
      await provider({ idleTimeoutMs: 100, maxRetries: 1 }).complete(request(steps), {
        signal: controller.signal,
      });
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    }
  });

  it('an abort during the backoff wait returns at once', async () => {
    const controller = new AbortController();
    const started = performance.now();
    const pending = provider({ backoffBaseMs: 60_000, backoffMaxMs: 60_000 }).complete(
      request([{ error: { status: 500 } }]),
      {
        signal: controller.signal,
        onRetry: () => controller.abort('user'),
      },
    );
    const result = await pending;
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'aborted' } });
    // Not a timing assertion on speed: a 60 s backoff that was not cut short would time the test out.
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  it('a cancel that lands with its admission sends nothing and gives the permit back', async () => {
    // A worker's uplink hands a child its governor's grant and its cancel in one post, with no
    // turn between them: the grant's continuation runs only after the cancel has aborted.
    const posted: GovernorRequest[] = [];
    const gate = new RemoteGate((message) => posted.push(message), 60_000);
    const controller = new AbortController();
    let requests = 0;
    const count = () => requests++;
    model.on('request', count);
    try {
      const pending = provider().complete(request([{ text: 'never asked for' }]), {
        signal: controller.signal,
        gate,
      });
      await vi.waitFor(() => expect(posted.map((message) => message.type)).toEqual(['gov-admit']));
      const id = posted[0]!.id;
      gate.receive(id, { ok: true, permit: 1 });
      controller.abort('clear');
      expect(await pending).toMatchObject({
        ok: false,
        calls: 0,
        error: { code: 'aborted', message: 'aborted: clear' },
      });
      expect(requests).toBe(0);
      expect(posted.slice(1)).toMatchObject([
        { type: 'gov-settle', id, report: { outcome: 'aborted' } },
      ]);
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    } finally {
      model.off('request', count);
    }
  });
});
