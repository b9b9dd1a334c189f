import { Writable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mockCommand, parseScript, type Script, scriptBlock } from '../src/testing/index.js';
import { RateLimits } from '../src/testing/rate-limits.js';
import { validateRequest } from '../src/testing/request-validation.js';
import { chunkText } from '../src/testing/sse-events.js';
import { TickScheduler } from '../src/testing/tick-scheduler.js';

const toolId = fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/);
const input = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), {
  maxKeys: 4,
});
const call = fc.oneof(
  fc.record(
    { name: fc.string({ minLength: 1, maxLength: 10 }), input, id: toolId },
    { requiredKeys: ['name'] },
  ),
  fc.record({ reply: fc.jsonValue({ maxDepth: 2 }) }),
);
const scriptError = fc.record(
  {
    status: fc.integer({ min: 400, max: 599 }),
    type: fc.string({ minLength: 1, maxLength: 12 }),
    message: fc.string({ maxLength: 20 }),
    retryAfter: fc.nat(100),
    retryAfterMs: fc.double({ min: 0, max: 1e5, noNaN: true }),
    midStream: fc.boolean(),
  },
  { requiredKeys: ['status'] },
);
const step = fc.record(
  {
    text: fc.string({ unit: 'binary', maxLength: 40 }),
    calls: fc.array(call, { maxLength: 3 }),
    reply: fc.jsonValue({ maxDepth: 2 }),
    delayMs: fc.nat(1000),
    error: scriptError,
    stall: fc.record({ ms: fc.nat(1000) }),
    disconnect: fc.boolean(),
    malformed: fc.boolean(),
    faultAttempts: fc.nat(5),
  },
  { requiredKeys: [] },
);
const script: fc.Arbitrary<Script> = fc.record({ steps: fc.array(step, { maxLength: 4 }) });

describe('parseScript', () => {
  it('never throws, and an error always says something', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc.string().map((text) => `\`\`\`cohort-script\n${text}\n\`\`\``),
        ),
        (text) => {
          const parsed = parseScript(text);
          if (!parsed.ok) expect(parsed.error.length).toBeGreaterThan(0);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('round-trips scriptBlock, alone or inside a prompt', () => {
    const prose = fc.string().filter((text) => !text.includes('```'));
    fc.assert(
      fc.property(script, prose, prose, (value, before, after) => {
        for (const text of [
          scriptBlock(value),
          `${before}\n${scriptBlock(value)}\n${after}`,
          JSON.stringify(value),
        ]) {
          const parsed = parseScript(text);
          expect(parsed.ok).toBe(true);
          if (parsed.ok) expect(JSON.stringify(parsed.script)).toBe(JSON.stringify(value));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('accepts a bare array of steps', () => {
    expect(parseScript(scriptBlock([{ text: 'a' }, { reply: null }]))).toEqual({
      ok: true,
      script: { steps: [{ text: 'a' }, { reply: null }] },
    });
  });

  it('names the step and the key that is wrong', () => {
    expect(parseScript('{"steps":[{"text":"ok"},{"calls":[{"name":""}]}]}')).toEqual({
      ok: false,
      error:
        'Invalid cohort-script: expected `steps.1.calls.0.name` to be a non-empty string, got `""` (string)',
    });
    expect(parseScript('{"steps":[{"error":{"status":200}}]}')).toMatchObject({
      ok: false,
      error: expect.stringContaining('`steps.0.error.status` to be an integer from 400 to 599'),
    });
  });
});

describe('request validation', () => {
  it('never throws on any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const checked = validateRequest(value);
        if (!checked.ok)
          expect(checked.message).toMatch(/^Expected |: Extra inputs are not permitted$/);
      }),
      { numRuns: 500 },
    );
  });
});

describe('chunkText', () => {
  it('joins back to the text and never splits a surrogate pair', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 60 }),
        fc.integer({ min: 1, max: 9 }),
        (text, size) => {
          const pieces = [...chunkText(text, size)];
          expect(pieces.join('')).toBe(text);
          for (const piece of pieces) {
            expect(piece.length).toBeGreaterThan(0);
            expect(piece.length).toBeLessThanOrEqual(size + 1);
            expect(Buffer.from(piece, 'utf8').toString('utf8')).toBe(piece);
          }
        },
      ),
    );
  });
});

describe('TickScheduler', () => {
  it('runs tasks in due order, tasks of one tick together', async () => {
    const scheduler = new TickScheduler(4);
    const order: string[] = [];
    const done = new Promise<void>((resolve) => {
      const now = scheduler.now();
      scheduler.schedule(now + 30, () => {
        order.push('c');
        resolve();
      });
      scheduler.schedule(now + 10, () => order.push('a1'));
      scheduler.schedule(now + 20, () => order.push('b'));
      scheduler.schedule(now + 10, () => order.push('a2'));
    });
    await done;
    scheduler.close();
    expect(order).toEqual(['a1', 'a2', 'b', 'c']);
  });
});

describe('RateLimits (requests only)', () => {
  it('holds bucketSeconds of requests and refills at rpm / 60000 per ms', () => {
    const limits = new RateLimits({
      rpm: 120,
      itpm: 0,
      otpm: 0,
      bucketSeconds: 1,
      acceleration: 0,
    });
    const wait = (now: number): number | undefined => {
      const admission = limits.admit('key', 0, now);
      return admission.ok ? undefined : admission.waitMs;
    };
    expect(wait(0)).toBeUndefined();
    expect(wait(0)).toBeUndefined();
    expect(wait(0)).toBe(500);
    expect(wait(250)).toBe(250);
    expect(wait(500)).toBeUndefined();
  });
});

describe('mockCommand', () => {
  function sink() {
    const chunks: string[] = [];
    let onWrite: () => void = () => {};
    const written = new Promise<void>((resolve) => {
      onWrite = resolve;
    });
    const stream = new Writable({
      write(chunk, _encoding, callback) {
        chunks.push(String(chunk));
        onWrite();
        callback();
      },
    });
    return { stream, written, text: () => chunks.join('') };
  }

  it('exits 2 naming the flag, what was expected and what arrived', async () => {
    const stderr = sink();
    const code = await mockCommand(['--tps', 'fast'], { stderr: stderr.stream });
    expect(code).toBe(2);
    expect(stderr.text()).toContain('Expected --tps to be a non-negative number, got `fast`');
    const unknown = sink();
    expect(await mockCommand(['--bogus'], { stderr: unknown.stream })).toBe(2);
    expect(unknown.text()).toContain('--bogus');
  });

  it('prints one listening line, serves, and stops on its signal', async () => {
    const stdout = sink();
    const controller = new AbortController();
    const exit = mockCommand(['--port', '0', '--seed', '7', '--chunk-chars', '2'], {
      stdout: stdout.stream,
      signal: controller.signal,
    });
    await stdout.written;
    const line = stdout.text();
    expect(line).toMatch(/^cohort scripted model listening on http:\/\/127\.0\.0\.1:\d+\n$/);
    const url = line.trim().split(' ').at(-1)!;
    const response = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      body: JSON.stringify({
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    expect(response.status).toBe(200);
    await response.json();
    controller.abort();
    expect(await exit).toBe(0);
  });
});
