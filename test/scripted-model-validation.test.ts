import Anthropic, { type APIError } from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, scriptBlock, startScriptedModel } from '../src/testing/index.js';
import { validateRequest } from '../src/testing/request-validation.js';
import { signThinking } from '../src/testing/thinking-signature.js';

let model: ScriptedModel;
let client: Anthropic;

beforeAll(async () => {
  model = await startScriptedModel();
  client = new Anthropic({ apiKey: 'test-key', baseURL: model.url, maxRetries: 0 });
});

afterAll(async () => {
  await model.close();
});

/** Posts a raw body and returns status and parsed error body. */
async function post(body: string, path = '/v1/messages', method = 'POST') {
  const response = await fetch(`${model.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(method === 'GET' ? {} : { body }),
  });
  const json = (await response.json()) as {
    type: string;
    error: { type: string; message: string };
  };
  return { status: response.status, json, requestId: response.headers.get('request-id') };
}

async function rejection(params: unknown): Promise<APIError> {
  try {
    await client.messages.create(params as Anthropic.MessageCreateParamsNonStreaming);
  } catch (error) {
    if (error instanceof Anthropic.APIError) return error;
    throw error;
  }
  throw new Error('expected a 400');
}

/** The error message of the API error body (the SDK's `message` is the raw JSON). */
function messageOf(error: APIError): string {
  return (error.error as { error: { message: string } }).error.message;
}

/** The 400 message the SDK gets for `params`. */
async function refusal(params: unknown): Promise<string> {
  const error = await rejection(params);
  expect(error.status).toBe(400);
  return messageOf(error);
}

/** The message the SDK gets for `params`, which must be accepted. */
function accepted(params: unknown): Promise<Anthropic.Message> {
  return client.messages.create(params as Anthropic.MessageCreateParamsNonStreaming);
}

const base = { model: 'scripted', max_tokens: 64 };
const toolOf = (name: string) => ({ name, input_schema: { type: 'object' as const } });

describe('strict request validation', () => {
  it('rejects a body that is not JSON', async () => {
    const { status, json, requestId } = await post('{"model": "x", ');
    expect(status).toBe(400);
    expect(json.type).toBe('error');
    expect(json.error.type).toBe('invalid_request_error');
    expect(json.error.message).toMatch(/^Expected the request body to be JSON, got a parse error/);
    expect(requestId).toMatch(/^req_/);
  });

  it('rejects a missing model and a bad max_tokens, naming what arrived', async () => {
    const noModel = await post(
      JSON.stringify({ max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(noModel.json.error.message).toBe(
      'Expected `model` to be a non-empty string, got nothing',
    );
    const badMax = await post(
      JSON.stringify({ model: 'm', max_tokens: 0, messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(badMax.json.error.message).toBe(
      'Expected `max_tokens` to be a positive integer, got `0` (number)',
    );
  });

  it('rejects empty messages and a first message from the assistant', async () => {
    const empty = await rejection({ ...base, messages: [] });
    expect(empty.status).toBe(400);
    expect(messageOf(empty)).toContain(
      'Expected `messages` to be a non-empty array, got `[]` (array)',
    );
    const assistantFirst = await rejection({
      ...base,
      messages: [{ role: 'assistant', content: 'hi' }],
    });
    expect(messageOf(assistantFirst)).toContain('Expected `messages.0.role` to be "user"');
  });

  it('merges consecutive same-role messages instead of refusing them, as the real API does', async () => {
    const message = await client.messages.create({
      ...base,
      messages: [
        { role: 'user', content: 'one' },
        { role: 'user', content: 'two' },
      ],
    });
    expect(message.stop_reason).toBe('end_turn');
    const assistantFirst = await rejection({
      ...base,
      messages: [
        { role: 'assistant', content: 'one' },
        { role: 'assistant', content: 'two' },
        { role: 'user', content: 'three' },
      ],
    });
    expect(messageOf(assistantFirst)).toContain(
      'Expected `messages.0.role` to be "user" (the first message must be from the user), got `"assistant"` (string)',
    );
  });

  it('rejects a tool_use left unanswered in the next user message', async () => {
    const error = await rejection({
      ...base,
      tools: [toolOf('read_file')],
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'toolu_1', name: 'read_file', input: {} }],
        },
        { role: 'user', content: 'I ignore your tool call.' },
      ],
    });
    expect(messageOf(error)).toContain(
      'Expected a tool_result for tool_use `toolu_1` (read_file) of messages.1 in messages.2',
    );
  });

  it('rejects a tool_result that answers no tool_use of the previous message, or answers twice', async () => {
    const assistant = {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }],
    };
    const stray = await rejection({
      ...base,
      tools: [toolOf('x')],
      messages: [
        { role: 'user', content: 'go' },
        assistant,
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_9', content: 'r' }] },
      ],
    });
    expect(messageOf(stray)).toContain(
      'Expected `messages.2.content.0.tool_use_id` to be the id of a tool_use in messages.1 (`toolu_1`), got `"toolu_9"`',
    );
    const twice = await rejection({
      ...base,
      tools: [toolOf('x')],
      messages: [
        { role: 'user', content: 'go' },
        assistant,
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'r' },
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'r' },
          ],
        },
      ],
    });
    expect(messageOf(twice)).toContain('an id not answered before in this message');
  });

  it('rejects text before tool_result blocks in a user message', async () => {
    const error = await rejection({
      ...base,
      tools: [toolOf('x')],
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'first' },
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'r' },
          ],
        },
      ],
    });
    expect(messageOf(error)).toContain('tool_result blocks must come before any text');
  });

  it('rejects a conversation that ends on an unanswered tool_use, and unknown block types', async () => {
    const dangling = await rejection({
      ...base,
      tools: [toolOf('x')],
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }] },
      ],
    });
    expect(messageOf(dangling)).toContain('got the end of the conversation');
    const audio = await rejection({
      ...base,
      messages: [{ role: 'user', content: [{ type: 'audio', source: {} }] }],
    });
    expect(messageOf(audio)).toBe(
      'Expected `messages.0.content.0.type` to be "text", "image", "document", "search_result" or "tool_result" (the blocks of a user message), got `"audio"` (string)',
    );
  });

  it('rejects tools without a name or an input_schema object', async () => {
    const error = await rejection({
      ...base,
      tools: [{ name: 'ok', input_schema: { type: 'object' } }, { name: 'bad' }],
      messages: [{ role: 'user', content: 'go' }],
    });
    expect(messageOf(error)).toContain(
      'Expected `tools.1.input_schema` to be an object, got nothing',
    );
  });

  it('answers 404 not_found_error for an unknown path', async () => {
    const { status, json } = await post('{}', '/v1/complete');
    expect(status).toBe(404);
    expect(json.error.type).toBe('not_found_error');
    const get = await post('', '/v1/messages', 'GET');
    expect(get.status).toBe(404);
  });
});

describe('script errors', () => {
  it('answers 400 when the script has fewer steps than the conversation needs', async () => {
    const error = await rejection({
      ...base,
      messages: [
        { role: 'user', content: scriptBlock({ steps: [{ text: 'only one' }] }) },
        { role: 'assistant', content: 'only one' },
        { role: 'user', content: 'and now?' },
      ],
    });
    expect(error.status).toBe(400);
    expect(messageOf(error)).toContain(
      'cohort-script exhausted: conversation is at assistant turn 1 but the script has 1 steps',
    );
  });

  it('answers 400 for a malformed script, saying what was expected', async () => {
    const badJson = await rejection({
      ...base,
      messages: [{ role: 'user', content: '```cohort-script\n{"steps": [\n```' }],
    });
    expect(messageOf(badJson)).toContain('Expected the cohort-script to be JSON');
    const typo = await rejection({
      ...base,
      messages: [{ role: 'user', content: '```cohort-script\n{"steps": [{"delay": 5}]}\n```' }],
    });
    expect(messageOf(typo)).toContain('expected `steps.0` to have only the keys');
    expect(messageOf(typo)).toContain('got `delay`');
    const unclosed = await rejection({
      ...base,
      messages: [{ role: 'user', content: '```cohort-script\n{"steps": []}' }],
    });
    expect(messageOf(unclosed)).toContain('closing the ```cohort-script block');
  });

  it('counts 400s in stats', async () => {
    const before = model.stats.rejected400;
    await post('nope');
    expect(model.stats.rejected400).toBe(before + 1);
  });
});

describe('review fixes: content the real API refuses or accepts', () => {
  const hi = { role: 'user', content: 'hi' };

  it('answers a merged run of 200,000 blocks instead of crashing', async () => {
    const blocks = Array.from({ length: 200_000 }, () => ({ type: 'text', text: 'x' }));
    const message = await accepted({
      ...base,
      messages: [hi, { role: 'user', content: blocks }],
    });
    expect(message.type).toBe('message');
    // The server is still up.
    expect((await accepted({ ...base, messages: [hi] })).type).toBe('message');
  });

  it('refuses empty and whitespace-only text blocks with the real rule', async () => {
    const text = (value: string) => ({
      ...base,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: value },
          ],
        },
      ],
    });
    expect(await refusal(text(''))).toBe(
      'messages: text content blocks must be non-empty. Expected `messages.0.content.1.text` to be a non-empty string, got `""` (string)',
    );
    expect(await refusal(text(' \n'))).toBe(
      'messages: text content blocks must contain non-whitespace text. Expected `messages.0.content.1.text` to be a string with a non-whitespace character, got `" \\n"` (string)',
    );
    expect(await refusal({ ...base, messages: [{ role: 'user', content: '  ' }] })).toContain(
      'messages: text content blocks must contain non-whitespace text. Expected `messages.0.content` to be',
    );
    expect(
      await refusal({ ...base, system: [{ type: 'text', text: '' }], messages: [hi] }),
    ).toContain('system: text content blocks must be non-empty. Expected `system.0.text`');
    const raw = await post(JSON.stringify(text('')));
    expect(raw.status).toBe(400);
    expect(raw.json.error.message).toMatch(/^messages: text content blocks must be non-empty\. /);
  });

  it('refuses a message with empty content, except a final assistant message', async () => {
    expect(await refusal({ ...base, messages: [{ role: 'user', content: '' }] })).toBe(
      'messages.0: user messages must have non-empty content. Expected `messages.0.content` to be a non-empty string or array, got `""` (string)',
    );
    expect(
      await refusal({
        ...base,
        messages: [hi, { role: 'assistant', content: [] }, { role: 'user', content: 'again' }],
      }),
    ).toBe(
      'messages.1: all messages must have non-empty content except for the optional final assistant message. Expected `messages.1.content` to be a non-empty string or array, got `[]` (array)',
    );
    for (const empty of ['', []]) {
      const prefilled = await accepted({
        ...base,
        messages: [hi, { role: 'assistant', content: empty }],
      });
      expect(prefilled.type).toBe('message');
    }
  });

  it('refuses empty text inside a tool_result, but accepts an empty tool result', async () => {
    const loop = (content: unknown) => ({
      ...base,
      tools: [toolOf('x')],
      messages: [
        hi,
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content }] },
      ],
    });
    expect((await accepted(loop(''))).type).toBe('message');
    expect((await accepted(loop([]))).type).toBe('message');
    expect(await refusal(loop([{ type: 'text', text: '' }]))).toContain(
      'messages: text content blocks must be non-empty. Expected `messages.2.content.0.content.0.text`',
    );
  });

  it('refuses unknown keys inside blocks, sources and tools as extra inputs', async () => {
    const user = (block: unknown) => ({ ...base, messages: [{ role: 'user', content: [block] }] });
    expect(await refusal(user({ type: 'text', text: 'hi', bogus: 1 }))).toBe(
      'messages.0.content.0.bogus: Extra inputs are not permitted',
    );
    expect(
      await refusal(
        user({ type: 'image', source: { type: 'url', url: 'https://x/a.png', detail: 'high' } }),
      ),
    ).toBe('messages.0.content.0.source.detail: Extra inputs are not permitted');
    // A typo that would otherwise drop the tool's output.
    expect(
      await refusal({
        ...base,
        tools: [toolOf('x')],
        messages: [
          hi,
          {
            role: 'assistant',
            content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }],
          },
          {
            role: 'user',
            content: [{ type: 'tool_result', tool_use_id: 'toolu_1', contents: 'r' }],
          },
        ],
      }),
    ).toBe('messages.2.content.0.contents: Extra inputs are not permitted');
    expect(await refusal({ ...base, tools: [{ ...toolOf('x'), bogus: 1 }], messages: [hi] })).toBe(
      'tools.0.bogus: Extra inputs are not permitted',
    );
    expect(
      await refusal({
        ...base,
        tools: [{ type: 'bash_20250124', name: 'bash', max_uses: 3 }],
        messages: [hi],
      }),
    ).toBe('tools.0.max_uses: Extra inputs are not permitted');
    expect(
      await refusal({ ...base, messages: [{ role: 'user', content: 'hi', name: 'me' }] }),
    ).toBe('messages.0.name: Extra inputs are not permitted');
  });

  it('accepts the optional keys SDK 1.14 gives blocks and tools', async () => {
    const thought = 'Plan: call x.';
    const message = await accepted({
      ...base,
      tools: [
        {
          ...toolOf('x'),
          description: 'X.',
          strict: true,
          defer_loading: false,
          eager_input_streaming: null,
          input_examples: [{}],
          allowed_callers: ['direct'],
          cache_control: { type: 'ephemeral' },
        },
        {
          type: 'web_fetch_20250910',
          name: 'web_fetch',
          max_uses: 2,
          citations: { enabled: true },
        },
      ],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'go', citations: null }] },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: thought, signature: signThinking(thought) },
            {
              type: 'tool_use',
              id: 'toolu_1',
              name: 'x',
              input: {},
              caller: { type: 'direct' },
              cache_control: { type: 'ephemeral' },
            },
          ],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'r', is_error: false }],
        },
      ],
    });
    expect(message.type).toBe('message');
    // Thinking blocks take no cache_control in SDK 1.14.
    expect(
      await refusal({
        ...base,
        messages: [
          hi,
          {
            role: 'assistant',
            content: [
              {
                type: 'thinking',
                thinking: thought,
                signature: signThinking(thought),
                cache_control: { type: 'ephemeral' },
              },
            ],
          },
        ],
      }),
    ).toBe('messages.1.content.0.cache_control: Extra inputs are not permitted');
  });

  it('refuses temperature and top_p together', async () => {
    const both = { ...base, temperature: 0.5, top_p: 0.9, messages: [hi] };
    const expected =
      '`temperature` and `top_p` cannot both be specified for this model. Please use only one.';
    expect(await refusal(both)).toBe(expected);
    const raw = await post(JSON.stringify(both));
    expect(raw.json.error.message).toBe(expected);
    expect((await accepted({ ...base, temperature: 0.5, messages: [hi] })).type).toBe('message');
    expect((await accepted({ ...base, top_p: 0.9, messages: [hi] })).type).toBe('message');
  });

  it('with thinking enabled, refuses a prefill that does not start with thinking', async () => {
    const thinking = { type: 'enabled', budget_tokens: 1024 };
    const big = { ...base, max_tokens: 2048, thinking };
    expect(
      await refusal({ ...big, messages: [hi, { role: 'assistant', content: 'The answer is' }] }),
    ).toBe(
      'Expected `messages.1.content.0.type` to be "thinking" or "redacted_thinking" (with thinking enabled, a final assistant message, messages.1, must start with a thinking block; or drop the prefill, or disable thinking), got `"text"` (string)',
    );
    const thought = 'I know this.';
    const prefill = {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: thought, signature: signThinking(thought) },
        { type: 'text', text: 'The answer is' },
      ],
    };
    expect((await accepted({ ...big, messages: [hi, prefill] })).type).toBe('message');
    // Without thinking, a prefill needs none.
    const plain = await accepted({
      ...base,
      messages: [hi, { role: 'assistant', content: 'The answer is' }],
    });
    expect(plain.type).toBe('message');
  });

  it('refuses tool_use and tool_result blocks in a request that defines no tools', async () => {
    const body = {
      ...base,
      messages: [
        hi,
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'r' }] },
      ],
    };
    const expected =
      'Requests which include `tool_use` or `tool_result` blocks must define tools. Expected `tools` to be a non-empty array, got no tools (`messages.1.content.0` is a tool_use)';
    expect(await refusal(body)).toBe(expected);
    expect(await refusal({ ...body, tools: [] })).toBe(expected);
    const raw = await post(JSON.stringify(body));
    expect(raw.status).toBe(400);
    expect(raw.json.error.message).toBe(expected);
    expect((await accepted({ ...body, tools: [toolOf('x')] })).type).toBe('message');
  });
});

describe('review fixes: SDK content the scripted model honours or names as unsupported', () => {
  const searchResult = {
    type: 'search_result',
    source: 'https://example.com/paris',
    title: 'Paris',
    content: [{ type: 'text', text: 'Paris is the capital of France.' }],
    citations: { enabled: true },
  };

  it('reads a search_result in a user message as its text', async () => {
    const message = await accepted({
      ...base,
      max_tokens: 512,
      messages: [{ role: 'user', content: [searchResult, { type: 'text', text: 'Capital?' }] }],
    });
    const text = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
    expect(text).toContain('Paris is the capital of France.');
  });

  it('accepts search_result, tool_reference and browser_state in a tool_result', async () => {
    const message = await accepted({
      ...base,
      tools: [toolOf('x'), { type: 'browser_toolset_20260801' }],
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_1',
              content: [
                searchResult,
                { type: 'tool_reference', tool_name: 'x' },
                { type: 'browser_state', tabs: [], state_changes: null },
              ],
            },
          ],
        },
      ],
    });
    expect(message.type).toBe('message');
  });

  it('refuses system-role messages and container_upload blocks as unsupported, not as mistakes', async () => {
    expect(
      await refusal({
        ...base,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hi' },
        ],
      }),
    ).toBe(
      'Expected `messages.0.role` to be "user" or "assistant" (the scripted model does not support `system` messages: put the system prompt in the top-level `system` field), got `"system"` (string)',
    );
    expect(
      await refusal({
        ...base,
        messages: [{ role: 'user', content: [{ type: 'container_upload', file_id: 'file_1' }] }],
      }),
    ).toContain('(the scripted model does not support `container_upload` blocks');
  });

  it('keeps no payload of an image, a document or a server tool block', () => {
    const checked = validateRequest({
      ...base,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'abcd' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { q: 'x' } },
            { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
          ],
        },
      ],
    });
    if (!checked.ok) throw new Error(checked.message);
    expect(checked.value.messages.map((message) => message.blocks)).toEqual([
      [
        { type: 'image', tokens: 1600 },
        { type: 'document', tokens: 1 },
      ],
      [
        { type: 'server_tool_use', wireType: 'server_tool_use' },
        { type: 'server_tool_result', wireType: 'web_search_tool_result' },
      ],
    ]);
  });
});

describe('review fixes: a PDF is charged by its pages', () => {
  /** A minimal PDF-like file: `pages` page objects, a page tree, and `padding` bytes of stream. */
  function pdf(pages: number, padding = 0): string {
    const objects = Array.from({ length: pages }, (_, i) => `${i + 3} 0 obj << /Type /Page >>`);
    const text = `%PDF-1.4\n1 0 obj << /Type /Catalog >>\n2 0 obj << /Type /Pages /Count ${pages} >>\n${objects.join('\n')}\nstream\n${'#'.repeat(padding)}\nendstream\n%%EOF`;
    return Buffer.from(text, 'latin1').toString('base64');
  }

  async function tokensOf(data: string): Promise<number> {
    const counted = await client.messages.countTokens({
      model: 'scripted',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data } },
          ],
        },
      ],
    });
    return counted.input_tokens;
  }

  it('charges 2,000 tokens a page, at least one page and at most 100', async () => {
    const one = await tokensOf(pdf(1));
    // The base64 is left out of the character count, so only the pages differ.
    expect((await tokensOf(pdf(3))) - one).toBe(4000);
    expect(await tokensOf(pdf(0))).toBe(one);
    expect((await tokensOf(pdf(150))) - one).toBe(99 * 2000);
    // 3 MB of content on 2 pages costs 2 pages, not 750,000 tokens.
    expect((await tokensOf(pdf(2, 3_000_000))) - one).toBe(2000);
  });
});
