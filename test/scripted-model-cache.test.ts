/**
 * The scripted model's prompt caching, as the real API's: `cache_control` breakpoints, the
 * limit of 4 and the ttl order, the minimum cacheable length per model, the 20-block lookback,
 * lifetimes (on the server's `clock`, which a test moves forward instead of waiting minutes),
 * entries readable once the writing response has started, usage in every place the SDK reads
 * it, the input-token rate limit, and `cache: false` / `--no-cache`. Through the official SDK
 * over real HTTP.
 */

import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_MINIMUM_CACHEABLE,
  minimumCacheable as minimumCacheableTokens,
} from '../src/shared/provider/cache-minimums.js';
import {
  mockCommand,
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptStep,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import { resolveOptions } from '../src/testing/load-model.js';
import { parseMockFlags } from '../src/testing/serve-command.js';
import { apiError } from './helpers.js';

type Params = Anthropic.MessageCreateParamsNonStreaming;
type TextBlock = Anthropic.TextBlockParam;

const MODEL = 'cohort-scripted'; // any model the table does not name: a minimum of 1,024 tokens
const MINUTE = 60_000;
const EPHEMERAL = { type: 'ephemeral' } as const;
const HOUR_TTL = { type: 'ephemeral', ttl: '1h' } as const;
/** About 2,100 tokens: above the default minimum, below Opus 4.6's 4,096. */
const LONG = 'You review code carefully and answer in one line. '.repeat(170);

let model: ScriptedModel | undefined;
/** How far the server's clock has been moved past real time. */
let skippedMs = 0;

afterEach(async () => {
  await model?.close();
  model = undefined;
  skippedMs = 0;
});

/** Starts a scripted model on a clock the test can move forward with `skip`. */
async function serve(options: ScriptedModelOptions = {}): Promise<Anthropic> {
  model = await startScriptedModel({ clock: () => performance.now() + skippedMs, ...options });
  return clientOf(model.url);
}

function clientOf(url: string, apiKey = 'key-a'): Anthropic {
  return new Anthropic({ apiKey, baseURL: url, maxRetries: 0 });
}

function skip(ms: number): void {
  skippedMs += ms;
}

function systemOf(text: string, cacheControl?: Anthropic.CacheControlEphemeral): TextBlock[] {
  return [
    cacheControl === undefined
      ? { type: 'text', text }
      : { type: 'text', text, cache_control: cacheControl },
  ];
}

function request(overrides: Partial<Params> = {}): Params {
  return {
    model: MODEL,
    max_tokens: 64,
    system: systemOf(LONG, EPHEMERAL),
    messages: [{ role: 'user', content: 'Review the diff.' }],
    ...overrides,
  };
}

/** JSON without `cache_control` fields, which are no part of the prompt. */
function json(value: unknown): string {
  return JSON.stringify(value, (key, field) => (key === 'cache_control' ? undefined : field));
}

/**
 * The input tokens of the prefix that ends with a block, as the documentation counts them: the
 * characters of the JSON of `tools`, `system` and `messages`, in that order and without
 * `cache_control`, up to the end of the block, / 4 rounded up. `at` names system block
 * `system`, or message `message`'s block `block` (a string content is its only block).
 * Messages have `role` before `content`.
 */
function prefixTokens(
  params: Params,
  at: { system: number } | { message: number; block?: number },
) {
  const tools = params.tools === undefined ? 0 : json(params.tools).length;
  const system = params.system === undefined ? '' : json(params.system);
  if ('system' in at) {
    const blocks = params.system as TextBlock[];
    return Math.ceil((tools + json(blocks.slice(0, at.system + 1)).length - 1) / 4);
  }
  const messages: unknown[] = params.messages.slice(0, at.message + 1);
  const last = params.messages[at.message]!;
  let chars: number;
  if (typeof last.content === 'string') {
    chars = json(messages).length - 2; // the message's `}` and the list's `]`
  } else {
    messages[at.message] = { ...last, content: last.content.slice(0, (at.block ?? 0) + 1) };
    chars = json(messages).length - 3; // and the content's `]`
  }
  return Math.ceil((tools + system.length + chars) / 4);
}

interface Counts {
  input: number;
  creation: number;
  read: number;
  fiveMinutes: number;
  hour: number;
}

function countsOf(usage: Anthropic.Usage): Counts {
  return {
    input: usage.input_tokens,
    creation: usage.cache_creation_input_tokens ?? -1,
    read: usage.cache_read_input_tokens ?? -1,
    fiveMinutes: usage.cache_creation?.ephemeral_5m_input_tokens ?? -1,
    hour: usage.cache_creation?.ephemeral_1h_input_tokens ?? -1,
  };
}

/** The request's input tokens as count_tokens reports them (the cache plays no part there). */
async function totalOf(client: Anthropic, params: Params): Promise<number> {
  const { max_tokens: _, stream: __, ...counted } = params;
  return (await client.messages.countTokens(counted)).input_tokens;
}

async function send(client: Anthropic, params: Params): Promise<Counts> {
  return countsOf((await client.messages.create(params)).usage);
}

/** A write of `tokens` (5-minute ones unless `hour`), and the rest of `total` as input. */
function wrote(total: number, tokens: number, hour = 0): Counts {
  return { input: total - tokens, creation: tokens, read: 0, fiveMinutes: tokens - hour, hour };
}

function read(total: number, tokens: number): Counts {
  return { input: total - tokens, creation: 0, read: tokens, fiveMinutes: 0, hour: 0 };
}

function nothing(total: number): Counts {
  return { input: total, creation: 0, read: 0, fiveMinutes: 0, hour: 0 };
}

describe('prompt caching: writes and reads', () => {
  it('writes the prefix on the first request and reads it on the second', async () => {
    const client = await serve();
    const params = request();
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    expect(prefix).toBeGreaterThan(DEFAULT_MINIMUM_CACHEABLE);
    expect(await send(client, params)).toEqual(wrote(total, prefix));
    expect(await send(client, params)).toEqual(read(total, prefix));
    // Another key has a cache of its own, and so has another model.
    expect(await send(clientOf(model!.url, 'key-b'), params)).toEqual(wrote(total, prefix));
    const opus41 = { ...params, model: 'claude-opus-4-1' };
    expect(await send(client, opus41)).toEqual(wrote(total, prefix));
  });

  it('reports the counts in message_start, message_delta and the final message of a stream', async () => {
    const client = await serve();
    const params = request();
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    await send(client, params);
    let start: Anthropic.Usage | undefined;
    let delta: Anthropic.MessageDeltaUsage | undefined;
    const stream = client.messages.stream(params);
    stream.on('streamEvent', (event) => {
      if (event.type === 'message_start') start = structuredClone(event.message.usage);
      if (event.type === 'message_delta') delta = event.usage;
    });
    const final = await stream.finalMessage();
    expect(start).toEqual({
      input_tokens: total - prefix,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: prefix,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
      output_tokens: 1,
      service_tier: 'standard',
    });
    expect(delta).toEqual({
      input_tokens: total - prefix,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: prefix,
      output_tokens: final.usage.output_tokens,
    });
    expect(countsOf(final.usage)).toEqual(read(total, prefix));
  });

  it('reads the last prefix through the lookback when the breakpoint moves to the end of a growing conversation', async () => {
    const client = await serve();
    const user = (text: string): Anthropic.MessageParam => ({
      role: 'user',
      content: [{ type: 'text', text }],
    });
    const assistant = (text: string): Anthropic.MessageParam => ({
      role: 'assistant',
      content: text,
    });
    /** The conversation so far, with the breakpoint on its last block only. */
    const at = (messages: Anthropic.MessageParam[]): Params => {
      const marked = messages.map((message, index) => {
        if (index < messages.length - 1 || typeof message.content === 'string') return message;
        const blocks = message.content as TextBlock[];
        return { ...message, content: [{ ...blocks[0]!, cache_control: EPHEMERAL }] };
      });
      return request({ system: systemOf(LONG), messages: marked });
    };
    const turns = [user('Review a.ts.')];
    const first = at(turns);
    const firstTotal = await totalOf(client, first);
    const firstPrefix = prefixTokens(first, { message: 0 });
    expect(await send(client, first)).toEqual(wrote(firstTotal, firstPrefix));

    turns.push(assistant('a.ts looks fine.'), user('Now b.ts.'));
    const second = at(turns);
    const secondTotal = await totalOf(client, second);
    const secondPrefix = prefixTokens(second, { message: 2 });
    // The first request's prefix is read; only the two new blocks are written.
    expect(await send(client, second)).toEqual({
      input: secondTotal - secondPrefix,
      creation: secondPrefix - firstPrefix,
      read: firstPrefix,
      fiveMinutes: secondPrefix - firstPrefix,
      hour: 0,
    });
    // Moving the breakpoint did not change the earlier prefix: it is read as it was written,
    // though its block no longer carries cache_control.
    expect(prefixTokens(second, { message: 0 })).toBe(firstPrefix);
  });

  it('looks back 20 blocks before a breakpoint, and no further', async () => {
    const client = await serve();
    const blocks = (count: number): TextBlock[] =>
      Array.from({ length: count }, (_, index) => ({ type: 'text', text: `Part ${index}.` }));
    const marked = (count: number): Params => {
      const content: TextBlock[] = blocks(count);
      content[count - 1] = { ...content[count - 1]!, cache_control: EPHEMERAL };
      return request({ system: systemOf(LONG), messages: [{ role: 'user', content }] });
    };
    // The prompt's blocks: the system prompt (0), then the message's. The write ends at block 1.
    const written = marked(1);
    const prefix = prefixTokens(written, { message: 0, block: 0 });
    expect(await send(client, written)).toEqual(wrote(await totalOf(client, written), prefix));
    // A breakpoint 21 blocks later does not find it (it writes its own prefix)...
    const far = marked(22);
    const farPrefix = prefixTokens(far, { message: 0, block: 21 });
    expect(await send(client, far)).toEqual(wrote(await totalOf(client, far), farPrefix));
    // ... and one 20 blocks later still does, and writes only what follows it.
    const near = marked(21);
    const nearTotal = await totalOf(client, near);
    const nearPrefix = prefixTokens(near, { message: 0, block: 20 });
    expect(await send(client, near)).toEqual({
      input: nearTotal - nearPrefix,
      creation: nearPrefix - prefix,
      read: prefix,
      fiveMinutes: nearPrefix - prefix,
      hour: 0,
    });
  });

  it('writes at every breakpoint past the hit, splitting the writes by ttl', async () => {
    const client = await serve();
    const params = request({
      system: systemOf(LONG, HOUR_TTL),
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: `Context: ${LONG}`, cache_control: EPHEMERAL }],
        },
      ],
    });
    const total = await totalOf(client, params);
    const system = prefixTokens(params, { system: 0 });
    const message = prefixTokens(params, { message: 0 });
    expect(await send(client, params)).toEqual({
      input: total - message,
      creation: message,
      read: 0,
      fiveMinutes: message - system,
      hour: system,
    });
    expect(await send(client, params)).toEqual(read(total, message));
    // Another conversation after the same system prompt reads the hour-long entry.
    const other = request({
      system: systemOf(LONG, HOUR_TTL),
      messages: [{ role: 'user', content: 'Something else.' }],
    });
    expect(await send(client, other)).toEqual(read(await totalOf(client, other), system));
  });

  it('caches the whole prompt under a top-level cache_control (automatic caching)', async () => {
    const client = await serve();
    const params = request({ system: systemOf(LONG), cache_control: EPHEMERAL });
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { message: 0 });
    expect(await send(client, params)).toEqual(wrote(total, prefix));
    expect(await send(client, params)).toEqual(read(total, prefix));
  });

  it('caches tools before the system prompt', async () => {
    const client = await serve();
    const tools: Anthropic.Tool[] = [
      {
        name: 'review',
        description: LONG,
        input_schema: { type: 'object' },
        cache_control: EPHEMERAL,
      },
    ];
    const params = request({ tools, system: 'Be brief.' });
    const total = await totalOf(client, params);
    // The tools' JSON up to the end of the tool: all of it but the closing `]`.
    const prefix = Math.ceil((json(tools).length - 1) / 4);
    expect(await send(client, params)).toEqual(wrote(total, prefix));
    const otherSystem = { ...params, system: 'Be thorough.' };
    expect(await send(client, otherSystem)).toEqual(
      read(await totalOf(client, otherSystem), prefix),
    );
  });
  it('charges an image its media tokens in the prefix, and hashes what it shows', async () => {
    const client = await serve();
    const image = (data: string): Anthropic.ImageBlockParam => ({
      type: 'image',
      source: { type: 'base64', media_type: 'image/png', data },
      cache_control: EPHEMERAL,
    });
    const looking = (data: string) =>
      request({
        system: 'Be brief.',
        messages: [{ role: 'user', content: [image(data), { type: 'text', text: 'What is it?' }] }],
      });
    const first = looking('iVBORw0KGgoAAAA');
    const total = await totalOf(client, first);
    const written = await send(client, first);
    // An image costs 1,600 tokens, whatever its size, and its JSON counts for nothing.
    expect(written.creation).toBeGreaterThan(1600);
    expect(written.creation).toBeLessThan(1620);
    expect(written).toEqual(wrote(total, written.creation));
    expect(await send(client, first)).toEqual(read(total, written.creation));
    // Another image of the same cost is another prefix.
    expect(await send(client, looking('R0lGODlhAQABAAA'))).toEqual(wrote(total, written.creation));
  });

  it('neither reads nor writes for a message thread, whose conversation the server holds', async () => {
    const client = await serve();
    const params = request();
    const total = await totalOf(client, params);
    await send(client, params);
    const threaded = await client.beta.messages.create({
      ...params,
      thread: { type: 'create' },
      betas: ['message-threads-2026-08-12'],
    });
    expect(countsOf(threaded.usage as Anthropic.Usage)).toEqual(nothing(total));
  });
});

describe('prompt caching: what the real API refuses or skips', () => {
  it('refuses more than 4 breakpoints, counting the top-level one, with the real message', async () => {
    const client = await serve();
    const marked = (count: number): TextBlock[] =>
      Array.from({ length: count }, (_, index) => ({
        type: 'text',
        text: `Part ${index}.`,
        cache_control: EPHEMERAL,
      }));
    const five = request({ messages: [{ role: 'user', content: marked(4) }] });
    const error = await apiError(client.messages.create(five));
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect(error.type).toBe('invalid_request_error');
    expect(error.apiMessage).toBe(
      'A maximum of 4 blocks with cache_control may be provided. Found 5.',
    );
    const automatic = request({
      system: systemOf(LONG),
      messages: [{ role: 'user', content: marked(4) }],
      cache_control: EPHEMERAL,
    });
    expect((await apiError(client.messages.create(automatic))).apiMessage).toBe(
      'A maximum of 4 blocks with cache_control may be provided. Found 5.',
    );
    // Breakpoints inside a tool_result count too; count_tokens refuses the same.
    const nested = request({
      system: systemOf(LONG),
      tools: [{ name: 'x', input_schema: { type: 'object' } }],
      messages: [
        { role: 'user', content: 'Go.' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'x', input: {} }] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 't1',
              content: marked(5),
              cache_control: EPHEMERAL,
            },
          ],
        },
      ],
    });
    const { max_tokens: _, ...counted } = nested;
    expect((await apiError(client.messages.countTokens(counted))).apiMessage).toBe(
      'A maximum of 4 blocks with cache_control may be provided. Found 6.',
    );
    // Exactly 4 is fine.
    const four = request({
      system: systemOf(LONG),
      messages: [{ role: 'user', content: marked(4) }],
    });
    expect((await client.messages.create(four)).type).toBe('message');
  });

  it("refuses a '1h' breakpoint after a '5m' one, naming both", async () => {
    const client = await serve();
    const params = request({
      system: systemOf(LONG, EPHEMERAL),
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Go.', cache_control: HOUR_TTL }] },
      ],
    });
    const error = await apiError(client.messages.create(params));
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect(error.apiMessage).toBe(
      "A cache_control with ttl '1h' must come before any with ttl '5m' in the prompt (tools, then system, then messages): found one at `messages.0.content.0.cache_control`, after the '5m' one at `system.0.cache_control`",
    );
    // The top-level one stands at the end of the prompt.
    const automatic = request({ cache_control: HOUR_TTL });
    expect((await apiError(client.messages.create(automatic))).apiMessage).toContain(
      "found one at `cache_control`, after the '5m' one at `system.0.cache_control`",
    );
  });

  it('neither writes nor reads a prefix below the model’s minimum, without an error', async () => {
    const client = await serve();
    // About 2,100 tokens: enough for most models (1,024), not for Opus 4.6 (4,096).
    const opus = request({ model: 'claude-opus-4-6' });
    const total = await totalOf(client, opus);
    expect(prefixTokens(opus, { system: 0 })).toBeLessThan(4096);
    expect(await send(client, opus)).toEqual(nothing(total));
    expect(await send(client, opus)).toEqual(nothing(total));
    const short = request({ system: systemOf('Be brief.', EPHEMERAL) });
    expect(await send(client, short)).toEqual(nothing(await totalOf(client, short)));
  });

  it('keeps the documented minimums in one table', () => {
    expect(minimumCacheableTokens('claude-opus-4-5-20251101')).toBe(4096);
    expect(minimumCacheableTokens('claude-opus-4-6')).toBe(4096);
    expect(minimumCacheableTokens('claude-haiku-4-5-20251001')).toBe(4096);
    expect(minimumCacheableTokens('claude-sonnet-4-6')).toBe(2048);
    expect(minimumCacheableTokens('claude-3-5-haiku-20241022')).toBe(2048);
    expect(minimumCacheableTokens('claude-3-haiku-20240307')).toBe(2048);
    expect(minimumCacheableTokens('claude-haiku-3')).toBe(2048);
    expect(minimumCacheableTokens('claude-opus-4-1-20250805')).toBe(1024);
    expect(minimumCacheableTokens('claude-sonnet-4-5-20250929')).toBe(1024);
    expect(minimumCacheableTokens('claude-3-7-sonnet-20250219')).toBe(1024);
    expect(minimumCacheableTokens('cohort-scripted')).toBe(1024);
  });

  it('writes nothing for a request that fails', async () => {
    const client = await serve();
    const steps: ScriptStep[] = [{ text: 'ok', error: { status: 529 }, faultAttempts: 1 }];
    const params = request({ system: systemOf(`${LONG}\n${scriptBlock(steps)}`, EPHEMERAL) });
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    const retry = { headers: { 'x-cohort-attempt': '1' } };
    expect((await apiError(client.messages.create(params))).status).toBe(529);
    expect(countsOf((await client.messages.create(params, retry)).usage)).toEqual(
      wrote(total, prefix),
    );
    expect(countsOf((await client.messages.create(params, retry)).usage)).toEqual(
      read(total, prefix),
    );
  });
});

describe('prompt caching: lifetimes on the server clock', () => {
  it('keeps an entry 5 minutes, refreshed by each read', async () => {
    const client = await serve();
    const params = request();
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    expect(await send(client, params)).toEqual(wrote(total, prefix));
    skip(4 * MINUTE);
    expect(await send(client, params)).toEqual(read(total, prefix));
    // 8 minutes after the write, 4 after the read that refreshed it.
    skip(4 * MINUTE);
    expect(await send(client, params)).toEqual(read(total, prefix));
    skip(5 * MINUTE + 1000);
    expect(await send(client, params)).toEqual(wrote(total, prefix));
  });

  it("keeps a ttl '1h' entry an hour", async () => {
    const client = await serve();
    const params = request({ system: systemOf(LONG, HOUR_TTL) });
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    expect(await send(client, params)).toEqual(wrote(total, prefix, prefix));
    skip(59 * MINUTE);
    expect(await send(client, params)).toEqual(read(total, prefix));
    skip(61 * MINUTE);
    expect(await send(client, params)).toEqual(wrote(total, prefix, prefix));
  });
});

describe('prompt caching: an entry is readable once its response has started', () => {
  it('makes a request that arrives before the first response starts write again', async () => {
    // Both responses wait 1 s (the step's delayMs) before their headers and message_start: the
    // second request arrives well within it, so it finds nothing and writes too.
    const client = await serve();
    const steps: ScriptStep[] = [{ text: 'ok', delayMs: 1000 }];
    const params = request({ system: systemOf(`${LONG}\n${scriptBlock(steps)}`, EPHEMERAL) });
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    const [first, second] = await Promise.all([
      client.messages.create(params),
      client.messages.create(params),
    ]);
    expect(countsOf(first.usage)).toEqual(wrote(total, prefix));
    expect(countsOf(second.usage)).toEqual(wrote(total, prefix));
    expect(await send(client, params)).toEqual(read(total, prefix));
  });

  it('lets a request that arrives after the first response’s message_start read', async () => {
    const client = await serve();
    const params = request();
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    // The first response is held before its first token; its message_start has been sent.
    const controller = new AbortController();
    const held = await client.messages.create(
      { ...params, stream: true },
      { headers: { 'x-cohort-ttft-ms': '600000' }, signal: controller.signal },
    );
    const events = held[Symbol.asyncIterator]();
    const start = (await events.next()).value as Anthropic.RawMessageStartEvent;
    expect(start.type).toBe('message_start');
    expect(countsOf(start.message.usage)).toEqual(wrote(total, prefix));
    expect(await send(client, params)).toEqual(read(total, prefix));
    controller.abort();
  });
});

describe('prompt caching and the limits', () => {
  it('charges the input-token limit with input and writes, never reads', async () => {
    // A full bucket holds 3,000 input tokens; the prompt is about 2,100.
    const client = await serve({ itpm: 3000 });
    const params = request();
    const total = await totalOf(client, params);
    const prefix = prefixTokens(params, { system: 0 });
    expect(total).toBeGreaterThan(1500);
    expect(await send(client, params)).toEqual(wrote(total, prefix));
    // Each read costs only its input tokens: far more requests pass than the bucket holds.
    for (let index = 0; index < 10; index++) {
      expect(await send(client, params)).toEqual(read(total, prefix));
    }
    // A prompt the cache does not hold is charged in full, and the bucket cannot pay it.
    const uncached = request({ system: systemOf(`Another prompt. ${LONG}`, EPHEMERAL) });
    const error = await apiError(client.messages.create(uncached));
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    expect(error.apiMessage).toContain('3,000 input tokens per minute');
  });

  it('refuses the second request when nothing is cached', async () => {
    const client = await serve({ itpm: 3000, cache: false });
    const params = request();
    await send(client, params);
    expect((await apiError(client.messages.create(params))).status).toBe(429);
  });

  it('counts every input token, read, written or neither, toward the spend cap', async () => {
    const params = request();
    const total = await totalOf(await serve(), params);
    await model?.close();
    const client = await serve({ spendCapTokens: 2 * total });
    const written = await client.messages.create(params);
    const cached = await client.messages.create(params);
    expect(countsOf(cached.usage)).toEqual(read(total, prefixTokens(params, { system: 0 })));
    // Had the read been free, the key would still be far below its cap.
    const error = await apiError(client.messages.create(params));
    expect(error).toBeInstanceOf(Anthropic.EnforcedSpendLimitReachedError);
    const used = 2 * total + written.usage.output_tokens + cached.usage.output_tokens;
    expect(error.apiMessage).toContain(`has used ${used.toLocaleString('en-US')} tokens`);
  });
});

describe('prompt caching off', () => {
  it('ignores cache_control with cache: false: no limit, no ttl order, every count 0', async () => {
    const client = await serve({ cache: false });
    const marked: TextBlock[] = Array.from({ length: 5 }, (_, index) => ({
      type: 'text',
      text: `Part ${index}.`,
      cache_control: index === 4 ? HOUR_TTL : EPHEMERAL,
    }));
    const params = request({
      messages: [{ role: 'user', content: marked }],
      cache_control: EPHEMERAL,
    });
    const total = await totalOf(client, params);
    expect(await send(client, params)).toEqual(nothing(total));
    expect(await send(client, params)).toEqual(nothing(total));
  });

  it('is --no-cache in cohort mock, with its help line', async () => {
    expect(parseMockFlags(['--no-cache'])).toEqual({ cache: false });
    expect(parseMockFlags([])).toEqual({});
    expect(resolveOptions({}).cache).toBe(true);
    expect(() => resolveOptions({ cache: 'no' as unknown as boolean })).toThrow(
      'Expected `cache` to be true or false, got `"no"` (string)',
    );
    expect(() => resolveOptions({ clock: 5 as unknown as () => number })).toThrow(
      'Expected `clock` to be a function that returns ms',
    );
    let help = '';
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        help += String(chunk);
        done();
      },
    });
    expect(await mockCommand(['--help'], { stdout })).toBe(0);
    expect(help).toMatch(/--no-cache +ignore cache_control/);
  });
});
