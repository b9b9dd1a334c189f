/**
 * The scripted model's server capacity (`maxStreams`): a request that arrives while that many
 * responses are being answered gets `529 overloaded_error` at once. Through the official SDK
 * over real HTTP, in process and as `cohort mock`. Responses are held open by a long ttft and
 * released by aborting them, so nothing here depends on timing.
 */

import { once } from 'node:events';
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ScriptedModel,
  type ScriptedModelOptions,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import { resolveOptions } from '../src/testing/load-model.js';
import { parseMockFlags } from '../src/testing/serve-command.js';
import { runCli } from './cli-helpers.js';
import { apiError } from './helpers.js';

/** Long enough that a held response never reaches its first token during a test. */
const HOLD = { 'x-cohort-ttft-ms': '600000' };

let model: ScriptedModel | undefined;

afterEach(async () => {
  await model?.close();
  model = undefined;
});

async function start(options: ScriptedModelOptions): Promise<ScriptedModel> {
  model = await startScriptedModel(options);
  return model;
}

function clientOf(url: string): Anthropic {
  return new Anthropic({ apiKey: 'test-key', baseURL: url, maxRetries: 0 });
}

function params(index: number) {
  return {
    model: 'cohort-scripted',
    max_tokens: 64,
    messages: [
      { role: 'user' as const, content: `Request ${index}.\n${scriptBlock([{ text: 'ok' }])}` },
    ],
  };
}

/** Starts a streaming request held at its ttft; resolves once its headers arrived. */
async function holdStream(client: Anthropic, index: number) {
  const controller = new AbortController();
  const stream = await client.messages.create(
    { ...params(index), stream: true },
    { headers: HOLD, signal: controller.signal },
  );
  return { stream, controller };
}

/** Aborts held responses and waits until the server saw each close (it frees their slots). */
async function release(
  server: ScriptedModel,
  held: { controller: AbortController }[],
): Promise<void> {
  let closed = 0;
  const allClosed = new Promise<void>((resolve) => {
    const onClosed = (): void => {
      if (++closed < held.length) return;
      server.off('client-closed', onClosed);
      resolve();
    };
    server.on('client-closed', onClosed);
  });
  for (const { controller } of held) controller.abort();
  await allClosed;
}

async function streamText(client: Anthropic, index: number): Promise<string> {
  const stream = await client.messages.create({ ...params(index), stream: true });
  let text = '';
  for await (const event of stream) {
    if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') {
      text += event.delta.text;
    }
  }
  return text;
}

describe('scripted model: maxStreams', () => {
  it('answers the request beyond N open streams 529 at once, and frees the slots as they close', async () => {
    const server = await start({ maxStreams: 3 });
    const client = clientOf(server.url);
    // Four at once, each held at its ttft: whichever arrives fourth is the one refused.
    const settled = await Promise.allSettled(
      [0, 1, 2, 3].map((index) => holdStream(client, index)),
    );
    const held = settled.flatMap((outcome) =>
      outcome.status === 'fulfilled' ? [outcome.value] : [],
    );
    const refused = settled.flatMap((outcome) =>
      outcome.status === 'rejected' ? [outcome.reason] : [],
    );
    expect(held).toHaveLength(3);
    expect(refused).toHaveLength(1);
    const error = refused[0] as InstanceType<typeof Anthropic.APIError>;
    expect(error).toBeInstanceOf(Anthropic.OverloadedError);
    expect(error.status).toBe(529);
    expect(error.type).toBe('overloaded_error');
    expect(error.message).toContain('maxStreams: already answering 3 responses');
    // Like the real API's overloaded answer: nothing says when to come back.
    expect(error.headers?.get('retry-after')).toBeNull();
    expect(server.stats.overloaded529).toBe(1);
    expect(server.stats.streamed).toBe(3);
    // Held and full, it goes on refusing.
    expect((await apiError(client.messages.create(params(4)))).status).toBe(529);
    expect(server.stats.overloaded529).toBe(2);
    await release(server, held);
    expect(await streamText(client, 5)).toBe('ok');
    expect(server.stats.overloaded529).toBe(2);
  });

  it('frees a slot when a response ends normally, streamed or JSON', async () => {
    const server = await start({ maxStreams: 1 });
    const client = clientOf(server.url);
    // With one slot, each of these would be refused if an ended response still held it.
    for (let index = 0; index < 3; index++) expect(await streamText(client, index)).toBe('ok');
    const message = await client.messages.create(params(3));
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'ok' });
    expect(await streamText(client, 4)).toBe('ok');
    expect(server.stats.overloaded529).toBe(0);
    expect(server.stats.completed).toBe(5);
  });

  it('counts a JSON response waiting for its ttft as being answered', async () => {
    const server = await start({ maxStreams: 1 });
    const client = clientOf(server.url);
    const controller = new AbortController();
    const admitted = once(server, 'request');
    const waiting = client.messages.create(params(0), { headers: HOLD, signal: controller.signal });
    waiting.catch(() => {});
    await admitted;
    const error = await apiError(client.messages.create(params(1)));
    expect(error.status).toBe(529);
    await release(server, [{ controller }]);
    expect((await client.messages.create(params(2))).content).toHaveLength(1);
  });

  it('changes nothing when unset: many open streams, no 529', async () => {
    const server = await start({});
    const client = clientOf(server.url);
    const held = await Promise.all(
      Array.from({ length: 20 }, (_, index) => holdStream(client, index)),
    );
    expect(server.stats.streamed).toBe(20);
    expect(server.stats.overloaded529).toBe(0);
    await release(server, held);
  });

  it('checks the option and the flag', () => {
    expect(resolveOptions({}).maxStreams).toBe(0);
    expect(resolveOptions({ maxStreams: 48 }).maxStreams).toBe(48);
    expect(() => resolveOptions({ maxStreams: 1.5 })).toThrow(
      'Expected `maxStreams` to be an integer from 0 and up, got `1.5` (number)',
    );
    expect(() => resolveOptions({ maxStreams: -1 })).toThrow(
      'Expected `maxStreams` to be an integer from 0 and up, got `-1` (number)',
    );
    expect(parseMockFlags(['--max-streams', '48'])).toEqual({ maxStreams: 48 });
  });

  it('takes --max-streams in cohort mock, and exits 2 on a bad value', async () => {
    const server = runCli(['mock', '--port', '0', '--max-streams', '1']);
    try {
      await server.waitFor(/listening on (http:\/\/\S+)/, 'stdout');
      const url = /listening on (http:\/\/\S+)/.exec(server.stdout())?.[1] ?? '';
      const client = clientOf(url);
      const held = await holdStream(client, 0);
      const error = await apiError(client.messages.create(params(1)));
      expect(error).toBeInstanceOf(Anthropic.OverloadedError);
      held.controller.abort();
    } finally {
      server.child.kill('SIGTERM');
      await server.exit;
    }
    const bad = runCli(['mock', '--max-streams', 'many']);
    expect((await bad.exit).code).toBe(2);
    expect(bad.stderr()).toContain(
      'Expected --max-streams to be an integer from 0 and up, got `many`',
    );
    expect(bad.stderr()).toContain('--max-streams N');
  });
});
