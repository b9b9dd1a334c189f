import Anthropic, { type APIError } from '@anthropic-ai/sdk';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, scriptBlock, startScriptedModel } from '../src/testing/index.js';
import type { RequestMessage } from '../src/testing/messages-api.js';
import { MergedMessages } from '../src/testing/request-conversation.js';
import { checkConversation, validateRequest } from '../src/testing/request-validation.js';
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

type Params = Anthropic.MessageCreateParamsNonStreaming;
const base = { model: 'scripted', max_tokens: 2048 };
const toolX = { name: 'x', input_schema: { type: 'object' as const } };
const useX = (id = 'toolu_1') => ({ type: 'tool_use' as const, id, name: 'x', input: {} });
const resultOf = (id = 'toolu_1') => ({
  type: 'tool_result' as const,
  tool_use_id: id,
  content: 'r',
});

/** Sends `params` through the SDK; the message, or the API error. */
async function send(params: unknown): Promise<Anthropic.Message | APIError> {
  try {
    return await client.messages.create(params as Params);
  } catch (error) {
    if (error instanceof Anthropic.APIError) return error;
    throw error;
  }
}

/** The 400's readable message (the SDK's `message` is the raw JSON). */
async function refusal(params: unknown): Promise<string> {
  const outcome = await send(params);
  if (!(outcome instanceof Anthropic.APIError)) {
    throw new Error(`expected a 400, got a message: ${JSON.stringify(outcome.content)}`);
  }
  expect(outcome.status).toBe(400);
  expect(outcome.error).toMatchObject({ error: { type: 'invalid_request_error' } });
  return (outcome.error as { error: { message: string } }).error.message;
}

async function accepted(params: unknown): Promise<Anthropic.Message> {
  const outcome = await send(params);
  if (outcome instanceof Anthropic.APIError)
    throw new Error(`expected a message, got ${outcome.message}`);
  expect(outcome.type).toBe('message');
  return outcome;
}

/** The same body through a plain `fetch`, with no SDK in between. */
async function post(body: unknown) {
  const response = await fetch(`${model.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as {
    type: string;
    content?: unknown[];
    error?: { type: string; message: string };
  };
  return { status: response.status, json };
}

describe('consecutive same-role messages are merged, as the real API merges them', () => {
  const langChainLoop = {
    ...base,
    tools: [toolX],
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [useX()] },
      { role: 'user', content: [resultOf()] },
      { role: 'user', content: 'And a follow-up question.' },
    ],
  };
  const twoUsers = {
    ...base,
    messages: [
      { role: 'user', content: 'one' },
      { role: 'user', content: [{ type: 'text', text: 'two' }] },
    ],
  };

  it('accepts a tool_result message followed by a text message (LangChain), through the SDK', async () => {
    await accepted(langChainLoop);
    await accepted(twoUsers);
  });

  it('accepts the same two bodies through a raw fetch', async () => {
    for (const body of [langChainLoop, twoUsers]) {
      const { status, json } = await post(body);
      expect(status).toBe(200);
      expect(json.type).toBe('message');
    }
  });

  it('counts merged assistant messages as one turn', async () => {
    const script = scriptBlock({ steps: [{ text: 'first' }, { text: 'second' }] });
    const message = await accepted({
      ...base,
      messages: [
        { role: 'user', content: `Go.\n${script}` },
        { role: 'assistant', content: 'fir' },
        { role: 'assistant', content: 'st' },
        { role: 'user', content: 'again' },
      ],
    });
    expect(message.content).toEqual([{ type: 'text', text: 'second' }]);
  });

  it('names the index the client sent in an error, not the merged one', async () => {
    const stray = {
      ...base,
      tools: [toolX],
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [useX()] },
        { role: 'user', content: [resultOf()] },
        { role: 'user', content: [resultOf('toolu_9')] },
      ],
    };
    const expected =
      'Expected `messages.3.content.0.tool_use_id` to be the id of a tool_use in messages.1 (`toolu_1`), got `"toolu_9"` (string)';
    expect(await refusal(stray)).toBe(expected);
    const raw = await post(stray);
    expect(raw.status).toBe(400);
    expect(raw.json.error?.message).toBe(expected);
    const unanswered = await refusal({
      ...base,
      tools: [toolX],
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: 'Let me look.' },
        { role: 'assistant', content: [useX('toolu_a')] },
        { role: 'user', content: 'no' },
      ],
    });
    expect(unanswered).toBe(
      'Expected a tool_result for tool_use `toolu_a` (x) of messages.1-2 in messages.3, got none: every tool_use must be answered in the next message',
    );
  });

  it('still allows a prefilled last assistant message', async () => {
    await accepted({
      ...base,
      messages: [
        { role: 'user', content: 'Name a colour.' },
        { role: 'assistant', content: 'The colour is' },
      ],
    });
  });
});

describe('images and documents', () => {
  const bigImage = 'A'.repeat(1_000_000);
  const image = {
    type: 'image',
    source: { type: 'base64', media_type: 'image/png', data: bigImage },
  };
  const documents = [
    {
      type: 'document',
      source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0x' },
    },
    { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'plain text' } },
    {
      type: 'document',
      source: { type: 'content', content: [{ type: 'text', text: 'a chunk' }] },
      title: 'T',
      context: 'C',
      citations: { enabled: true },
      cache_control: { type: 'ephemeral', ttl: '1h' },
    },
    { type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } },
    { type: 'document', source: { type: 'file', file_id: 'file_1' } },
  ];

  it('accepts them in a user message and in a tool_result', async () => {
    await accepted({
      ...base,
      tools: [toolX],
      messages: [
        { role: 'user', content: [image, ...documents, { type: 'text', text: 'Look.' }] },
        { role: 'assistant', content: [useX()] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_1',
              content: [{ type: 'text', text: 'shot:' }, image, documents[1]],
            },
          ],
        },
      ],
    });
  });

  it('charges an image a fixed 1,600 input tokens, not its base64 size', async () => {
    const plain = await accepted({
      ...base,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    });
    const withImage = await accepted({
      ...base,
      messages: [{ role: 'user', content: [image, { type: 'text', text: 'hi' }] }],
    });
    const extra = withImage.usage.input_tokens - plain.usage.input_tokens;
    expect(extra).toBeGreaterThanOrEqual(1600);
    expect(extra).toBeLessThan(1610);
  });

  it('charges a text document its text / 4', async () => {
    const text = (chars: number) => ({
      ...base,
      messages: [
        {
          role: 'user',
          content: [
            {
              type: 'document',
              source: { type: 'text', media_type: 'text/plain', data: 'x'.repeat(chars) },
            },
          ],
        },
      ],
    });
    const small = await accepted(text(4));
    const large = await accepted(text(4004));
    expect(large.usage.input_tokens - small.usage.input_tokens).toBe(1000);
  });

  it('refuses a bad source, and media in an assistant message', async () => {
    expect(
      await refusal({
        ...base,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', source: { type: 'base64', media_type: 'image/bmp', data: 'AA' } },
            ],
          },
        ],
      }),
    ).toBe(
      'Expected `messages.0.content.0.source.media_type` to be "image/jpeg", "image/png", "image/gif" or "image/webp", got `"image/bmp"` (string)',
    );
    expect(
      await refusal({
        ...base,
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'document',
                source: { type: 'base64', media_type: 'text/plain', data: 'AA' },
              },
            ],
          },
        ],
      }),
    ).toContain('Expected `messages.0.content.0.source.media_type` to be "application/pdf"');
    expect(
      await refusal({
        ...base,
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: [image] },
        ],
      }),
    ).toContain('Expected `messages.1.content.0.type` to be "text", "tool_use", "thinking"');
    expect(
      await refusal({
        ...base,
        messages: [
          {
            role: 'user',
            content: [{ type: 'text', text: 'x', cache_control: { type: 'persistent' } }],
          },
        ],
      }),
    ).toContain('Expected `messages.0.content.0.cache_control` to be {"type": "ephemeral"');
  });
});

describe('thinking', () => {
  const thought = 'The user wants x; I will call it.';
  const thinkingLoop = (
    thinkingBlock: unknown,
    config: unknown = { type: 'enabled', budget_tokens: 1024 },
  ) => ({
    ...base,
    thinking: config,
    tools: [toolX],
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [thinkingBlock, useX()] },
      { role: 'user', content: [resultOf()] },
    ],
  });

  it('accepts a thinking block echoed back with the signature the model gave it', async () => {
    await accepted(
      thinkingLoop({ type: 'thinking', thinking: thought, signature: signThinking(thought) }),
    );
    await accepted(thinkingLoop({ type: 'redacted_thinking', data: 'opaque' }));
  });

  it('refuses an edited thinking block: the signature is invalid', async () => {
    const message = await refusal(
      thinkingLoop({
        type: 'thinking',
        thinking: `${thought} Edited.`,
        signature: signThinking(thought),
      }),
    );
    expect(message).toMatch(
      /^Expected `messages\.1\.content\.0\.signature` to be .*the signature is invalid/,
    );
  });

  it('with thinking enabled, refuses a tool loop whose assistant message does not start with thinking', async () => {
    const message = await refusal(thinkingLoop({ type: 'text', text: 'Calling x.' }));
    expect(message).toContain(
      'Expected `messages.1.content.0.type` to be "thinking" or "redacted_thinking"',
    );
    expect(message).toContain('got `"text"` (string)');
    // Adaptive thinking may skip thinking, so it asks for no echo.
    await accepted(thinkingLoop({ type: 'text', text: 'Calling x.' }, { type: 'adaptive' }));
  });

  it('asks for thinking only at the start of the loop, not in every step of it', async () => {
    await accepted({
      ...base,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      tools: [toolX],
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: thought, signature: signThinking(thought) },
            useX(),
          ],
        },
        { role: 'user', content: [resultOf()] },
        { role: 'assistant', content: [useX('toolu_2')] },
        { role: 'user', content: [resultOf('toolu_2')] },
      ],
    });
  });

  it('checks the thinking config and refuses forced tool use with manual thinking', async () => {
    const ask = (thinking: unknown, extra: object = {}) =>
      refusal({ ...base, ...extra, thinking, messages: [{ role: 'user', content: 'hi' }] });
    expect(await ask({ type: 'enabled', budget_tokens: 1000 })).toBe(
      'Expected `thinking.budget_tokens` to be an integer of at least 1024 and less than max_tokens (2048), got `1000` (number)',
    );
    expect(await ask({ type: 'enabled', budget_tokens: 2048 })).toContain(
      'less than max_tokens (2048)',
    );
    expect(await ask({ type: 'sometimes' })).toContain(
      'Expected `thinking.type` to be "enabled", "adaptive", "disabled" or "between_tools"',
    );
    expect(
      await ask(
        { type: 'enabled', budget_tokens: 1024 },
        { tools: [toolX], tool_choice: { type: 'any' } },
      ),
    ).toContain('Expected `tool_choice.type` to be "auto" or "none" with thinking enabled');
    expect(await ask({ type: 'enabled', budget_tokens: 1024 }, { temperature: 0.5 })).toContain(
      'Expected `temperature` to be 1 or absent with thinking on',
    );
    // Adaptive thinking with a forced tool skips thinking: the answer opens with the call.
    const forced = await accepted({
      ...base,
      thinking: { type: 'adaptive' },
      tools: [toolX],
      tool_choice: { type: 'tool', name: 'x' },
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(forced.content[0]).toMatchObject({ type: 'tool_use', name: 'x' });
    expect(forced.content.some((block) => block.type === 'thinking')).toBe(false);
    expect(forced.stop_reason).toBe('tool_use');
  });
});

describe('tools', () => {
  it('accepts Anthropic tools without input_schema, of any dated version', async () => {
    await accepted({
      ...base,
      tools: [
        toolX,
        { type: 'web_search_20250305', name: 'web_search', max_uses: 3 },
        { type: 'bash_20250124', name: 'bash' },
        { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
        { type: 'web_fetch_20991231', name: 'web_fetch' },
        { type: 'computer_toolset_20260801' },
      ],
      messages: [
        { role: 'user', content: 'search' },
        {
          role: 'assistant',
          content: [
            {
              type: 'server_tool_use',
              id: 'srvtoolu_1',
              name: 'web_search',
              input: { query: 'q' },
            },
            { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
            { type: 'text', text: 'Found nothing.' },
          ],
        },
        { role: 'user', content: 'ok' },
      ],
    });
  });

  it('refuses an unknown tool type, a wrong name and a bad custom tool', async () => {
    const ask = (tool: unknown) =>
      refusal({ ...base, tools: [tool], messages: [{ role: 'user', content: 'hi' }] });
    const unknown = await ask({ type: 'teleport_20250101', name: 'teleport' });
    expect(unknown).toMatch(
      /^Expected `tools\.0\.type` to be "custom" \(a tool with an input_schema\) or an Anthropic tool type: bash_YYYYMMDD, .*web_search_YYYYMMDD.*, got `"teleport_20250101"` \(string\)$/,
    );
    expect(await ask({ type: 'bash_20250124', name: 'shell' })).toBe(
      'Expected `tools.0.name` to be "bash" for a bash_20250124 tool, got `"shell"` (string)',
    );
    expect(await ask({ name: 'my tool', input_schema: { type: 'object' } })).toContain(
      'Expected `tools.0.name` to be 1 to 128 letters, digits, "_" or "-", got `"my tool"`',
    );
    expect(await ask({ name: 'x', input_schema: { type: 'array' } })).toContain(
      'Expected `tools.0.input_schema.type` to be "object"',
    );
    expect(
      await ask({
        type: 'web_search_20250305',
        name: 'web_search',
        input_schema: { type: 'object' },
      }),
    ).toBe('tools.0.input_schema: Extra inputs are not permitted');
  });
});

describe('tool_choice', () => {
  const cases: Array<[unknown, unknown[], string]> = [
    [
      { type: 'tool', name: 'y' },
      [toolX],
      'Expected `tool_choice.name` to be the name of a tool in `tools` ("x"), got `"y"` (string)',
    ],
    [
      { type: 'any' },
      [],
      'Expected `tool_choice.type` to be "auto" or "none" when `tools` is empty, got `"any"` (string)',
    ],
    [
      { type: 'none', disable_parallel_tool_use: true },
      [toolX],
      'tool_choice.disable_parallel_tool_use: Extra inputs are not permitted',
    ],
    [
      { type: 'sometimes' },
      [toolX],
      'Expected `tool_choice.type` to be "auto", "any", "tool" or "none", got `"sometimes"` (string)',
    ],
    [
      { type: 'tool' },
      [toolX],
      'Expected `tool_choice.name` to be a non-empty string, got nothing',
    ],
  ];

  it('refuses bad choices, through the SDK and a raw fetch', async () => {
    for (const [choice, tools, expected] of cases) {
      const body = {
        ...base,
        tools,
        tool_choice: choice,
        messages: [{ role: 'user', content: 'hi' }],
      };
      expect(await refusal(body)).toBe(expected);
      const raw = await post(body);
      expect(raw.status).toBe(400);
      expect(raw.json.error?.message).toBe(expected);
    }
  });

  it('accepts the valid ones', async () => {
    for (const choice of [
      { type: 'auto', disable_parallel_tool_use: true },
      { type: 'any' },
      { type: 'tool', name: 'x' },
      { type: 'none' },
    ]) {
      await accepted({
        ...base,
        tools: [toolX],
        tool_choice: choice,
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(
        (
          await post({
            ...base,
            tools: [toolX],
            tool_choice: choice,
            messages: [{ role: 'user', content: 'hi' }],
          })
        ).status,
      ).toBe(200);
    }
  });
});

describe('stop_sequences', () => {
  it('refuses a sequence that is empty, only whitespace or not a string', async () => {
    const ask = (stop: unknown) =>
      refusal({ ...base, stop_sequences: stop, messages: [{ role: 'user', content: 'hi' }] });
    expect(await ask(['END', ' \n'])).toBe(
      'Expected `stop_sequences.1` to be a string with at least one non-whitespace character, got `" \\n"` (string)',
    );
    expect(await ask([''])).toContain(
      'Expected `stop_sequences.0` to be a string with at least one',
    );
    expect(await ask([7])).toContain('got `7` (number)');
    expect(await ask('END')).toBe(
      'Expected `stop_sequences` to be an array of strings, got `"END"` (string)',
    );
    await accepted({
      ...base,
      stop_sequences: ['END', ' x '],
      messages: [{ role: 'user', content: 'hi' }],
    });
  });
});

describe('top-level fields', () => {
  const hi = { ...base, messages: [{ role: 'user', content: 'hi' }] };

  it('refuses an unknown field with the real API message', async () => {
    expect(await refusal({ ...hi, max_token: 5 })).toBe(
      'max_token: Extra inputs are not permitted',
    );
  });

  it('refuses fields the scripted model cannot honour, naming them', async () => {
    expect(
      await refusal({ ...hi, mcp_servers: [{ type: 'url', url: 'https://x', name: 'x' }] }),
    ).toMatch(
      /^Expected `mcp_servers` to be absent \(the scripted model does not support MCP servers\), got /,
    );
    expect(await refusal({ ...hi, context_management: { edits: [] } })).toContain(
      'Expected `context_management` to be absent (the scripted model does not support context management)',
    );
    expect(await refusal({ ...hi, container: 'container_1' })).toContain(
      '`container` to be absent',
    );
    expect(
      await refusal({ ...hi, output_config: { format: { type: 'json_schema', schema: {} } } }),
    ).toContain(
      'Expected `output_config.format` to be absent (the scripted model does not produce structured output)',
    );
  });

  it('accepts and checks the optional fields', async () => {
    await accepted({
      ...hi,
      system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
      temperature: 0.2,
      top_k: 5,
      metadata: { user_id: 'u-1' },
      service_tier: 'standard_only',
      output_config: { effort: 'high' },
      inference_geo: 'us',
      cache_control: { type: 'ephemeral', ttl: '5m' },
      container: null,
    });
    expect(await refusal({ ...hi, temperature: 1.5 })).toBe(
      'Expected `temperature` to be a number from 0 to 1, got `1.5` (number)',
    );
    expect(await refusal({ ...hi, top_p: 1.5 })).toBe(
      'Expected `top_p` to be a number from 0 to 1, got `1.5` (number)',
    );
    // The real API takes one of temperature and top_p, never both.
    expect(await refusal({ ...hi, temperature: 0.2, top_p: 0.9 })).toBe(
      '`temperature` and `top_p` cannot both be specified for this model. Please use only one.',
    );
    await accepted({ ...hi, top_p: 0.9 });
    expect(await refusal({ ...hi, top_k: -1 })).toContain(
      'Expected `top_k` to be an integer from 0 up',
    );
    expect(await refusal({ ...hi, metadata: { user: 'u' } })).toBe(
      'metadata.user: Extra inputs are not permitted',
    );
    expect(await refusal({ ...hi, service_tier: 'priority' })).toContain(
      'Expected `service_tier` to be "auto" or "standard_only"',
    );
    expect(await refusal({ ...hi, output_config: { effort: 'extreme' } })).toContain(
      'Expected `output_config.effort` to be "low", "medium", "high", "xhigh", "max" or null',
    );
  });

  it('checks the shape of thread', async () => {
    expect(await refusal({ ...hi, thread: { type: 'continue' } })).toBe(
      'Expected `thread.previous_message_id` to be a non-empty string, got nothing',
    );
    expect(await refusal({ ...hi, thread: { type: 'fork' } })).toContain(
      'Expected `thread.type` to be "create" or "continue"',
    );
    const checked = validateRequest({
      ...hi,
      thread: { type: 'continue', previous_message_id: 'msg_1' },
    });
    expect(checked).toMatchObject({
      ok: true,
      value: { thread: { type: 'continue', previousMessageId: 'msg_1' } },
    });
  });
});

describe('count_tokens bodies', () => {
  const body = { model: 'scripted', messages: [{ role: 'user', content: 'hi' }] };

  it('takes the body without max_tokens and gives maxTokens 0', () => {
    const checked = validateRequest(
      {
        ...body,
        system: 'S',
        tools: [toolX],
        tool_choice: { type: 'auto' },
        thinking: { type: 'enabled', budget_tokens: 5000 },
      },
      { endpoint: 'count_tokens' },
    );
    expect(checked).toMatchObject({
      ok: true,
      value: { maxTokens: 0, thinking: { type: 'enabled', budgetTokens: 5000 } },
    });
  });

  it('refuses the fields only a messages request has as extra inputs, through the SDK', async () => {
    const extras = {
      max_tokens: 5,
      stream: false,
      stop_sequences: ['x'],
      temperature: 1,
      top_p: 1,
      top_k: 1,
      metadata: {},
      service_tier: 'auto',
      inference_geo: 'us',
      thread: { type: 'create' },
    };
    for (const [field, value] of Object.entries(extras)) {
      const params = { ...body, [field]: value } as Anthropic.MessageCountTokensParams;
      const outcome = await client.messages.countTokens(params).catch((error: unknown) => error);
      expect(outcome).toBeInstanceOf(Anthropic.BadRequestError);
      expect((outcome as APIError).error).toMatchObject({
        error: { message: `${field}: Extra inputs are not permitted` },
      });
    }
    expect(
      (await client.messages.countTokens(body as Anthropic.MessageCountTokensParams)).input_tokens,
    ).toBeGreaterThan(0);
    expect(await refusal(body)).toBe('Expected `max_tokens` to be a positive integer, got nothing');
  });

  it('never throws on any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const checked = validateRequest(value, { endpoint: 'count_tokens' });
        if (!checked.ok) expect(checked.message).toMatch(REFUSAL);
      }),
      { numRuns: 300 },
    );
  });
});

/** The forms of every refusal: ours, an extra input, or a rule in the real API's words. */
const REFUSAL =
  /^Expected |: Extra inputs are not permitted$|^(messages|system)(\.\d+)?: |^Requests which include |^`temperature` and `top_p`/;

describe('messages bodies, fuzzed deep', () => {
  const value = fc.jsonValue({ maxDepth: 3 });
  /** Mostly `usual`, now and then `odd`: many bodies get past the first checks. */
  const mostly = <T>(usual: fc.Arbitrary<T>, odd: fc.Arbitrary<unknown> = value) =>
    fc.oneof({ arbitrary: usual, weight: 20 }, { arbitrary: odd, weight: 1 });
  const absentOr = (present: fc.Arbitrary<unknown>) =>
    fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, { arbitrary: present, weight: 1 });

  // Well-formed blocks (with texts that may be empty or blank), to reach the deep checks.
  const text = fc.record({
    type: fc.constant('text'),
    text: mostly(fc.constantFrom('a', 'b'), fc.constantFrom('', ' ')),
  });
  const searchResult = fc.record({
    type: fc.constant('search_result'),
    source: fc.constantFrom('https://s', ''),
    title: fc.constant('T'),
    content: fc.array(text, { maxLength: 2 }),
  });
  const media = fc.constantFrom(
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
    { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } },
    { type: 'document', source: { type: 'content', content: [{ type: 'text', text: '' }] } },
    { type: 'tool_reference', tool_name: 'x' },
    { type: 'browser_state', tabs: [] },
  );
  const id = fc.constantFrom('toolu_1', 'toolu_2');
  const toolResult = fc.record({
    type: fc.constant('tool_result'),
    tool_use_id: id,
    content: fc.oneof(fc.string(), fc.array(fc.oneof(text, searchResult, media), { maxLength: 3 })),
  });
  const toolUse = fc.record({
    type: fc.constant('tool_use'),
    id,
    name: fc.constant('x'),
    input: fc.constant({}),
  });
  const userBlock = fc.oneof(text, searchResult, media, toolResult);
  const assistantBlock = fc.oneof(text, toolUse);

  // Blocks of any listed type with any fields, nested three deep.
  const blockType = fc.constantFrom(
    'text',
    'image',
    'document',
    'search_result',
    'tool_result',
    'tool_use',
    'thinking',
    'redacted_thinking',
    'server_tool_use',
    'web_search_tool_result',
    'tool_reference',
    'browser_state',
    'container_upload',
    'audio',
  );
  const blockKey = fc.constantFrom(
    'text',
    'source',
    'content',
    'tool_use_id',
    'id',
    'name',
    'input',
    'thinking',
    'signature',
    'data',
    'cache_control',
    'citations',
    'is_error',
    'title',
    'tool_name',
    'tabs',
    'caller',
    'transformations',
    'bogus',
  );
  const source = fc.record(
    {
      type: fc.constantFrom('base64', 'url', 'file', 'text', 'content', 'zip'),
      media_type: fc.constantFrom('image/png', 'application/pdf', 'text/plain', 'image/bmp'),
      data: fc.oneof(fc.base64String(), value),
      url: fc.string(),
      content: fc.oneof(fc.string(), value),
    },
    { requiredKeys: ['type'] },
  );
  const blocksOver = (inner: fc.Arbitrary<unknown>) =>
    fc
      .tuple(
        blockType,
        fc.dictionary(blockKey, fc.oneof(value, source, fc.array(inner, { maxLength: 3 })), {
          maxKeys: 4,
        }),
      )
      .map(([type, fields]) => ({ ...fields, type }));
  const anyBlock = blocksOver(blocksOver(blocksOver(fc.oneof(userBlock, assistantBlock))));
  const block = mostly(userBlock, anyBlock);

  const odd = fc.oneof(fc.constantFrom('', ' '), value);
  const message = mostly(
    fc.oneof(
      fc.record({
        role: fc.constant('user'),
        content: mostly(fc.oneof(fc.constant('hi'), fc.array(block, { maxLength: 4 })), odd),
      }),
      fc.record({
        role: fc.constant('assistant'),
        content: mostly(fc.array(mostly(assistantBlock, anyBlock), { maxLength: 3 }), odd),
      }),
    ),
    fc.record({ role: fc.oneof(fc.constant('system'), value), content: fc.constant('hi') }),
  );
  const tool = fc.oneof(
    fc.constant({ name: 'x', input_schema: { type: 'object' } }),
    fc
      .tuple(
        fc.constantFrom('x', 'bash_20250124', 'web_search_20250305', 'browser_toolset_20260801'),
        fc.dictionary(
          fc.constantFrom('name', 'input_schema', 'max_uses', 'strict', 'bogus'),
          value,
        ),
      )
      .map(([type, fields]) => ({ ...fields, type })),
  );
  const body = fc.record({
    model: mostly(fc.constant('m')),
    max_tokens: mostly(fc.constant(2048)),
    messages: mostly(fc.array(message, { minLength: 1, maxLength: 5 })),
    system: absentOr(fc.oneof(fc.string(), fc.array(block, { maxLength: 2 }))),
    tools: fc.oneof(fc.constant(undefined), fc.array(tool, { maxLength: 3 })),
    tool_choice: absentOr(
      fc.record({ type: fc.constantFrom('auto', 'any', 'tool', 'none'), name: fc.constant('x') }),
    ),
    thinking: absentOr(
      fc.constantFrom({ type: 'enabled', budget_tokens: 1024 }, { type: 'adaptive' }, 'on'),
    ),
    temperature: absentOr(value),
    top_p: absentOr(value),
    stop_sequences: absentOr(value),
    thread: absentOr(mostly(fc.constant({ type: 'continue', previous_message_id: 'msg_1' }))),
  });

  it('validateRequest never throws, and refuses only in the known forms', () => {
    fc.assert(
      fc.property(body, (sent) => {
        const checked = validateRequest(sent);
        if (!checked.ok) expect(checked.message).toMatch(REFUSAL);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('threads: the new turn, then the whole conversation', () => {
  const context = {
    tools: [{ name: 'x', type: 'custom', input_schema: { type: 'object' } }],
    toolChoice: { type: 'auto' as const, disableParallelToolUse: false },
    thinking: { type: 'disabled' as const, enabled: false, budgetTokens: 0 },
  };
  const stored: RequestMessage[] = [
    { role: 'user', blocks: [{ type: 'text', text: 'go' }] },
    { role: 'assistant', blocks: [useX()] },
  ];

  it('checks only the blocks of a continue, whose messages may be empty or start with a tool_result', () => {
    const turn = (messages: unknown[]) =>
      validateRequest({
        ...base,
        thread: { type: 'continue', previous_message_id: 'msg_1' },
        messages,
      });
    expect(turn([])).toMatchObject({ ok: true, value: { messages: [] } });
    expect(turn([{ role: 'user', content: [resultOf()] }])).toMatchObject({ ok: true });
    expect(turn([{ role: 'user', content: [{ type: 'audio' }] }])).toMatchObject({ ok: false });
  });

  it('checkConversation checks and merges the stitched conversation', () => {
    const answer: RequestMessage = { role: 'user', blocks: [resultOf()] };
    const more: RequestMessage = { role: 'user', blocks: [{ type: 'text', text: 'more' }] };
    const ok = checkConversation([...stored, answer, more], context);
    expect(ok).toEqual({
      ok: true,
      value: [stored[0], stored[1], { role: 'user', blocks: [...answer.blocks, ...more.blocks] }],
    });
    expect(checkConversation([...stored, more], context)).toEqual({
      ok: false,
      message:
        'Expected a tool_result for tool_use `toolu_1` (x) of messages.1 in messages.2, got none: every tool_use must be answered in the next message',
    });
    expect(
      checkConversation(stored.slice(0, 1), {
        ...context,
        toolChoice: { type: 'tool', name: 'z', disableParallelToolUse: false },
      }),
    ).toMatchObject({
      ok: false,
      message: expect.stringContaining(
        'Expected `tool_choice.name` to be the name of a tool in `tools` ("x")',
      ),
    });
  });

  it('merging keeps every block in order, alternates roles, and maps each block back to where it was sent', () => {
    const message = fc.record({
      role: fc.constantFrom('user' as const, 'assistant' as const),
      blocks: fc.array(
        fc.string().map((text) => ({ type: 'text' as const, text })),
        { maxLength: 3 },
      ),
    });
    fc.assert(
      fc.property(fc.array(message, { maxLength: 8 }), (given) => {
        const counts = given.map((m) => m.blocks.length);
        const merged = new MergedMessages(given);
        expect(merged.messages.flatMap((m) => m.blocks)).toEqual(given.flatMap((m) => m.blocks));
        merged.messages.forEach((m, index) => {
          expect(m.role).not.toBe(merged.messages[index + 1]?.role);
          m.blocks.forEach((block, blockIndex) => {
            const [, at, , within] = merged.blockPath(index, blockIndex).split('.');
            expect(given[Number(at)]?.blocks[Number(within)]).toBe(block);
          });
        });
        // The given messages are never changed.
        expect(given.map((m) => m.blocks.length)).toEqual(counts);
      }),
      { numRuns: 300 },
    );
  });
});
