import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Script,
  type ScriptedModel,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';

let model: ScriptedModel;
let client: Anthropic;

beforeAll(async () => {
  model = await startScriptedModel({ chunkChars: 3 });
  client = new Anthropic({ apiKey: 'test-key', baseURL: model.url, maxRetries: 0 });
});

afterAll(async () => {
  await model.close();
});

function scripted(script: Script, prompt = 'Go.'): Anthropic.MessageParam[] {
  return [{ role: 'user', content: `${prompt}\n\n${scriptBlock(script)}` }];
}

describe('streaming', () => {
  it('streams a text block as many text deltas', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.';
    const stream = client.messages.stream({
      model: 'scripted',
      max_tokens: 100,
      messages: scripted({ steps: [{ text }] }),
    });
    const deltas: string[] = [];
    stream.on('text', (delta) => deltas.push(delta));
    const message = await stream.finalMessage();
    expect(deltas.length).toBe(Math.ceil(text.length / 3));
    expect(deltas.join('')).toBe(text);
    expect(message.content).toEqual([{ type: 'text', text }]);
    expect(message.stop_reason).toBe('end_turn');
    expect(message.stop_sequence).toBeNull();
    expect(message.model).toBe('scripted');
  });

  it('streams tool input in many input_json_delta chunks that parse to the same object', async () => {
    const input = {
      path: 'src/index.ts',
      options: { depth: 3, tags: ['a', 'b', 'c'], nested: { yes: true, nothing: null } },
      note: 'quotes " and \\ backslashes and\nnewlines',
    };
    const stream = client.messages.stream({
      model: 'scripted',
      max_tokens: 100,
      messages: scripted({ steps: [{ calls: [{ name: 'lookup', input }] }] }),
    });
    const chunks: string[] = [];
    stream.on('streamEvent', (event) => {
      if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta') {
        chunks.push(event.delta.partial_json);
      }
    });
    const message = await stream.finalMessage();
    expect(chunks.length).toBeGreaterThan(10);
    expect(chunks.every((chunk) => chunk.length <= 4)).toBe(true);
    expect(JSON.parse(chunks.join(''))).toEqual(input);
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'lookup', input },
    ]);
  });

  it('keeps multibyte text (emoji, ZWJ sequences, CJK) intact across deltas', async () => {
    const text = 'Family 👩‍👩‍👧‍👦, flags 🇯🇵🇫🇷, 漢字かな交じり文, café, 𝄞 music, ok 👍🏽.';
    const stream = client.messages.stream({
      model: 'scripted',
      max_tokens: 100,
      messages: scripted({ steps: [{ text, calls: [{ name: 'echo', input: { text } }] }] }),
    });
    const deltas: string[] = [];
    stream.on('text', (delta) => deltas.push(delta));
    const message = await stream.finalMessage();
    // A lone surrogate would not survive a UTF-8 round trip.
    for (const delta of deltas) expect(Buffer.from(delta, 'utf8').toString('utf8')).toBe(delta);
    expect(deltas.length).toBeGreaterThan(10);
    expect(deltas.join('')).toBe(text);
    expect(message.content[1]).toMatchObject({ type: 'tool_use', input: { text } });
  });

  it('plays step k at assistant turn k, with reply shorthands and given ids', async () => {
    const script: Script = {
      steps: [
        { text: 'Step zero.', calls: [{ name: 'read_file', input: { path: 'a.md' } }] },
        { calls: [{ reply: { ok: true } }, { name: 'note', id: 'toolu_given' }], reply: 'done' },
        { text: 'Step two.' },
      ],
    };
    const messages = scripted(script);
    // The real API refuses tool_use and tool_result blocks in a request that defines no tools.
    const tools = ['read_file', 'reply', 'note'].map((name) => ({
      name,
      input_schema: { type: 'object' as const },
    }));
    const first = await client.messages
      .stream({ model: 's', max_tokens: 50, tools, messages })
      .finalMessage();
    expect(first.content).toEqual([
      { type: 'text', text: 'Step zero.' },
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'read_file', input: { path: 'a.md' } },
    ]);
    messages.push({ role: 'assistant', content: first.content });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_cohort_0_0', content: '# A' }],
    });
    const second = await client.messages
      .stream({ model: 's', max_tokens: 50, tools, messages })
      .finalMessage();
    expect(second.content).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_1_0', name: 'reply', input: { result: { ok: true } } },
      { type: 'tool_use', id: 'toolu_given', name: 'note', input: {} },
      { type: 'tool_use', id: 'toolu_cohort_1_2', name: 'reply', input: { result: 'done' } },
    ]);
    messages.push({ role: 'assistant', content: second.content });
    messages.push({
      role: 'user',
      content: second.content.map((block) => ({
        type: 'tool_result' as const,
        tool_use_id: block.type === 'tool_use' ? block.id : '',
        content: 'ok',
      })),
    });
    const third = await client.messages.create({ model: 's', max_tokens: 50, tools, messages });
    expect(third.content).toEqual([{ type: 'text', text: 'Step two.' }]);
  });

  it('finds a script in the system prompt, as a string or as text blocks', async () => {
    const block = scriptBlock([{ text: 'From the system prompt.' }]);
    for (const system of [block, [{ type: 'text' as const, text: `Rules.\n${block}` }]]) {
      const message = await client.messages.create({
        model: 's',
        max_tokens: 10,
        system,
        messages: [{ role: 'user', content: 'Hi.' }],
      });
      expect(message.content).toEqual([{ type: 'text', text: 'From the system prompt.' }]);
    }
  });

  it('answers a step with neither text nor calls with empty content and end_turn', async () => {
    const message = await client.messages
      .stream({ model: 's', max_tokens: 10, messages: scripted({ steps: [{}] }) })
      .finalMessage();
    expect(message.content).toEqual([]);
    expect(message.stop_reason).toBe('end_turn');
    expect(message.usage.output_tokens).toBe(1);
  });
});

describe('plain JSON responses', () => {
  it('returns a full Message the SDK parses, with a request id', async () => {
    const message = await client.messages.create({
      model: 'scripted-json',
      max_tokens: 100,
      messages: scripted({ steps: [{ text: 'Plain.', calls: [{ name: 'x', input: { a: 1 } }] }] }),
    });
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'scripted-json',
      stop_reason: 'tool_use',
      stop_sequence: null,
      content: [
        { type: 'text', text: 'Plain.' },
        { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'x', input: { a: 1 } },
      ],
    });
    expect(message.id).toMatch(/^msg_/);
    expect(message._request_id).toMatch(/^req_/);
  });
});

describe('usage', () => {
  it('estimates tokens as characters / 4, the same for stream and JSON', async () => {
    const text = 'x'.repeat(41);
    const input = { key: 'value' };
    const request = {
      model: 's',
      max_tokens: 100,
      system: 'You are terse.',
      tools: [{ name: 'x', input_schema: { type: 'object' as const } }],
      messages: scripted({ steps: [{ text, calls: [{ name: 'x', input }] }] }),
    };
    const expectedInput = Math.ceil(
      (JSON.stringify(request.system).length +
        JSON.stringify(request.messages).length +
        JSON.stringify(request.tools).length) /
        4,
    );
    const expectedOutput = Math.ceil((text.length + JSON.stringify(input).length) / 4);
    const streamed = client.messages.stream(request);
    let startUsage: Anthropic.Usage | undefined;
    streamed.on('streamEvent', (event) => {
      if (event.type === 'message_start') startUsage = { ...event.message.usage };
    });
    const fromStream = await streamed.finalMessage();
    const fromJson = await client.messages.create(request);
    expect(startUsage?.input_tokens).toBe(expectedInput);
    expect(fromStream.usage.input_tokens).toBe(expectedInput);
    expect(fromStream.usage.output_tokens).toBe(expectedOutput);
    expect(fromJson.usage.input_tokens).toBe(expectedInput);
    expect(fromJson.usage.output_tokens).toBe(expectedOutput);
  });
});

describe('tree scripts', () => {
  it('carries a child script inside the prompt of an agent call', async () => {
    const child: Script = { steps: [{ reply: 'child result' }] };
    const root: Script = {
      steps: [
        {
          calls: [
            {
              name: 'agent',
              input: { title: 'kid', prompt: `Do the thing.\n${scriptBlock(child)}` },
            },
          ],
        },
      ],
    };
    const rootMessage = await client.messages.create({
      model: 's',
      max_tokens: 100,
      messages: scripted(root),
    });
    const call = rootMessage.content[0];
    if (call?.type !== 'tool_use') throw new Error('expected a tool_use');
    const prompt = (call.input as { prompt: string }).prompt;
    const childMessage = await client.messages.create({
      model: 's',
      max_tokens: 100,
      tools: [{ name: 'reply', input_schema: { type: 'object' } }],
      messages: [{ role: 'user', content: prompt }],
    });
    expect(childMessage.content).toEqual([
      {
        type: 'tool_use',
        id: 'toolu_cohort_0_0',
        name: 'reply',
        input: { result: 'child result' },
      },
    ]);
  });
});

describe('load model', () => {
  it('delivers exact content when paced, with time to first token and jitter', async () => {
    const text = 'Paced text: 漢字 and 😀, long enough for several wake-ups of the scheduler.';
    const input = { list: Array.from({ length: 20 }, (_, index) => index) };
    const headers = { 'x-cohort-ttft-ms': '5', 'x-cohort-tps': '4000', 'x-cohort-jitter': '0.5' };
    const params = {
      model: 's',
      max_tokens: 100,
      messages: scripted({ steps: [{ text, calls: [{ name: 'x', input }], stall: { ms: 5 } }] }),
    };
    const stream = client.messages.stream(params, { headers });
    const deltas: string[] = [];
    stream.on('text', (delta) => deltas.push(delta));
    const streamed = await stream.finalMessage();
    expect(deltas.join('')).toBe(text);
    expect(streamed.content).toEqual([
      { type: 'text', text },
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'x', input },
    ]);
    const plain = await client.messages.create(params, { headers });
    expect(plain.content).toEqual(streamed.content);
  });

  it("emits 'request' with the turn, the attempt and whether it streams", async () => {
    const seen: unknown[] = [];
    const listener = (event: unknown) => seen.push(event);
    model.on('request', listener);
    const messages: Anthropic.MessageParam[] = [
      { role: 'user', content: scriptBlock([{ text: 'a' }, { text: 'b' }]) },
      { role: 'assistant', content: 'a' },
      { role: 'user', content: 'again' },
    ];
    const before = model.stats;
    await client.messages.create(
      { model: 's', max_tokens: 5, messages },
      { headers: { 'x-cohort-attempt': '2' } },
    );
    await client.messages
      .stream({
        model: 's',
        max_tokens: 5,
        messages,
        tools: [{ name: 'x', input_schema: { type: 'object' } }],
      })
      .finalMessage();
    model.off('request', listener);
    expect(seen).toEqual([
      { turn: 1, attempt: 2, stream: false, tools: [] },
      { turn: 1, attempt: 0, stream: true, tools: ['x'] },
    ]);
    const after = model.stats;
    expect(after.requests - before.requests).toBe(2);
    expect(after.streamed - before.streamed).toBe(1);
    expect(after.completed - before.completed).toBe(2);
  });
});
