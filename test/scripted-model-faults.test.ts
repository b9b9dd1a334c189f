import { once } from 'node:events';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Script,
  type ScriptedModel,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import { apiError } from './helpers.js';

let model: ScriptedModel;
let client: Anthropic;

beforeAll(async () => {
  model = await startScriptedModel({ chunkChars: 4 });
  client = new Anthropic({ apiKey: 'test-key', baseURL: model.url, maxRetries: 0 });
});

afterAll(async () => {
  await model.close();
});

function request(script: Script): Anthropic.MessageCreateParamsNonStreaming {
  return {
    model: 'scripted',
    max_tokens: 100,
    messages: [{ role: 'user', content: `Go.\n${scriptBlock(script)}` }],
  };
}

describe('HTTP errors', () => {
  it('answers 429 with retry-after headers the SDK exposes', async () => {
    const script = { steps: [{ error: { status: 429, retryAfter: 2, retryAfterMs: 1500 } }] };
    const error = await apiError(client.messages.create(request(script)));
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    expect(error.status).toBe(429);
    expect(error.headers?.get('retry-after')).toBe('2');
    expect(error.headers?.get('retry-after-ms')).toBe('1500');
    expect(error.requestID).toMatch(/^req_/);
    expect(error.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
  });

  it('answers 529 overloaded_error, also when streaming', async () => {
    const script = { steps: [{ error: { status: 529, message: 'busy' } }] };
    const error = await apiError(client.messages.stream(request(script)).finalMessage());
    expect(error.status).toBe(529);
    expect(error.error).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: 'busy' },
      request_id: expect.stringMatching(/^req_cohort_/),
    });
  });

  it('applies faults only while x-cohort-attempt < faultAttempts', async () => {
    const script = { steps: [{ text: 'Recovered.', error: { status: 529 }, faultAttempts: 2 }] };
    for (const attempt of [0, 1]) {
      const error = await apiError(
        client.messages.create(request(script), {
          headers: { 'x-cohort-attempt': String(attempt) },
        }),
      );
      expect(error.status).toBe(529);
    }
    const message = await client.messages.create(request(script), {
      headers: { 'x-cohort-attempt': '2' },
    });
    expect(message.content).toEqual([{ type: 'text', text: 'Recovered.' }]);
  });

  it('answers 529 for every request when x-cohort-overload is 1', async () => {
    const error = await apiError(
      client.messages.create(request({ steps: [{ text: 'never' }] }), {
        headers: { 'x-cohort-overload': '1' },
      }),
    );
    expect(error.status).toBe(529);
    expect(error.error).toMatchObject({ error: { type: 'overloaded_error' } });
  });

  it('rejects a bad x-cohort-* header with a message naming it', async () => {
    const error = await apiError(
      client.messages.create(request({ steps: [{ text: 'x' }] }), {
        headers: { 'x-cohort-tps': 'fast' },
      }),
    );
    expect(error.status).toBe(400);
    expect(error.message).toContain('x-cohort-tps');
    expect(error.message).toContain('`fast`');
  });
});

describe('mid-stream faults', () => {
  it('stalls after the first delta, then completes the stream', async () => {
    const text = 'before the stall and after it';
    const stream = client.messages.stream(request({ steps: [{ text, stall: { ms: 30 } }] }));
    const deltas: string[] = [];
    stream.on('text', (delta) => deltas.push(delta));
    const message = await stream.finalMessage();
    expect(deltas.join('')).toBe(text);
    expect(message.content).toEqual([{ type: 'text', text }]);
  });

  it('destroys the socket after the first delta: the SDK stream errors', async () => {
    const before = model.stats.clientClosed;
    const stream = client.messages.stream(
      request({ steps: [{ text: 'this text will be cut short', disconnect: true }] }),
    );
    const deltas: string[] = [];
    stream.on('text', (delta) => deltas.push(delta));
    await expect(stream.finalMessage()).rejects.toThrow();
    expect(deltas).toEqual(['this']);
    // A close the server made on purpose is not a client close.
    expect(model.stats.clientClosed).toBe(before);
  });

  it('sends an SSE error event after the first delta with midStream', async () => {
    const script = { steps: [{ text: 'partial text', error: { status: 529, midStream: true } }] };
    const stream = client.messages.stream(request(script));
    const error = await apiError(stream.finalMessage());
    expect(error.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
  });

  it('sends an event whose data is not JSON with malformed', async () => {
    // The SDK logs the bad chunk with console.error before it throws; keep the test quiet.
    const quiet = new Anthropic({
      apiKey: 'k',
      baseURL: model.url,
      maxRetries: 0,
      logLevel: 'off',
    });
    const stream = quiet.messages.stream(
      request({ steps: [{ text: 'some text here', malformed: true }] }),
    );
    const error = await stream.finalMessage().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Anthropic.AnthropicError);
    expect((error as Error).cause).toBeInstanceOf(SyntaxError);
  });

  it('sees the connection close when the client aborts mid-stream', async () => {
    const stream = client.messages.stream(
      request({ steps: [{ text: 'first delta then a long stall', stall: { ms: 60_000 } }] }),
    );
    const closed = once(model, 'client-closed');
    stream.on('text', () => stream.abort());
    await expect(stream.finalMessage()).rejects.toThrow(Anthropic.APIUserAbortError);
    const [event] = await closed;
    expect(event).toEqual({ turn: 0, attempt: 0 });
  });

  it('sees the connection close when the client aborts during time to first token', async () => {
    const controller = new AbortController();
    const closed = once(model, 'client-closed');
    model.once('request', () => controller.abort());
    const promise = client.messages.create(request({ steps: [{ text: 'late' }] }), {
      signal: controller.signal,
      headers: { 'x-cohort-ttft-ms': '60000', 'x-cohort-attempt': '3' },
    });
    await expect(promise).rejects.toThrow(Anthropic.APIUserAbortError);
    const [event] = await closed;
    expect(event).toEqual({ turn: 0, attempt: 3 });
  });
});

describe('rate limit', () => {
  it('answers 429 with retry-after when the rpm bucket is empty', async () => {
    // One request a minute: the bucket holds one (the whole minute's limit), and a slow
    // machine cannot refill it between the two requests.
    const limited = await startScriptedModel({ rpm: 1 });
    try {
      const limitedClient = new Anthropic({ apiKey: 'k', baseURL: limited.url, maxRetries: 0 });
      const ok = await limitedClient.messages.create(request({ steps: [{ text: 'first' }] }));
      expect(ok.content).toEqual([{ type: 'text', text: 'first' }]);
      const error = await apiError(
        limitedClient.messages.create(request({ steps: [{ text: 'x' }] })),
      );
      expect(error.status).toBe(429);
      expect(error.error).toMatchObject({
        error: {
          type: 'rate_limit_error',
          message: expect.stringMatching(
            /^This request would exceed the rate limit of 1 request per minute for this API key; retry in /,
          ),
        },
      });
      expect(error.headers?.get('anthropic-ratelimit-requests-limit')).toBe('1');
      expect(error.headers?.get('anthropic-ratelimit-requests-remaining')).toBe('0');
      const seconds = Number(error.headers?.get('retry-after'));
      const milliseconds = Number(error.headers?.get('retry-after-ms'));
      expect(Number.isInteger(seconds) && seconds >= 1).toBe(true);
      expect(milliseconds).toBeGreaterThan(0);
      expect(milliseconds).toBeLessThanOrEqual(60_000);
      expect(limited.stats).toMatchObject({ requests: 2, completed: 1, rateLimited429: 1 });
    } finally {
      await limited.close();
    }
  });
});
