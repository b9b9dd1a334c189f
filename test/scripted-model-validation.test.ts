import Anthropic, { type APIError } from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, scriptBlock, startScriptedModel } from '../src/testing/index.js';

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

const base = { model: 'scripted', max_tokens: 64 };

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

  it('rejects roles that do not alternate', async () => {
    const error = await rejection({
      ...base,
      messages: [
        { role: 'user', content: 'one' },
        { role: 'user', content: 'two' },
      ],
    });
    expect(error.status).toBe(400);
    expect(error.error).toMatchObject({ error: { type: 'invalid_request_error' } });
    expect(messageOf(error)).toContain(
      'Expected `messages.1.role` to be "assistant" (roles must alternate), got `"user"` (string)',
    );
  });

  it('rejects a tool_use left unanswered in the next user message', async () => {
    const error = await rejection({
      ...base,
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

  it('rejects a conversation that ends on an unanswered tool_use, and unknown blocks', async () => {
    const dangling = await rejection({
      ...base,
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'x', input: {} }] },
      ],
    });
    expect(messageOf(dangling)).toContain('got the end of the conversation');
    const image = await rejection({
      ...base,
      messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }],
    });
    expect(messageOf(image)).toContain(
      'Expected `messages.0.content.0.type` to be "text", "tool_use" or "tool_result"',
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
