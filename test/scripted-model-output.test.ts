import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Script,
  type ScriptedModel,
  type ScriptStep,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import type {
  MessagesRequest,
  OutputBlock,
  RequestMessage,
  RequestTool,
} from '../src/testing/messages-api.js';
import { cutPrefix, findStopSequence, shapeOutput } from '../src/testing/output-shaping.js';
import { type MessagePlan, planResponse } from '../src/testing/plan.js';
import { type PlayContext, playJson, playStream } from '../src/testing/response-player.js';
import { verifyThinking } from '../src/testing/thinking-signature.js';
import { TickScheduler } from '../src/testing/tick-scheduler.js';
import { minimalInput, minimalValue } from '../src/testing/tool-choice.js';
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

function scriptedMessages(steps: ScriptStep[]): Anthropic.MessageParam[] {
  return [{ role: 'user', content: `Go.\n${scriptBlock({ steps })}` }];
}

/** The same request streamed (finalMessage) and as JSON. */
async function both(
  params: Anthropic.MessageCreateParamsNonStreaming,
): Promise<[Anthropic.Message, Anthropic.Message]> {
  const streamed = await client.messages.stream(params).finalMessage();
  const plain = await client.messages.create(params);
  return [streamed, plain];
}

// ---- hand-built requests, for the functions behind the HTTP surface ---------------------

function userText(text: string): RequestMessage {
  return { role: 'user', blocks: [{ type: 'text', text }] };
}

function requestOf(overrides: Partial<MessagesRequest>): MessagesRequest {
  return {
    model: 'm',
    maxTokens: 1000,
    stream: false,
    system: '',
    rawSystem: undefined,
    messages: [userText('Hi.')],
    tools: [],
    rawTools: undefined,
    toolChoice: { type: 'auto', disableParallelToolUse: false },
    stopSequences: [],
    thinking: { type: 'disabled', enabled: false, budgetTokens: 0 },
    inputChars: 40,
    mediaTokens: 0,
    ...overrides,
  };
}

function messagePlan(request: MessagesRequest): MessagePlan {
  const plan = planResponse(request, 0);
  if (plan.kind !== 'message') throw new Error(`expected a message plan, got ${plan.message}`);
  return plan;
}

const objectSchema = (properties: Record<string, unknown>, required: string[]) => ({
  type: 'object',
  properties,
  required,
});

// The default policy's child: with a path in backticks it says "Reading" and calls read_file.
const childTools: RequestTool[] = [
  {
    name: 'read_file',
    type: 'custom',
    input_schema: objectSchema({ path: { type: 'string' } }, ['path']),
  },
  {
    name: 'reply',
    type: 'custom',
    input_schema: objectSchema({ result: { type: 'string' } }, ['result']),
  },
];
const childToolParams = childTools.map((tool) => ({
  name: tool.name,
  input_schema: tool.input_schema as Anthropic.Tool.InputSchema,
}));
const childPrompt = 'Digest `a.md`.';

describe('max_tokens', () => {
  it('cuts text at max_tokens × 4 characters and drops later blocks, stream and JSON alike', async () => {
    const text = 'abcdefghij'.repeat(5);
    const params = {
      model: 's',
      max_tokens: 5,
      messages: scriptedMessages([{ text, calls: [{ name: 'x', input: { a: 1 } }] }]),
    };
    const deltas: string[] = [];
    const stream = client.messages.stream(params);
    stream.on('text', (delta) => deltas.push(delta));
    const streamed = await stream.finalMessage();
    const plain = await client.messages.create(params);
    expect(deltas.join('')).toBe(text.slice(0, 20));
    for (const message of [streamed, plain]) {
      expect(message.content).toEqual([{ type: 'text', text: text.slice(0, 20) }]);
      expect(message.stop_reason).toBe('max_tokens');
      expect(message.stop_sequence).toBeNull();
      expect(message.usage.output_tokens).toBe(5);
    }
  });

  it('keeps output that fits exactly, with its own stop reason', async () => {
    const params = {
      model: 's',
      max_tokens: 5,
      messages: scriptedMessages([{ text: 'x'.repeat(20) }]),
    };
    for (const message of await both(params)) {
      expect(message.content).toEqual([{ type: 'text', text: 'x'.repeat(20) }]);
      expect(message.stop_reason).toBe('end_turn');
      expect(message.usage.output_tokens).toBe(5);
    }
  });

  it('never cuts between the two halves of a surrogate pair', async () => {
    // Budget 4 UTF-16 units: "a" and one emoji take 3, the next emoji would need units 4 and 5.
    const params = {
      model: 's',
      max_tokens: 1,
      messages: scriptedMessages([{ text: `a${'😀'.repeat(5)}` }]),
    };
    for (const message of await both(params)) {
      expect(message.content).toEqual([{ type: 'text', text: 'a😀' }]);
      expect(message.stop_reason).toBe('max_tokens');
    }
  });

  it('streams a tool_use cut mid-input with the JSON generated so far; JSON gives input {}', async () => {
    const input = { path: 'notes/a.md', body: 'x'.repeat(60) };
    const json = JSON.stringify(input);
    const params = {
      model: 's',
      max_tokens: 6,
      messages: scriptedMessages([{ text: 'Hi.', calls: [{ name: 'write', input }] }]),
    };
    const partials: string[] = [];
    const stream = client.messages.stream(params);
    stream.on('streamEvent', (event) => {
      if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta') {
        partials.push(event.delta.partial_json);
      }
    });
    const streamed = await stream.finalMessage();
    expect(partials.join('')).toBe(json.slice(0, 24 - 3));
    expect(streamed.stop_reason).toBe('max_tokens');
    expect(streamed.usage.output_tokens).toBe(6);
    expect(streamed.content[0]).toEqual({ type: 'text', text: 'Hi.' });
    // The SDK parses the partial JSON leniently: the complete `path` survives.
    expect(streamed.content[1]).toMatchObject({ type: 'tool_use', name: 'write' });
    expect((streamed.content[1] as Anthropic.ToolUseBlock).input).toMatchObject({
      path: 'notes/a.md',
    });

    const plain = await client.messages.create(params);
    expect(plain.content).toEqual([
      { type: 'text', text: 'Hi.' },
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'write', input: {} },
    ]);
    expect(plain.stop_reason).toBe('max_tokens');
    expect(plain.usage.output_tokens).toBe(6);
  });

  it('drops a tool_use that max_tokens leaves no characters for', async () => {
    const params = {
      model: 's',
      max_tokens: 2,
      messages: scriptedMessages([{ text: '12345678', calls: [{ name: 'x', input: {} }] }]),
    };
    for (const message of await both(params)) {
      expect(message.content).toEqual([{ type: 'text', text: '12345678' }]);
      expect(message.stop_reason).toBe('max_tokens');
      expect(message.usage.output_tokens).toBe(2);
    }
  });
});

describe('stop_sequences', () => {
  // These go over HTTP and wait on the request side filling `stopSequences`.
  it('ends the text before the match and drops later blocks, stream and JSON alike', async () => {
    const params = {
      model: 's',
      max_tokens: 100,
      stop_sequences: ['NEVER', 'STOP'],
      messages: scriptedMessages([{ text: 'one two STOP three', calls: [{ name: 'x' }] }]),
    };
    const [streamed, plain] = await both(params);
    for (const message of [streamed, plain]) {
      expect(message.content).toEqual([{ type: 'text', text: 'one two ' }]);
      expect(message.stop_reason).toBe('stop_sequence');
      expect(message.stop_sequence).toBe('STOP');
      expect(message.usage.output_tokens).toBe(2);
    }
  });

  it('lets max_tokens win when the budget runs out before the match', async () => {
    const params = {
      model: 's',
      max_tokens: 5,
      stop_sequences: ['STOP'],
      messages: scriptedMessages([{ text: `${'a'.repeat(30)}STOP` }]),
    };
    for (const message of await both(params)) {
      expect(message.content).toEqual([{ type: 'text', text: 'a'.repeat(20) }]);
      expect(message.stop_reason).toBe('max_tokens');
      expect(message.stop_sequence).toBeNull();
    }
  });

  it('meets the match that ends first; of two ending together, the longer', () => {
    expect(findStopSequence('xabcdy', ['abcd', 'bc'])).toEqual({ sequence: 'bc', index: 2 });
    expect(findStopSequence('xabcy', ['bc', 'abc'])).toEqual({ sequence: 'abc', index: 1 });
    expect(findStopSequence('plain', ['', 'zz'])).toBeUndefined();
  });

  it('searches text only, emits no empty text block, and yields to an earlier cut', () => {
    const tool: OutputBlock = { type: 'tool_use', id: 't', name: 'x', input: { q: 'STOP' } };
    const searchedText = shapeOutput([{ type: 'text', text: 'ok' }, tool], {
      maxTokens: 100,
      stopSequences: ['STOP'],
    });
    expect(searchedText.stopReason).toBe('tool_use');
    expect(searchedText.blocks).toHaveLength(2);
    const atStart = shapeOutput([{ type: 'text', text: 'STOP here' }, tool], {
      maxTokens: 100,
      stopSequences: ['STOP'],
    });
    expect(atStart).toEqual({
      blocks: [],
      stopReason: 'stop_sequence',
      stopSequence: 'STOP',
      outputChars: 0,
      truncated: false,
    });
    // The match "STOP" would complete at character 10; the budget ends at 8.
    const cut = shapeOutput([{ type: 'text', text: '012345STOP' }], {
      maxTokens: 2,
      stopSequences: ['STOP'],
    });
    expect(cut.blocks).toEqual([{ type: 'text', text: '012345ST' }]);
    expect(cut.stopReason).toBe('max_tokens');
  });

  it('cuts prefixes on code-point boundaries', () => {
    expect(cutPrefix('a😀b', 2)).toBe('a');
    expect(cutPrefix('a😀b', 3)).toBe('a😀');
    expect(cutPrefix('abc', 0)).toBe('');
    expect(cutPrefix('abc', 9)).toBe('abc');
  });
});

describe('minimal tool input from input_schema', () => {
  it('gives each required property a value of its type, and leaves optional ones out', () => {
    const schema = objectSchema(
      {
        name: { type: 'string' },
        count: { type: 'integer' },
        ratio: { type: 'number' },
        flag: { type: 'boolean' },
        tags: { type: 'array', items: { type: 'string' } },
        nothing: { type: 'null' },
        optional: { type: 'string' },
      },
      ['name', 'count', 'ratio', 'flag', 'tags', 'nothing'],
    );
    expect(minimalInput(schema)).toEqual({
      name: '',
      count: 0,
      ratio: 0,
      flag: false,
      tags: [],
      nothing: null,
    });
  });

  it('prefers const, then the first enum value, then the first non-null type', () => {
    expect(minimalValue({ type: 'string', const: 'fixed' })).toBe('fixed');
    expect(minimalValue({ type: 'string', enum: ['fast', 'slow'] })).toBe('fast');
    expect(minimalValue({ type: ['null', 'integer'] })).toBe(0);
    expect(minimalValue({ anyOf: [{ type: 'boolean' }, { type: 'string' }] })).toBe(false);
    expect(minimalValue({ oneOf: [{ const: 7 }] })).toBe(7);
  });

  it('builds nested objects from their own required lists', () => {
    const schema = objectSchema(
      {
        target: objectSchema({ host: { type: 'string' }, port: { type: 'integer' } }, ['host']),
        untyped: { properties: { inner: { type: 'boolean' } }, required: ['inner'] },
      },
      ['target', 'untyped'],
    );
    expect(minimalInput(schema)).toEqual({ target: { host: '' }, untyped: { inner: false } });
  });

  it('gives {} without a schema or required list, and null to what it cannot type', () => {
    expect(minimalInput(undefined)).toEqual({});
    expect(minimalInput({ type: 'object', properties: { a: { type: 'string' } } })).toEqual({});
    expect(minimalInput({ type: 'object', required: ['ghost', 42] })).toEqual({ ghost: null });
    expect(minimalValue({ description: 'anything' })).toBeNull();
  });
});

describe('tool_choice on the default policy (planResponse)', () => {
  const child = (toolChoice: MessagesRequest['toolChoice'], tools = childTools) =>
    messagePlan(requestOf({ tools, toolChoice, messages: [userText(childPrompt)] }));

  it('auto keeps the policy turn: text, then the read_file call', () => {
    const plan = child({ type: 'auto', disableParallelToolUse: false });
    expect(plan.blocks).toEqual([
      { type: 'text', text: 'Reading `a.md`.' },
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'read_file', input: { path: 'a.md' } },
    ]);
  });

  it('none drops the calls, and says so when nothing else is left', () => {
    const plan = child({ type: 'none', disableParallelToolUse: false });
    expect(plan.blocks).toEqual([{ type: 'text', text: 'Reading `a.md`.' }]);
    expect(plan.stopReason).toBe('end_turn');
    const replyOnly = messagePlan(
      requestOf({
        tools: [childTools[1]!],
        toolChoice: { type: 'none', disableParallelToolUse: false },
        messages: [userText('Summarise parallel agents.')],
      }),
    );
    expect(replyOnly.blocks).toEqual([
      {
        type: 'text',
        text: 'tool_choice is "none", so I call no tool (I would have called reply).',
      },
    ]);
  });

  it('any keeps the policy call without its text, or calls the first tool', () => {
    const kept = child({ type: 'any', disableParallelToolUse: false });
    expect(kept.blocks).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'read_file', input: { path: 'a.md' } },
    ]);
    const lookup: RequestTool = {
      name: 'lookup',
      type: 'custom',
      input_schema: objectSchema({ term: { type: 'string' }, limit: { type: 'integer' } }, [
        'term',
      ]),
    };
    const forced = messagePlan(
      requestOf({ tools: [lookup], toolChoice: { type: 'any', disableParallelToolUse: false } }),
    );
    expect(forced.blocks).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'lookup', input: { term: '' } },
    ]);
    expect(forced.stopReason).toBe('tool_use');
  });

  it('tool calls exactly the named tool: the policy call of it, or a minimal one', () => {
    const kept = child({ type: 'tool', name: 'read_file', disableParallelToolUse: false });
    expect(kept.blocks).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'read_file', input: { path: 'a.md' } },
    ]);
    const forced = child({ type: 'tool', name: 'reply', disableParallelToolUse: false });
    expect(forced.blocks).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'reply', input: { result: '' } },
    ]);
    const clientTool: RequestTool = { name: 'memory', type: 'memory_20250818' };
    const noSchema = child({ type: 'tool', name: 'memory', disableParallelToolUse: false }, [
      ...childTools,
      clientTool,
    ]);
    expect(noSchema.blocks).toEqual([
      {
        type: 'tool_use',
        id: 'toolu_cohort_0_0',
        name: 'memory',
        input: { command: 'view', path: '/memories' },
      },
    ]);
  });

  it('disable_parallel_tool_use keeps only the first of a fan-out', () => {
    const rootTools: RequestTool[] = ['agent', 'list_files'].map((name) => ({
      name,
      type: 'custom',
      input_schema: { type: 'object' },
    }));
    const messages: RequestMessage[] = [
      userText('Survey.'),
      {
        role: 'assistant',
        blocks: [{ type: 'tool_use', id: 't1', name: 'list_files', input: { pattern: '**/*' } }],
      },
      {
        role: 'user',
        blocks: [{ type: 'tool_result', tool_use_id: 't1', content: 'a.md\nb.md\nc.md' }],
      },
    ];
    const fanOut = (disableParallelToolUse: boolean) =>
      messagePlan(
        requestOf({
          tools: rootTools,
          messages,
          toolChoice: { type: 'auto', disableParallelToolUse },
        }),
      ).blocks.filter((block) => block.type === 'tool_use');
    expect(fanOut(false)).toHaveLength(3);
    const single = fanOut(true);
    expect(single).toHaveLength(1);
    expect(single[0]).toMatchObject({ name: 'agent', input: { title: 'a.md' } });
  });

  it('leaves a script alone: it is authoritative', () => {
    const plan = messagePlan(
      requestOf({
        system: scriptBlock({
          steps: [{ text: 'Scripted.', calls: [{ name: 'x' }, { name: 'y' }] }],
        }),
        toolChoice: { type: 'none', disableParallelToolUse: true },
      }),
    );
    expect(plan.blocks.map((block) => block.type)).toEqual(['text', 'tool_use', 'tool_use']);
  });
});

describe('tool_choice over HTTP', () => {
  // These wait on the request side filling `toolChoice`.
  const params = (tool_choice: Anthropic.ToolChoice) => ({
    model: 's',
    max_tokens: 200,
    tools: childToolParams,
    tool_choice,
    messages: [{ role: 'user' as const, content: childPrompt }],
  });

  it('none, any and tool through the official SDK', async () => {
    const none = await client.messages.create(params({ type: 'none' }));
    expect(none.content).toEqual([{ type: 'text', text: 'Reading `a.md`.' }]);
    expect(none.stop_reason).toBe('end_turn');
    const any = await client.messages.stream(params({ type: 'any' })).finalMessage();
    expect(any.content).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'read_file', input: { path: 'a.md' } },
    ]);
    const forced = await client.messages.create(params({ type: 'tool', name: 'reply' }));
    expect(forced.content).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'reply', input: { result: '' } },
    ]);
    expect(forced.stop_reason).toBe('tool_use');
  });

  it('tool and disable_parallel_tool_use through a raw fetch', async () => {
    const post = async (body: unknown) => {
      const response = await fetch(`${model.url}/v1/messages`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'test-key',
          'anthropic-version': '2023-06-01',
        },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as Anthropic.Message;
    };
    const forced = await post(
      params({ type: 'tool', name: 'reply', disable_parallel_tool_use: true }),
    );
    expect(forced.content).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'reply', input: { result: '' } },
    ]);
    const none = await post(params({ type: 'none' }));
    expect(none.content.map((block) => block.type)).toEqual(['text']);
  });
});

describe('thinking', () => {
  const thinkingRequest = (overrides: Partial<MessagesRequest> = {}) =>
    requestOf({
      tools: childTools,
      messages: [userText(childPrompt)],
      thinking: { type: 'enabled', enabled: true, budgetTokens: 1024 },
      ...overrides,
    });

  it('opens the response with a signed, deterministic thinking block (planResponse)', () => {
    const plan = messagePlan(thinkingRequest());
    const [thinking, ...rest] = plan.blocks;
    expect(thinking?.type).toBe('thinking');
    if (thinking?.type !== 'thinking') return;
    expect(thinking.thinking).toBe(
      'Turn 0: the request asks about "Digest `a.md`.". Tools offered: read_file, reply. I will call read_file.',
    );
    expect(verifyThinking(thinking.thinking, thinking.signature)).toBe(true);
    expect(rest.map((block) => block.type)).toEqual(['text', 'tool_use']);
    const chars = thinking.thinking.length + 'Reading `a.md`.'.length + '{"path":"a.md"}'.length;
    expect(plan.outputChars).toBe(chars);
    expect(plan.outputTokens).toBe(Math.ceil(chars / 4));
    expect(messagePlan(thinkingRequest()).blocks[0]).toEqual(thinking);
  });

  it('keeps within budget_tokens × 4 characters and counts toward max_tokens', () => {
    const small = messagePlan(
      thinkingRequest({ thinking: { type: 'enabled', enabled: true, budgetTokens: 3 } }),
    );
    expect(small.blocks[0]).toMatchObject({ type: 'thinking', thinking: 'Turn 0: the ' });
    const cut = messagePlan(thinkingRequest({ maxTokens: 2 }));
    expect(cut.blocks).toHaveLength(1);
    const [thinking] = cut.blocks;
    if (thinking?.type !== 'thinking') throw new Error('expected a thinking block');
    expect(thinking.thinking).toBe('Turn 0: ');
    expect(verifyThinking(thinking.thinking, thinking.signature)).toBe(true);
    expect(cut.stopReason).toBe('max_tokens');
    expect(cut.outputTokens).toBe(2);
  });

  // Over HTTP, waiting on the request side filling `thinking`.
  it('streams thinking_delta events and one signature_delta, and sends the same block as JSON', async () => {
    const params = {
      model: 's',
      max_tokens: 2048,
      thinking: { type: 'enabled' as const, budget_tokens: 1024 },
      messages: scriptedMessages([{ text: 'Answer.' }]),
    };
    const events: Anthropic.MessageStreamEvent[] = [];
    const stream = client.messages.stream(params);
    stream.on('streamEvent', (event) => events.push(event));
    const streamed = await stream.finalMessage();
    const starts = events.filter((event) => event.type === 'content_block_start');
    expect(starts[0]).toMatchObject({
      index: 0,
      content_block: { type: 'thinking', thinking: '', signature: '' },
    });
    const deltas = events.flatMap((event) =>
      event.type === 'content_block_delta' && event.index === 0 ? [event.delta] : [],
    );
    const signatures = deltas.filter((delta) => delta.type === 'signature_delta');
    expect(signatures).toHaveLength(1);
    expect(deltas.at(-1)?.type).toBe('signature_delta');
    const [thinking, text] = streamed.content;
    if (thinking?.type !== 'thinking') throw new Error('expected a thinking block first');
    expect(thinking.thinking).toMatch(/^Turn 0: the request asks about "Go\./);
    expect(verifyThinking(thinking.thinking, thinking.signature)).toBe(true);
    expect(text).toEqual({ type: 'text', text: 'Answer.' });
    const plain = await client.messages.create(params);
    expect(plain.content).toEqual(streamed.content);
  });
});

describe('usage and stop_sequence on the wire', () => {
  it('carries the input, output and cache counts in message_start, message_delta and JSON', async () => {
    const params = {
      model: 's',
      max_tokens: 100,
      messages: scriptedMessages([{ text: 'x'.repeat(41) }]),
    };
    let startUsage: Anthropic.Usage | undefined;
    let delta: Anthropic.MessageStreamEvent | undefined;
    const stream = client.messages.stream(params);
    stream.on('streamEvent', (event) => {
      // Copied: the SDK goes on updating message_start's message as its snapshot.
      if (event.type === 'message_start') startUsage = { ...event.message.usage };
      if (event.type === 'message_delta') delta = event;
    });
    const streamed = await stream.finalMessage();
    const inputTokens = streamed.usage.input_tokens;
    expect(inputTokens).toBeGreaterThan(0);
    // Nothing is marked for caching: the cache counts are 0, split by ttl as the SDK's Usage has it.
    const noCache = {
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    };
    expect(startUsage).toEqual({
      input_tokens: inputTokens,
      output_tokens: 1,
      ...noCache,
      service_tier: 'standard',
    });
    expect(delta).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: {
        input_tokens: inputTokens,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens: 11,
      },
    });
    const plain = await client.messages.create(params);
    expect(plain.usage).toEqual({
      input_tokens: inputTokens,
      output_tokens: 11,
      ...noCache,
      service_tier: 'standard',
    });
  });
});

describe('retry-after on scripted 429s', () => {
  const failing = (error: NonNullable<ScriptStep['error']>) =>
    client.messages.create({ model: 's', max_tokens: 10, messages: scriptedMessages([{ error }]) });

  it('sends retry-after: 1 when the script sets neither header', async () => {
    const error = await apiError(failing({ status: 429 }));
    expect(error.status).toBe(429);
    expect(error.headers?.get('retry-after')).toBe('1');
    expect(error.headers?.get('retry-after-ms')).toBeNull();
  });

  it('derives retry-after from retryAfterMs, rounded up, at least 1', async () => {
    const rounded = await apiError(failing({ status: 429, retryAfterMs: 2500 }));
    expect(rounded.headers?.get('retry-after')).toBe('3');
    expect(rounded.headers?.get('retry-after-ms')).toBe('2500');
    const short = await apiError(failing({ status: 429, retryAfterMs: 10 }));
    expect(short.headers?.get('retry-after')).toBe('1');
  });

  it('derives retry-after-ms from retryAfter, and leaves other statuses alone', async () => {
    const seconds = await apiError(failing({ status: 429, retryAfter: 2 }));
    expect(seconds.headers?.get('retry-after')).toBe('2');
    expect(seconds.headers?.get('retry-after-ms')).toBe('2000');
    const overloaded = await apiError(failing({ status: 529 }));
    expect(overloaded.headers?.get('retry-after')).toBeNull();
  });

  it('sends it on a mid-stream 429 that a JSON request gets as a plain error', async () => {
    const error = await apiError(failing({ status: 429, midStream: true }));
    expect(error.status).toBe(429);
    expect(error.headers?.get('retry-after')).toBe('1');
  });
});

describe('onOutput', () => {
  let server: Server;
  let scheduler: TickScheduler;
  let nextPlay: (response: ServerResponse) => void = () => {};

  beforeAll(async () => {
    scheduler = new TickScheduler();
    server = createServer((_request, response) => nextPlay(response));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  });

  afterAll(async () => {
    scheduler.close();
    server.closeAllConnections();
    server.close();
  });

  /** Plays the plan of `steps` to one real HTTP request and collects the onOutput calls. */
  async function play(
    steps: Script['steps'],
    options: { stream: boolean; charsPerMs?: number },
  ): Promise<{ plan: MessagePlan; calls: number[] }> {
    const plan = messagePlan(requestOf({ system: scriptBlock({ steps }) }));
    const calls: number[] = [];
    nextPlay = (response) => {
      const context: PlayContext = {
        response,
        scheduler,
        identity: { messageId: 'msg_test', model: 'm' },
        requestId: 'req_test',
        ttftMs: 0,
        charsPerMs: options.charsPerMs ?? 0,
        chunkChars: 4,
        onDeliberateClose: () => {},
        onOutput: (chars) => calls.push(chars),
      };
      if (options.stream) playStream(plan, context);
      else playJson(plan, context);
    };
    const { port } = server.address() as AddressInfo;
    try {
      const response = await fetch(`http://127.0.0.1:${port}/`);
      await response.text();
    } catch {
      // The disconnect fault breaks the response on purpose.
    }
    return { plan, calls };
  }

  const step: ScriptStep = { text: 'x'.repeat(30), calls: [{ name: 'x', input: { a: 'bcd' } }] };

  it('reports an unpaced stream in one call and a JSON body in one call', async () => {
    for (const stream of [true, false]) {
      const { plan, calls } = await play([step], { stream });
      expect(plan.outputChars).toBe(30 + '{"a":"bcd"}'.length);
      expect(calls).toEqual([plan.outputChars]);
    }
  });

  it('reports a paced stream write by write, adding up to the whole output', async () => {
    const { plan, calls } = await play([step], { stream: true, charsPerMs: 4 });
    expect(calls.length).toBeGreaterThan(1);
    expect(calls.reduce((sum, chars) => sum + chars, 0)).toBe(plan.outputChars);
  });

  it('reports only what was written before a fault, and nothing for a JSON disconnect', async () => {
    const { calls: broken } = await play([{ ...step, disconnect: true }], { stream: true });
    expect(broken).toEqual([4]);
    const { calls: failed } = await play([{ ...step, error: { status: 500, midStream: true } }], {
      stream: true,
    });
    expect(failed).toEqual([4]);
    const { calls: none } = await play([{ ...step, disconnect: true }], { stream: false });
    expect(none).toEqual([]);
  });
});

describe('tool_choice forces only tools the scripted model can call', () => {
  let server: ScriptedModel;
  let sdk: Anthropic;
  beforeAll(async () => {
    server = await startScriptedModel();
    sdk = new Anthropic({ apiKey: 'k', baseURL: server.url, maxRetries: 0 });
  });
  afterAll(async () => {
    await server.close();
  });
  const ask = { model: 's', max_tokens: 200, messages: [{ role: 'user' as const, content: 'hi' }] };

  it('calls a client-run Anthropic tool with an input its client can act on', async () => {
    const message = await sdk.messages.create({
      ...ask,
      tools: [
        { type: 'web_search_20250305', name: 'web_search' },
        { type: 'bash_20250124', name: 'bash' },
      ],
      tool_choice: { type: 'any' },
    });
    expect(message.content).toEqual([
      expect.objectContaining({ type: 'tool_use', name: 'bash', input: { command: 'true' } }),
    ]);
  });

  it('refuses to force a server tool, by name', async () => {
    const error = await sdk.messages
      .create({
        ...ask,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
        tool_choice: { type: 'tool', name: 'web_search' },
      })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect((error as { error: { error: { message: string } } }).error.error.message).toMatch(
      /tool_choice names `web_search` \(web_search_20250305\), which the scripted model cannot call/,
    );
  });
});
