import { request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import type {
  MessageBatch,
  MessageBatchIndividualResponse,
  MessageBatchResult,
} from '@anthropic-ai/sdk/resources/messages/batches';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  mockCommand,
  type ScriptedModel,
  type ScriptedModelOptions,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import { resolveOptions, ScriptedModelOptionError } from '../src/testing/load-model.js';
import { StoredBatch } from '../src/testing/message-batches.js';
import { parseMockFlags } from '../src/testing/serve-command.js';
import { apiError } from './helpers.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// One server for the tests that need no options of their own; its batches end quickly.
let model: ScriptedModel;
let client: Anthropic;

beforeAll(async () => {
  model = await startScriptedModel({ batchLatencyMs: 20 });
  client = clientOf(model, 'batch-key');
});

afterAll(async () => {
  await model.close();
});

// Servers a test starts for options of its own, closed after it.
const started: ScriptedModel[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((server) => server.close()));
});

async function serve(options: ScriptedModelOptions): Promise<ScriptedModel> {
  const server = await startScriptedModel(options);
  started.push(server);
  return server;
}

function clientOf(server: ScriptedModel, apiKey: string): Anthropic {
  return new Anthropic({ apiKey, baseURL: server.url, maxRetries: 0 });
}

/** A server whose clock a test moves forward, to see hours pass at once. */
async function serveWithClock(options: ScriptedModelOptions) {
  let skippedMs = 0;
  const server = await serve({ ...options, clock: () => performance.now() + skippedMs });
  return {
    server,
    skip: (ms: number) => {
      skippedMs += ms;
    },
  };
}

type Params = Anthropic.MessageCreateParamsNonStreaming;

/** A non-streaming Messages request whose first user message carries `script`. */
function scripted(
  script: Parameters<typeof scriptBlock>[0],
  prompt = 'Go.',
  extra: Partial<Params> = {},
): Params {
  return {
    model: 'scripted',
    max_tokens: 200,
    messages: [{ role: 'user', content: `${prompt}\n${scriptBlock(script)}` }],
    ...extra,
  };
}

/** Requests `r0`, `r1`, … each answering its own text. */
function texts(count: number): Array<{ custom_id: string; params: Params }> {
  return Array.from({ length: count }, (_, index) => ({
    custom_id: `r${index}`,
    params: scripted([{ text: `Answer ${index}.` }], `Task ${index}.`),
  }));
}

/** Polls until the batch has ended; a poll interval, never a timing assertion. */
async function ended(on: Anthropic, id: string): Promise<MessageBatch> {
  for (;;) {
    const batch = await on.messages.batches.retrieve(id);
    if (batch.processing_status === 'ended') return batch;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The results file, in the order it came, through the SDK's JSONL decoder. */
async function lines(on: Anthropic, id: string): Promise<MessageBatchIndividualResponse[]> {
  const all: MessageBatchIndividualResponse[] = [];
  for await (const line of await on.messages.batches.results(id)) all.push(line);
  return all;
}

async function resultsById(on: Anthropic, id: string): Promise<Map<string, MessageBatchResult>> {
  const all = await lines(on, id);
  return new Map(all.map((line) => [line.custom_id, line.result]));
}

function messageOf(result: MessageBatchResult | undefined): Anthropic.Message {
  if (result?.type !== 'succeeded') throw new Error(`Expected succeeded, got ${result?.type}`);
  return result.message;
}

function errorOf(result: MessageBatchResult | undefined) {
  if (result?.type !== 'errored') throw new Error(`Expected errored, got ${result?.type}`);
  return result.error.error;
}

/** The readable message of a refused SDK call. */
async function refusal(promise: Promise<unknown>): Promise<{ status: number; message: string }> {
  const error = await apiError(promise);
  const body = error.error as { error?: { message?: string } } | undefined;
  return { status: error.status ?? 0, message: body?.error?.message ?? '' };
}

describe('a batch from create to results', () => {
  it('answers each request as POST /v1/messages would, through batches alone', async () => {
    const own = clientOf(model, 'lifecycle-key');
    const tools: Anthropic.Tool[] = [{ name: 'echo', input_schema: { type: 'object' } }];
    const requests = [
      { custom_id: 'text', params: scripted([{ text: 'Hello from a batch.' }]) },
      {
        custom_id: 'tool',
        params: scripted([{ calls: [{ name: 'echo', input: { value: 7 } }] }], 'Call.', { tools }),
      },
      {
        custom_id: 'policy',
        params: {
          model: 'scripted',
          max_tokens: 200,
          messages: [{ role: 'user' as const, content: 'Hi.' }],
        },
      },
    ];
    const before = model.stats;
    const created = await own.messages.batches.create({ requests });
    expect(created).toMatchObject({
      id: expect.stringMatching(/^msgbatch_/),
      type: 'message_batch',
      processing_status: 'in_progress',
      request_counts: { processing: 3, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
      ended_at: null,
      cancel_initiated_at: null,
      archived_at: null,
      results_url: null,
    });
    expect(Date.parse(created.expires_at) - Date.parse(created.created_at)).toBe(DAY);

    const batch = await ended(own, created.id);
    expect(batch.request_counts).toEqual({
      processing: 0,
      succeeded: 3,
      errored: 0,
      canceled: 0,
      expired: 0,
    });
    expect(batch.ended_at).not.toBeNull();
    expect(batch.results_url).toBe(`${model.url}/v1/messages/batches/${batch.id}/results`);
    const results = await resultsById(own, batch.id);
    expect([...results.keys()].sort()).toEqual(['policy', 'text', 'tool']);

    // Every step went through batches: none through the real-time endpoint.
    const after = model.stats;
    expect(after.messages - before.messages).toBe(0);
    expect(after.batchesCreated - before.batchesCreated).toBe(1);
    expect(after.batchRequests - before.batchRequests).toBe(3);
    expect(after.batchRetrieves - before.batchRetrieves).toBeGreaterThanOrEqual(2);
    expect(after.batchResultDownloads - before.batchResultDownloads).toBe(1);

    // The same params sent in real time get the same message, but for its id and tier.
    for (const { custom_id: id, params } of requests) {
      const message = messageOf(results.get(id));
      const live = await own.messages.create(params);
      expect(message.id).toMatch(/^msg_cohort_/);
      expect(message.usage.service_tier).toBe('batch');
      expect({ ...message, id: '', usage: { ...message.usage, service_tier: '' } }).toEqual({
        ...live,
        id: '',
        usage: { ...live.usage, service_tier: '' },
      });
    }
    const tool = messageOf(results.get('tool'));
    expect(tool.stop_reason).toBe('tool_use');
    expect(tool.content).toEqual([
      { type: 'tool_use', id: 'toolu_cohort_0_0', name: 'echo', input: { value: 7 } },
    ]);
    expect(model.stats.messages - after.messages).toBe(3);
  });

  it('gives the results in an order of its own, each paired by custom_id', async () => {
    const created = await client.messages.batches.create({ requests: texts(20) });
    await ended(client, created.id);
    const all = await lines(client, created.id);
    const ids = all.map((line) => line.custom_id);
    expect([...ids].sort()).toEqual(
      texts(20)
        .map((request) => request.custom_id)
        .sort(),
    );
    expect(ids).not.toEqual(texts(20).map((request) => request.custom_id));
    for (const line of all) {
      const index = line.custom_id.slice(1);
      expect(messageOf(line.result).content).toEqual([{ type: 'text', text: `Answer ${index}.` }]);
    }
    // The same file every time it is read.
    expect((await lines(client, created.id)).map((line) => line.custom_id)).toEqual(ids);
  });

  it('ends a batch at once with a latency of 0', async () => {
    const created = await client.messages.batches.create(
      { requests: texts(2) },
      { headers: { 'x-cohort-batch-latency-ms': '0' } },
    );
    expect(created.processing_status).toBe('ended');
    expect(created.request_counts.succeeded).toBe(2);
    expect(created.ended_at).toBe(created.created_at);
  });
});

describe('listing', () => {
  it('lists a key’s batches newest first, with the API’s paging', async () => {
    const own = clientOf(model, 'listing-key');
    const oldest = await own.messages.batches.create({ requests: texts(1) });
    const middle = await own.messages.batches.create({ requests: texts(1) });
    const newest = await own.messages.batches.create({ requests: texts(1) });

    const first = await own.messages.batches.list({ limit: 2 });
    expect(first.data.map((batch) => batch.id)).toEqual([newest.id, middle.id]);
    expect(first).toMatchObject({ has_more: true, first_id: newest.id, last_id: middle.id });
    const second = await first.getNextPage();
    expect(second.data.map((batch) => batch.id)).toEqual([oldest.id]);
    expect(second).toMatchObject({ has_more: false, first_id: oldest.id, last_id: oldest.id });

    const walked: string[] = [];
    for await (const batch of own.messages.batches.list({ limit: 1 })) walked.push(batch.id);
    expect(walked).toEqual([newest.id, middle.id, oldest.id]);

    const before = await own.messages.batches.list({ before_id: oldest.id, limit: 1 });
    expect(before.data.map((batch) => batch.id)).toEqual([middle.id]);
    expect(before.has_more).toBe(true);
    expect(before.data[0]).toMatchObject({ type: 'message_batch', request_counts: {} });

    // Another key sees none of them.
    const other = await clientOf(model, 'listing-other-key').messages.batches.list();
    expect(other.data).toEqual([]);
    expect(other).toMatchObject({ has_more: false, first_id: null, last_id: null });
  });

  it('refuses a bad limit or a cursor not in the listing, saying what arrived', async () => {
    const own = clientOf(model, 'listing-bad-key');
    expect(await refusal(own.messages.batches.list({ limit: 0 }))).toEqual({
      status: 400,
      message: 'Expected `limit` to be an integer from 1 to 1000, got `0`',
    });
    expect(await refusal(own.messages.batches.list({ after_id: 'msgbatch_nope' }))).toEqual({
      status: 400,
      message: 'Expected `after_id` to be a Message Batch id of this listing, got `msgbatch_nope`',
    });
  });
});

describe('cancel', () => {
  it('cancels a batch mid-processing: its unprocessed requests come back canceled', async () => {
    const created = await client.messages.batches.create(
      { requests: texts(3) },
      { headers: { 'x-cohort-batch-latency-ms': String(HOUR) } },
    );
    const canceling = await client.messages.batches.cancel(created.id);
    expect(canceling.processing_status).toBe('canceling');
    expect(canceling.cancel_initiated_at).not.toBeNull();
    expect(canceling.results_url).toBeNull();
    expect(canceling.request_counts.processing).toBe(3);

    const batch = await ended(client, created.id);
    expect(batch.request_counts).toEqual({
      processing: 0,
      succeeded: 0,
      errored: 0,
      canceled: 3,
      expired: 0,
    });
    expect(batch.ended_at).toBe(batch.cancel_initiated_at);
    const results = await resultsById(client, created.id);
    expect([...results.values()]).toEqual([
      { type: 'canceled' },
      { type: 'canceled' },
      { type: 'canceled' },
    ]);
    expect(await refusal(client.messages.batches.cancel(created.id))).toEqual({
      status: 400,
      message: `Expected a Message Batch still processing, got \`${created.id}\`, which has ended`,
    });
  });

  it('keeps what was processed before the cancel', async () => {
    const { server, skip } = await serveWithClock({ batchLatencyMs: 4 * 60_000 });
    const own = clientOf(server, 'cancel-key');
    const created = await own.messages.batches.create({ requests: texts(4) });
    // Requests are processed one after another over the 4 minutes: 2 are done at 2.5.
    skip(150_000);
    expect((await own.messages.batches.cancel(created.id)).processing_status).toBe('canceling');
    const batch = await ended(own, created.id);
    expect(batch.request_counts).toMatchObject({ succeeded: 2, canceled: 2 });
    const results = await resultsById(own, created.id);
    expect(messageOf(results.get('r0')).content).toEqual([{ type: 'text', text: 'Answer 0.' }]);
    expect(messageOf(results.get('r1')).content).toEqual([{ type: 'text', text: 'Answer 1.' }]);
    expect(results.get('r2')).toEqual({ type: 'canceled' });
    expect(results.get('r3')).toEqual({ type: 'canceled' });
  });
});

describe('expiry', () => {
  it('expires a batch by the fault: half its requests processed, the rest expired', async () => {
    const server = await serve({ batchLatencyMs: 20, batchExpireProbability: 1 });
    const own = clientOf(server, 'expire-key');
    const created = await own.messages.batches.create({ requests: texts(4) });
    expect(Date.parse(created.expires_at) - Date.parse(created.created_at)).toBe(20);
    const batch = await ended(own, created.id);
    expect(batch.request_counts).toMatchObject({ succeeded: 2, expired: 2, processing: 0 });
    expect(batch.ended_at).toBe(batch.expires_at);
    const results = await resultsById(own, created.id);
    expect(results.get('r0')?.type).toBe('succeeded');
    expect(results.get('r1')?.type).toBe('succeeded');
    expect(results.get('r2')).toEqual({ type: 'expired' });
    expect(results.get('r3')).toEqual({ type: 'expired' });
  });

  it('expires a batch by the header, on a server without the fault', async () => {
    const created = await client.messages.batches.create(
      { requests: texts(1) },
      { headers: { 'x-cohort-batch-expire': '1' } },
    );
    const batch = await ended(client, created.id);
    expect(batch.request_counts).toMatchObject({ succeeded: 0, expired: 1 });
  });

  it('expires a batch that would take longer than 24 hours at its deadline', async () => {
    const { server, skip } = await serveWithClock({ batchLatencyMs: 2 * DAY });
    const own = clientOf(server, 'deadline-key');
    const created = await own.messages.batches.create({ requests: texts(4) });
    expect((await own.messages.batches.retrieve(created.id)).processing_status).toBe('in_progress');
    skip(DAY);
    const batch = await ended(own, created.id);
    expect(batch.ended_at).toBe(created.expires_at);
    expect(batch.request_counts).toMatchObject({ succeeded: 2, expired: 2 });
  });
});

describe('errored requests', () => {
  it('errors a seeded share of the requests, the same share for the same seed', async () => {
    const erroredIds = async (seed: number): Promise<string[]> => {
      const server = await serve({ batchLatencyMs: 0, batchErrorProbability: 0.5, seed });
      const own = clientOf(server, 'error-key');
      const created = await own.messages.batches.create({ requests: texts(40) });
      const results = await resultsById(own, created.id);
      const ids: string[] = [];
      for (const [id, result] of results) {
        if (result.type !== 'errored') continue;
        ids.push(id);
        expect(result.error).toEqual({
          type: 'error',
          error: {
            type: 'api_error',
            message: 'Internal server error (x-cohort-batch-error / batchErrorProbability)',
          },
          request_id: expect.stringMatching(/^req_cohort_/),
        });
      }
      expect(created.request_counts.errored).toBe(ids.length);
      return ids.sort();
    };
    const first = await erroredIds(7);
    expect(first.length).toBeGreaterThan(0);
    expect(first.length).toBeLessThan(40);
    expect(await erroredIds(7)).toEqual(first);
    expect(await erroredIds(8)).not.toEqual(first);
  });

  it('errors a request whose script errors, and answers it when sent again', async () => {
    const params = scripted([
      { text: 'Second time lucky.', error: { status: 529 }, faultAttempts: 1 },
    ]);
    const once = await client.messages.batches.create({ requests: [{ custom_id: 'a', params }] });
    const failed = await resultsById(client, (await ended(client, once.id)).id);
    expect(errorOf(failed.get('a'))).toEqual({
      type: 'overloaded_error',
      message: 'Scripted 529 overloaded_error',
    });
    // A request sent again after it failed is its next attempt, as a real-time retry is.
    const again = await client.messages.batches.create({ requests: [{ custom_id: 'a', params }] });
    const answered = await resultsById(client, (await ended(client, again.id)).id);
    expect(messageOf(answered.get('a')).content).toEqual([
      { type: 'text', text: 'Second time lucky.' },
    ]);
  });
});

describe('refusals', () => {
  const valid = scripted([{ text: 'ok' }]);

  it.each([
    [
      'a custom_id with a space',
      [{ custom_id: 'a b', params: valid }],
      'Expected `requests.0.custom_id` to be 1 to 64 letters, digits, `_` or `-`, got `"a b"` (string)',
    ],
    [
      'a custom_id of 65 characters',
      [{ custom_id: 'x'.repeat(65), params: valid }],
      `Expected \`requests.0.custom_id\` to be 1 to 64 letters, digits, \`_\` or \`-\`, got \`"${'x'.repeat(65)}"\` (string)`,
    ],
    [
      'an empty custom_id',
      [{ custom_id: '', params: valid }],
      'Expected `requests.0.custom_id` to be 1 to 64 letters, digits, `_` or `-`, got `""` (string)',
    ],
    [
      'a custom_id twice',
      [
        { custom_id: 'same', params: valid },
        { custom_id: 'other', params: valid },
        { custom_id: 'same', params: valid },
      ],
      'Expected `requests.2.custom_id` to be unique within the batch (`requests.0.custom_id` has it too), got `"same"` (string)',
    ],
    [
      'an empty batch',
      [],
      'Expected `requests` to be a non-empty array (a batch holds 1 to 100000 requests), got `[]` (array)',
    ],
    [
      'params that are not an object',
      [{ custom_id: 'a', params: 'hello' }],
      'Expected `requests.0.params` to be an object: a Messages API request, got `"hello"` (string)',
    ],
    [
      'a key besides custom_id and params',
      [{ custom_id: 'a', params: valid, priority: 1 }],
      'requests.0.priority: Extra inputs are not permitted',
    ],
  ])('refuses %s at create', async (_name, requests, message) => {
    const before = model.stats.batchesCreated;
    const create = client.messages.batches.create({ requests } as never);
    expect(await refusal(create)).toEqual({ status: 400, message });
    expect(model.stats.batchesCreated).toBe(before);
  });

  it('refuses more than 100,000 requests, naming the count', async () => {
    const requests = Array.from({ length: 100_001 }, (_, index) => ({
      custom_id: `r${index}`,
      params: {},
    }));
    expect(await refusal(client.messages.batches.create({ requests } as never))).toEqual({
      status: 400,
      message: 'Expected `requests` to hold at most 100000 requests, got 100001',
    });
  });

  it('refuses a body over 256 MB with 413, before reading it', async () => {
    const size = 256 * 1024 * 1024 + 1;
    const { status, body } = await new Promise<{ status: number; body: string }>(
      (resolve, reject) => {
        const request = httpRequest(`${model.url}/v1/messages/batches`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': size },
        });
        request.on('error', reject);
        request.on('response', (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => {
            text += chunk;
          });
          response.on('end', () => {
            request.destroy();
            resolve({ status: response.statusCode ?? 0, body: text });
          });
        });
        request.write('{"requests":[');
      },
    );
    expect(status).toBe(413);
    expect(JSON.parse(body).error).toEqual({
      type: 'request_too_large',
      message: `Expected a body of at most ${256 * 1024 * 1024} bytes, got ${size}`,
    });
  });

  it('errors a streaming request in its result, as the API validates params after create', async () => {
    const created = await client.messages.batches.create({
      requests: [
        { custom_id: 'streams', params: { ...valid, stream: true } as never },
        { custom_id: 'fine', params: valid },
      ],
    });
    expect(created.processing_status).toBe('in_progress');
    const results = await resultsById(client, (await ended(client, created.id)).id);
    expect(errorOf(results.get('streams'))).toEqual({
      type: 'invalid_request_error',
      message:
        "stream: a request in a Message Batch cannot stream; its message comes back whole in the batch's results. Expected `stream` to be false or absent, got `true` (boolean)",
    });
    expect(results.get('fine')?.type).toBe('succeeded');
  });

  it('errors invalid params with the message POST /v1/messages gives them', async () => {
    const params = { model: 'scripted', messages: [{ role: 'user', content: 'Hi.' }] } as never;
    const live = await refusal(client.messages.create(params));
    expect(live.status).toBe(400);
    const created = await client.messages.batches.create({
      requests: [{ custom_id: 'bad', params }],
    });
    const results = await resultsById(client, (await ended(client, created.id)).id);
    expect(errorOf(results.get('bad'))).toEqual({
      type: 'invalid_request_error',
      message: live.message,
    });
  });

  it('refuses a bad x-cohort-batch-* header, naming it', async () => {
    const create = client.messages.batches.create(
      { requests: texts(1) },
      { headers: { 'x-cohort-batch-error': '2' } },
    );
    expect(await refusal(create)).toEqual({
      status: 400,
      message: 'Expected header `x-cohort-batch-error` to be a number from 0 to 1, got `2`',
    });
  });
});

describe('delete and unknown ids', () => {
  it('deletes a batch only once it has ended', async () => {
    const created = await client.messages.batches.create(
      { requests: texts(1) },
      { headers: { 'x-cohort-batch-latency-ms': String(HOUR) } },
    );
    expect(await refusal(client.messages.batches.delete(created.id))).toEqual({
      status: 400,
      message: `Expected a Message Batch whose processing has ended (cancel it first, then wait for it to end), got \`${created.id}\`, which is in_progress`,
    });
    await client.messages.batches.cancel(created.id);
    await ended(client, created.id);
    expect(await client.messages.batches.delete(created.id)).toEqual({
      id: created.id,
      type: 'message_batch_deleted',
    });
    const gone = await apiError(client.messages.batches.retrieve(created.id));
    expect(gone).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('answers 404 not_found_error for an unknown id on every route', async () => {
    const id = 'msgbatch_unknown';
    const message = `Expected the id of a Message Batch of this API key, got \`${id}\` (never created, deleted, or another key's)`;
    const calls = [
      client.messages.batches.retrieve(id),
      client.messages.batches.cancel(id),
      client.messages.batches.delete(id),
    ];
    for (const call of calls) {
      const error = await apiError(call);
      expect(error).toBeInstanceOf(Anthropic.NotFoundError);
      expect(error.error).toMatchObject({
        type: 'error',
        error: { type: 'not_found_error', message },
      });
    }
    const raw = await fetch(`${model.url}/v1/messages/batches/${id}/results`, {
      headers: { 'x-api-key': 'batch-key' },
    });
    expect(raw.status).toBe(404);
  });

  it("does not find another key's batch", async () => {
    const created = await client.messages.batches.create({ requests: texts(1) });
    const other = clientOf(model, 'other-key');
    expect(await apiError(other.messages.batches.retrieve(created.id))).toBeInstanceOf(
      Anthropic.NotFoundError,
    );
  });

  it('has no results before the batch ends', async () => {
    const created = await client.messages.batches.create(
      { requests: texts(1) },
      { headers: { 'x-cohort-batch-latency-ms': String(HOUR) } },
    );
    await expect(client.messages.batches.results(created.id)).rejects.toThrow(
      /No batch `results_url`; Has it finished processing\? in_progress/,
    );
    const raw = await fetch(`${model.url}/v1/messages/batches/${created.id}/results`, {
      headers: { 'x-api-key': 'batch-key' },
    });
    expect(raw.status).toBe(400);
    expect(((await raw.json()) as { error: { message: string } }).error.message).toBe(
      `Expected a Message Batch whose processing has ended, got \`${created.id}\`, which is in_progress: its results are ready once it ends`,
    );
  });
});

describe('options and flags', () => {
  it('takes --batch-latency as a duration, and the batch faults as shares', () => {
    expect(
      parseMockFlags(['--batch-latency', '2s', '--batch-error', '0.1', '--batch-expire', '0.2']),
    ).toEqual({ batchLatencyMs: 2000, batchErrorProbability: 0.1, batchExpireProbability: 0.2 });
    expect(() => parseMockFlags(['--batch-latency', 'soon'])).toThrow(ScriptedModelOptionError);
    expect(() => parseMockFlags(['--batch-latency', 'soon'])).toThrow(
      /Expected `--batch-latency` to be a duration like 500ms.*got `soon`/,
    );
    expect(() => parseMockFlags(['--batch-error', '1.5'])).toThrow(
      'Expected --batch-error to be a number from 0 to 1, got `1.5`',
    );
    expect(resolveOptions({})).toMatchObject({
      batchLatencyMs: 1000,
      batchErrorProbability: 0,
      batchExpireProbability: 0,
    });
    expect(() => resolveOptions({ batchLatencyMs: -1 })).toThrow(
      'Expected `batchLatencyMs` to be a non-negative number, got `-1` (number)',
    );
  });

  it('documents the batch flags in cohort mock --help', async () => {
    let help = '';
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        help += String(chunk);
        done();
      },
    });
    expect(await mockCommand(['--help'], { stdout })).toBe(0);
    expect(help).toMatch(/--batch-latency DURATION/);
    expect(help).toMatch(/--batch-error P/);
    expect(help).toMatch(/--batch-expire P/);
  });
});

describe('the lifecycle, as a property', () => {
  const answer = (outcome: 'succeeded' | 'errored') => ({ outcome, result: '{}' });

  it('ends every request exactly once: processed ones first, then canceled or expired', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom<'succeeded' | 'errored'>('succeeded', 'errored'), {
          minLength: 1,
          maxLength: 40,
        }),
        fc.oneof(fc.integer({ min: 0, max: 3 * DAY }), fc.double({ min: 0, max: 10, noNaN: true })),
        fc.boolean(),
        fc.option(fc.integer({ min: 0, max: 3 * DAY })),
        (outcomes, latencyMs, expiring, cancelAfter) => {
          const entries = outcomes.map((outcome, index) => ({
            customId: `r${index}`,
            answer: answer(outcome),
          }));
          const batch = new StoredBatch('msgbatch_x', entries, 1000, { latencyMs, expiring });
          if (cancelAfter !== null && batch.status(1000 + cancelAfter) === 'in_progress') {
            batch.cancel(1000 + cancelAfter);
            expect(batch.status(1000 + cancelAfter)).toBe('canceling');
          }
          const late = 1000 + 4 * DAY;
          expect(batch.status(late)).toBe('ended');
          const types = batch.resultTypes(late)!;
          expect(types).toHaveLength(entries.length);
          const processed = types.findIndex((type) => type === 'canceled' || type === 'expired');
          const done = processed === -1 ? types.length : processed;
          expect(types.slice(0, done)).toEqual(outcomes.slice(0, done));
          const rest = batch.cancelAt === undefined ? 'expired' : 'canceled';
          expect(types.slice(done).every((type) => type === rest)).toBe(true);
          const counts = batch.counts(late);
          const total = Object.values(counts).reduce((sum, count) => sum + count, 0);
          expect(total).toBe(entries.length);
          expect(counts.processing).toBe(0);
          // A batch ends no later than its deadline, and every request is done when it ends
          // in time.
          expect(batch.endedAt(late)!).toBeLessThanOrEqual(batch.deadline);
          if (batch.cancelAt === undefined && !expiring && latencyMs <= DAY) {
            expect(done).toBe(entries.length);
          }
          // The expiry fault reaches its deadline half-way through.
          if (batch.cancelAt === undefined && expiring) {
            expect(done).toBe(Math.floor(entries.length / 2));
          }
        },
      ),
    );
  });
});
