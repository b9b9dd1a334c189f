import { connect } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
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

const THREADS_BETA = 'message-threads-2026-08-12';
const THREAD_HEADERS = { 'anthropic-beta': THREADS_BETA };

/**
 * Starts a thread on a conversation whose first user message is `content` and answers its
 * first turn; returns that answer, the create body, and a continue body from the answer.
 */
async function openThread(content: string, extra: Record<string, unknown> = {}) {
  const start = {
    model: 'scripted',
    max_tokens: 50,
    thread: { type: 'create' },
    messages: [{ role: 'user', content }],
    ...extra,
  };
  const first = await call('/v1/messages', { body: start, headers: THREAD_HEADERS });
  const next = {
    model: 'scripted',
    max_tokens: 50,
    thread: { type: 'continue', previous_message_id: first.json.id },
    messages: [{ role: 'user', content: 'And then?' }],
  };
  return { start, first, next };
}

/** The JSON of an answer: a message or an error body, whichever the status says. */
interface AnswerJson {
  id: string;
  content: unknown[];
  request_id: string;
  error: { type: string; message: string; details?: unknown };
}

/** A raw request with the headers a minimal client sends; returns status, headers and JSON. */
async function call(
  path: string,
  init: { method?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
) {
  const body = init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
  const response = await fetch(`${model.url}${path}`, {
    method: init.method ?? (body === undefined ? 'GET' : 'POST'),
    headers: { 'content-type': 'application/json', ...init.headers },
    ...(body === undefined ? {} : { body }),
  });
  const json = (await response.json()) as AnswerJson;
  return { status: response.status, headers: response.headers, json };
}

function scripted(steps: unknown[], prompt = 'Go.'): string {
  return `${prompt}\n${scriptBlock(steps as never)}`;
}

describe('count_tokens', () => {
  it('counts what usage.input_tokens reports for the same request', async () => {
    const params = {
      model: 'scripted',
      system: 'You are terse.',
      messages: [{ role: 'user' as const, content: scripted([{ text: 'ok' }]) }],
      tools: [{ name: 'echo', input_schema: { type: 'object' as const } }],
    };
    const counted = await client.messages.countTokens(params);
    const message = await client.messages.create({ ...params, max_tokens: 50 });
    expect(counted.input_tokens).toBeGreaterThan(10);
    expect(counted.input_tokens).toBe(message.usage.input_tokens);
  });

  it('refuses a malformed body with the usual 400', async () => {
    const { status, json } = await call('/v1/messages/count_tokens', {
      body: { model: 'scripted', messages: [] },
    });
    expect(status).toBe(400);
    expect(json.error.type).toBe('invalid_request_error');
    expect(json.error.message).toMatch(/messages/);
    expect(json.request_id).toMatch(/^req_cohort_/);
  });
});

describe('models', () => {
  it('lists the catalog and pages through it with the SDK', async () => {
    const ids: string[] = [];
    for await (const info of client.models.list({ limit: 1 })) ids.push(info.id);
    expect(ids.length).toBeGreaterThanOrEqual(3);
    expect(new Set(ids).size).toBe(ids.length);
    const page = await client.models.list({ limit: 2 });
    expect(page.data.map((info) => info.id)).toEqual(ids.slice(0, 2));
    expect(page.has_more).toBe(true);
  });

  it('retrieves a model by id or alias, and 404s an unknown one', async () => {
    const info = await client.models.retrieve('claude-sonnet-4-5-20250929');
    expect(info).toMatchObject({ type: 'model', id: 'claude-sonnet-4-5-20250929', line: 'sonnet' });
    expect(info.display_name).toMatch(/^Claude Sonnet 4\.5/);
    const alias = await client.models.retrieve('claude-sonnet-4-5');
    expect(alias.id).toBe('claude-sonnet-4-5-20250929');
    const error = await client.models.retrieve('claude-nonexistent').catch((caught) => caught);
    expect(error).toBeInstanceOf(Anthropic.NotFoundError);
    expect(error.error.error.message).toBe('model: claude-nonexistent');
  });

  it('refuses a bad page size', async () => {
    for (const limit of ['0', '1e1', '0x10', '1001']) {
      const { status, json } = await call(`/v1/models?limit=${limit}`);
      expect(status).toBe(400);
      expect(json.error.message).toBe(
        `Expected \`limit\` to be an integer from 1 to 1000, got \`${limit}\``,
      );
    }
  });

  it('filters by lifecycle: every model of the catalog is active', async () => {
    const retired = await client.models.list({ lifecycle: ['retired'] });
    expect(retired.data).toEqual([]);
    const active = await client.models.list({ lifecycle: ['active', 'retired'] });
    expect(active.data.length).toBeGreaterThanOrEqual(3);
    const bad = await call('/v1/models?lifecycle[]=gone');
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/`lifecycle`.*got `gone`/);
  });
});

describe('unknown routes', () => {
  it('answers 404 with the routes it has and a request_id', async () => {
    const { status, json } = await call('/v1/complete', { body: {} });
    expect(status).toBe(404);
    expect(json.error.type).toBe('not_found_error');
    expect(json.error.message).toMatch(/POST \/v1\/messages/);
    expect(json.error.message).toMatch(/got POST \/v1\/complete$/);
    expect(json.request_id).toMatch(/^req_cohort_/);
  });
});

describe('strictAuth', () => {
  let strict: ScriptedModel;
  beforeAll(async () => {
    strict = await startScriptedModel({ strictAuth: true });
  });
  afterAll(async () => {
    await strict.close();
  });
  const body = {
    model: 'scripted',
    max_tokens: 20,
    messages: [{ role: 'user', content: 'hi' }],
  };

  it('answers 401 without a key and 400 without anthropic-version', async () => {
    const raw = (headers: Record<string, string>) =>
      fetch(`${strict.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      }).then(async (response) => ({
        status: response.status,
        json: (await response.json()) as AnswerJson,
      }));
    const noKey = await raw({ 'anthropic-version': '2023-06-01' });
    expect(noKey.status).toBe(401);
    expect(noKey.json.error).toEqual({
      type: 'authentication_error',
      message: 'x-api-key header is required',
    });
    const noVersion = await raw({ 'x-api-key': 'k' });
    expect(noVersion.status).toBe(400);
    expect(noVersion.json.error.message).toBe('anthropic-version: header is required');
    const bearer = await raw({ authorization: 'Bearer tok', 'anthropic-version': '2023-06-01' });
    expect(bearer.status).toBe(200);
  });

  it('lets the SDK through, and the default server needs neither header', async () => {
    const sdk = new Anthropic({ apiKey: 'k', baseURL: strict.url, maxRetries: 0 });
    const message = await sdk.messages.create(body as Anthropic.MessageCreateParamsNonStreaming);
    expect(message.type).toBe('message');
    const open = await call('/v1/messages', { body });
    expect(open.status).toBe(200);
  });
});

describe('faultAttempts for clients that do not send x-cohort-attempt', () => {
  const once429 = [
    { text: 'Recovered.', error: { status: 429, retryAfterMs: 10 }, faultAttempts: 1 },
  ];

  it('reads the official SDK retry count: a 429 once, then the SDK retry succeeds', async () => {
    const retrying = new Anthropic({ apiKey: 'k', baseURL: model.url, maxRetries: 2 });
    const seen: number[] = [];
    const onRequest = (event: { attempt: number }) => seen.push(event.attempt);
    model.on('request', onRequest);
    try {
      const message = await retrying.messages.create({
        model: 'scripted',
        max_tokens: 20,
        messages: [{ role: 'user', content: scripted(once429, 'sdk retry') }],
      });
      expect(message.content).toEqual([{ type: 'text', text: 'Recovered.' }]);
    } finally {
      model.off('request', onRequest);
    }
    expect(seen).toEqual([0, 1]);
  });

  it('starts the count again once a try succeeds, so a rerun meets its faults again', async () => {
    const body = {
      model: 'scripted',
      max_tokens: 20,
      messages: [{ role: 'user', content: scripted(once429, 'rerun') }],
    };
    const statuses: number[] = [];
    for (let run = 0; run < 4; run++) statuses.push((await call('/v1/messages', { body })).status);
    expect(statuses).toEqual([429, 200, 429, 200]);
  });

  it('counts repeats of the same body for a client that numbers nothing', async () => {
    const body = {
      model: 'scripted',
      max_tokens: 20,
      messages: [{ role: 'user', content: scripted(once429, `bare ${Math.random()}`) }],
    };
    const first = await call('/v1/messages', { body });
    expect(first.status).toBe(429);
    expect(Number(first.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const second = await call('/v1/messages', { body });
    expect(second.status).toBe(200);
    expect(second.json.content).toEqual([{ type: 'text', text: 'Recovered.' }]);
    // Another key is another client: its first try is attempt 0 again.
    const other = await call('/v1/messages', { body, headers: { 'x-api-key': 'other' } });
    expect(other.status).toBe(429);
  });

  it('refuses a negative retry count as a bad header', async () => {
    const { status, json } = await call('/v1/messages', {
      body: { model: 's', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] },
      headers: { 'x-stainless-retry-count': '-1' },
    });
    expect(status).toBe(400);
    expect(json.error.message).toBe(
      'Expected header `x-stainless-retry-count` to be a non-negative integer, got `-1`',
    );
  });
});

describe('message threads', () => {
  const twoTurns = [
    { calls: [{ name: 'lookup', input: { q: 'cohort' } }] },
    { text: 'The answer is 42.' },
  ];

  it("runs the SDK's toolRunner over a thread, sending only new messages", async () => {
    const bodies: Array<{ thread?: unknown; messages: unknown[]; system?: unknown }> = [];
    const spy = new Anthropic({
      apiKey: 'k',
      baseURL: model.url,
      maxRetries: 0,
      fetch: async (url, init) => {
        bodies.push(JSON.parse(String(init?.body)));
        return fetch(url, init);
      },
    });
    const lookup = betaTool({
      name: 'lookup',
      description: 'Looks a word up.',
      inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
      run: ({ q }) => `${q} means 42`,
    });
    const final = await spy.beta.messages.toolRunner({
      model: 'scripted',
      max_tokens: 100,
      system: 'Be brief.',
      messages: [{ role: 'user', content: scripted(twoTurns) }],
      tools: [lookup],
    });
    expect(final.content).toEqual([{ type: 'text', text: 'The answer is 42.' }]);
    expect(bodies).toHaveLength(2);
    expect(bodies[0]!.thread).toEqual({ type: 'create' });
    expect(bodies[1]!.thread).toMatchObject({ type: 'continue' });
    expect(bodies[1]!.system).toBeUndefined();
    expect(bodies[1]!.messages).toHaveLength(1);
  });

  it('continues each response once, and says why it refuses', async () => {
    const headers = THREAD_HEADERS;
    const { start, first, next } = await openThread(scripted([{ text: 'one' }, { text: 'two' }]));
    expect(first.status).toBe(200);
    const second = await call('/v1/messages', { body: next, headers });
    expect(second.status).toBe(200);
    expect(second.json.content).toEqual([{ type: 'text', text: 'two' }]);
    const again = await call('/v1/messages', { body: next, headers });
    expect(again.status).toBe(400);
    expect(again.json.error.details).toEqual({ error_code: 'thread_already_continued' });
    const unknown = await call('/v1/messages', {
      body: { ...next, thread: { type: 'continue', previous_message_id: 'msg_nope' } },
      headers,
    });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.details).toEqual({ error_code: 'thread_not_found' });
    const withSystem = await call('/v1/messages', {
      body: {
        ...next,
        system: 'new',
        thread: { type: 'continue', previous_message_id: second.json.id },
      },
      headers,
    });
    expect(withSystem.status).toBe(400);
    expect(withSystem.json.error.message).toMatch(/Expected no `system` with thread/);
    const noBeta = await call('/v1/messages', { body: start });
    expect(noBeta.status).toBe(400);
    expect(noBeta.json.error.message).toMatch(/anthropic-beta header to include `message-threads/);
  });

  it('refuses a second continue while the first is in flight, and another model', async () => {
    const headers = THREAD_HEADERS;
    const { next } = await openThread(scripted([{ text: 'one' }, { text: 'slow', delayMs: 300 }]));
    const otherModel = await call('/v1/messages', { body: { ...next, model: 'other' }, headers });
    expect(otherModel.status).toBe(400);
    expect(otherModel.json.error.details).toEqual({ error_code: 'thread_fingerprint_mismatch' });
    const slow = call('/v1/messages', { body: next, headers });
    // The slow turn holds the thread for 300 ms: a request sent meanwhile is refused.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const meanwhile = await call('/v1/messages', { body: next, headers });
    expect(meanwhile.status).toBe(400);
    expect(meanwhile.json.error.details).toEqual({ error_code: 'thread_continue_in_flight' });
    expect((await slow).json.content).toEqual([{ type: 'text', text: 'slow' }]);
  });

  it('refuses thinking and cache_control on a thread, as the SDK expects', async () => {
    const headers = THREAD_HEADERS;
    const { status, json } = await call('/v1/messages', {
      body: {
        model: 'scripted',
        max_tokens: 2048,
        thread: { type: 'create' },
        thinking: { type: 'enabled', budget_tokens: 1024 },
        cache_control: { type: 'ephemeral' },
        messages: [{ role: 'user', content: 'hi' }],
      },
      headers,
    });
    expect(status).toBe(400);
    expect(json.error.details).toEqual({
      error_code: 'thread_unsupported_request',
      unsupported: ['thinking', 'cache_control'],
    });
  });

  it('keeps threads per API key and stores nothing for a response cut by a fault', async () => {
    const headers = THREAD_HEADERS;
    const { start, next } = await openThread(scripted([{ text: 'one' }, { text: 'two' }]));
    const stranger = await call('/v1/messages', {
      body: next,
      headers: { ...headers, 'x-api-key': 'someone-else' },
    });
    expect(stranger.status).toBe(404);
    const owner = await call('/v1/messages', { body: next, headers });
    expect(owner.status).toBe(200);
    expect(owner.json.content).toEqual([{ type: 'text', text: 'two' }]);
    // A stream cut by a disconnect: the client saw the message id, the server stored nothing.
    const cut = await fetch(`${model.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({
        ...start,
        stream: true,
        messages: [
          { role: 'user', content: scripted([{ text: 'partial text', disconnect: true }]) },
        ],
      }),
    });
    let seen = '';
    const reader = cut.body!.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        seen += Buffer.from(value).toString('utf8');
      }
    } catch {
      // The disconnect fault ends the body with an error, after message_start.
    }
    const cutId = /"id":"(msg_cohort_[^"]+)"/.exec(seen)?.[1];
    expect(cutId).toBeDefined();
    const afterCut = await call('/v1/messages', {
      body: { ...next, thread: { type: 'continue', previous_message_id: cutId } },
      headers,
    });
    expect(afterCut.status).toBe(404);
    expect(afterCut.json.error.details).toEqual({ error_code: 'thread_not_found' });
  });
});

describe('no request takes the server down', () => {
  /** JSON text of an array nested `levels` deep, written out without recursion. */
  const deep = (levels: number): string => `${'['.repeat(levels)}"bottom"${']'.repeat(levels)}`;

  it('answers a malformed %-escape in a model id with 404', async () => {
    const { status, json } = await call('/v1/models/%E0%A4%A');
    expect(status).toBe(404);
    expect(json.error.type).toBe('not_found_error');
  });

  it('answers request targets a URL parser refuses with 404', async () => {
    for (const target of ['//[', 'http://[']) {
      const socket = connect(model.port, '127.0.0.1');
      socket.end(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      let reply = '';
      for await (const chunk of socket) reply += String(chunk);
      expect(reply).toMatch(/^HTTP\/1\.1 404 /);
    }
    expect((await call('/v1/models')).status).toBe(200);
  });

  it('answers bodies nested 20,000 deep with a 400, and goes on serving', async () => {
    for (const raw of [
      `{"model":"s","max_tokens":5,"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":${deep(20_000)}}}`,
      `{"model":"s","max_tokens":5,"messages":[{"role":"user","content":${deep(20_000)}}]}`,
    ]) {
      const { status, json } = await call('/v1/messages', { raw });
      expect(status).toBe(400);
      expect(json.error.type).toBe('invalid_request_error');
    }
    const alive = await call('/v1/messages', {
      body: { model: 's', max_tokens: 50, messages: [{ role: 'user', content: 'still there?' }] },
    });
    expect(alive.status).toBe(200);
  });

  it('lets go of a thread when answering its continue fails', async () => {
    const headers = THREAD_HEADERS;
    // Step 1 calls a tool with an input too deep to write out: planning that turn throws.
    const script = `{"steps":[{"text":"one"},{"calls":[{"name":"t","input":{"v":${'['.repeat(20_000)}${']'.repeat(20_000)}}}]}]}`;
    const { first, next } = await openThread(`go\n\`\`\`cohort-script\n${script}\n\`\`\``, {
      tools: [{ name: 't', input_schema: { type: 'object' } }],
    });
    expect(first.status).toBe(200);
    const failed = await call('/v1/messages', { body: next, headers });
    expect(failed.status).toBe(400);
    // Not `thread_continue_in_flight`: the failed turn let go of the thread.
    const again = await call('/v1/messages', { body: next, headers });
    expect(again.status).toBe(400);
    expect(again.json.error.details).toBeUndefined();
  });
});

describe('rate-limit headers on every answer', () => {
  let limited: ScriptedModel;
  beforeAll(async () => {
    limited = await startScriptedModel({ rpm: 1000 });
  });
  afterAll(async () => {
    await limited.close();
  });

  it('a 400, a scripted error, a mid-stream error as JSON and a 529 carry them', async () => {
    const post = async (body: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(`${limited.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      await response.arrayBuffer();
      return response;
    };
    const ask = (content: string) => ({
      model: 's',
      max_tokens: 20,
      messages: [{ role: 'user', content }],
    });
    const answers = [
      await post({ model: 's', max_tokens: 0, messages: [] }),
      await post(ask(scripted([{ error: { status: 500 } }]))),
      await post(ask(scripted([{ text: 'x', error: { status: 529, midStream: true } }]))),
      await post(ask('overloaded'), { 'x-cohort-overload': '1' }),
    ];
    expect(answers.map((response) => response.status)).toEqual([400, 500, 529, 529]);
    for (const response of answers) {
      expect(response.headers.get('anthropic-ratelimit-requests-limit')).toBe('1000');
      expect(
        Number(response.headers.get('anthropic-ratelimit-requests-remaining')),
      ).toBeGreaterThan(0);
    }
  });
});
