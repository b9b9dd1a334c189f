import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { checkEngine, type EngineOptions } from '../src/main/engine.js';
import { UsageError } from '../src/shared/errors.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../src/shared/provider/config.js';
import { Provider } from '../src/shared/provider/provider.js';
import { ANTHROPIC_VERSION } from '../src/shared/provider/transport/request-headers.js';
import {
  ATTEMPT_HEADER,
  TRANSPORT_NAMES,
  type TransportName,
} from '../src/shared/provider/transport/types.js';
import type { ProviderRequest } from '../src/shared/provider/types.js';
import { runCli } from './cli-helpers.js';
import { latch } from './helpers.js';

const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

/** One whole streamed Messages-API turn that says `text`. */
function wholeStream(text: string): string {
  const usage = { input_tokens: 3, output_tokens: 0 };
  const message = { id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [] };
  const events: [string, unknown][] = [
    ['message_start', { type: 'message_start', message: { ...message, usage } }],
    [
      'content_block_start',
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    ],
    [
      'content_block_delta',
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } },
    ],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    [
      'message_delta',
      { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 1 } },
    ],
    ['message_stop', { type: 'message_stop' }],
  ];
  return events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join('');
}

interface Seen {
  url: string;
  headers: http.IncomingHttpHeaders;
  socket: net.Socket;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

interface RecordingServer {
  url: string;
  seen: Seen[];
  /** Opens once `count` requests have arrived. */
  arrived(count: number): Promise<void>;
}

/**
 * A real server that records each request and answers it with a whole stream, once `hold`
 * resolves (at once without it).
 */
async function recordingServer(hold?: Promise<void>): Promise<RecordingServer> {
  const seen: Seen[] = [];
  const waiters: { count: number; open: () => void }[] = [];
  const server = http.createServer((request, response) => {
    seen.push({ url: request.url ?? '', headers: request.headers, socket: request.socket });
    for (const waiter of waiters) if (seen.length >= waiter.count) waiter.open();
    request.resume();
    void (hold ?? Promise.resolve()).then(() => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(wholeStream('ok'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const arrived = (count: number) => {
    const ready = latch();
    if (seen.length >= count) ready.open();
    else waiters.push({ count, open: () => ready.open() });
    return ready.opened;
  };
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, seen, arrived };
}

function provider(transport: TransportName, overrides: Partial<ProviderConfig>): Provider {
  const made = new Provider({ ...DEFAULT_PROVIDER_CONFIG, model: 'm', transport, ...overrides });
  closers.push(() => made.close());
  return made;
}

const REQUEST: ProviderRequest = { messages: [{ role: 'user', content: 'hi' }], tools: [] };

async function ask(target: Provider): Promise<void> {
  const result = await target.complete(REQUEST, { signal: new AbortController().signal });
  expect(result).toMatchObject({ ok: true, turn: { text: 'ok' } });
}

/** Runs `body` with environment variables set (undefined: unset), then puts them back. */
async function withEnv(
  values: Record<string, string | undefined>,
  body: () => Promise<void>,
): Promise<void> {
  const saved = Object.fromEntries(Object.keys(values).map((name) => [name, process.env[name]]));
  const apply = (next: Record<string, string | undefined>) => {
    for (const [name, value] of Object.entries(next)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  apply(values);
  try {
    await body();
  } finally {
    apply(saved);
  }
}

const NO_CREDENTIALS = { ANTHROPIC_API_KEY: undefined, ANTHROPIC_AUTH_TOKEN: undefined };

describe('what each transport sends', () => {
  it('the same path, credential, version, types, custom headers and attempt number', async () => {
    const server = await recordingServer();
    await withEnv({ ...NO_CREDENTIALS, ANTHROPIC_API_KEY: 'test-key-0123' }, async () => {
      for (const transport of TRANSPORT_NAMES) {
        const headers = { 'anthropic-beta': 'tools-2099', 'x-extra': 'yes' };
        await ask(provider(transport, { baseURL: `${server.url}/gateway/`, headers }));
      }
    });
    const [undici, sdk] = server.seen;
    for (const seen of [undici, sdk]) {
      expect(seen?.url).toBe('/gateway/v1/messages');
      expect(seen?.headers).toMatchObject({
        authorization: 'Bearer test-key-0123',
        'anthropic-version': ANTHROPIC_VERSION,
        'anthropic-beta': 'tools-2099',
        'x-extra': 'yes',
        'content-type': 'application/json',
        accept: 'application/json',
        [ATTEMPT_HEADER]: '0',
      });
    }
    expect(undici?.headers['user-agent']).toBe(`cohort/${VERSION}`);
    expect(sdk?.headers['user-agent']).toMatch(/^Anthropic\/JS /);
  });

  it('ANTHROPIC_AUTH_TOKEN when no key is set; the key when both are', async () => {
    const server = await recordingServer();
    await withEnv({ ...NO_CREDENTIALS, ANTHROPIC_AUTH_TOKEN: 'token-0123' }, async () => {
      for (const transport of TRANSPORT_NAMES)
        await ask(provider(transport, { baseURL: server.url }));
    });
    await withEnv(
      { ANTHROPIC_API_KEY: 'key-0123', ANTHROPIC_AUTH_TOKEN: 'token-0123' },
      async () => {
        for (const transport of TRANSPORT_NAMES)
          await ask(provider(transport, { baseURL: server.url }));
      },
    );
    expect(server.seen.map((seen) => seen.headers.authorization)).toEqual([
      'Bearer token-0123',
      'Bearer token-0123',
      'Bearer key-0123',
      'Bearer key-0123',
    ]);
  });

  it('a server that echoes the token back: the message shows [redacted], never the token', async () => {
    const token = 'gateway-token-0123456789';
    const server = http.createServer((request, response) => {
      response.writeHead(401, { 'content-type': 'application/json' });
      const message = `bad token ${request.headers.authorization}`;
      response.end(
        JSON.stringify({ type: 'error', error: { type: 'authentication_error', message } }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    await withEnv({ ...NO_CREDENTIALS, ANTHROPIC_AUTH_TOKEN: token }, async () => {
      for (const transport of TRANSPORT_NAMES) {
        const result = await provider(transport, { baseURL: url }).complete(REQUEST, {
          signal: new AbortController().signal,
        });
        expect(result).toMatchObject({ ok: false, error: { code: 'auth', status: 401 } });
        const message = result.ok ? '' : result.error.message;
        expect(message).toContain('authentication_error: bad token Bearer [redacted]');
        expect(message).not.toContain(token);
      }
    });
  });

  it('the base URL from ANTHROPIC_BASE_URL when the config names none', async () => {
    const server = await recordingServer();
    await withEnv({ ANTHROPIC_BASE_URL: `${server.url}/from-env` }, async () => {
      for (const transport of TRANSPORT_NAMES) await ask(provider(transport, {}));
    });
    expect(server.seen.map((seen) => seen.url)).toEqual([
      '/from-env/v1/messages',
      '/from-env/v1/messages',
    ]);
  });
});

describe('the undici transport pool', () => {
  it('unset connections: one per request in flight', async () => {
    const release = latch();
    const server = await recordingServer(release.opened);
    const target = provider('undici', { baseURL: server.url });
    const calls = [ask(target), ask(target), ask(target)];
    // All three reach the server before any is answered: none waits for a connection.
    await server.arrived(3);
    release.open();
    await Promise.all(calls);
    expect(new Set(server.seen.map((seen) => seen.socket)).size).toBe(3);
  });

  it('connections: 1 sends them one after another on one kept-alive connection', async () => {
    const server = await recordingServer();
    const target = provider('undici', { baseURL: server.url, connections: 1 });
    await Promise.all([ask(target), ask(target), ask(target)]);
    expect(server.seen).toHaveLength(3);
    expect(new Set(server.seen.map((seen) => seen.socket)).size).toBe(1);
  });

  it('goes through HTTP_PROXY, and around it for a host in NO_PROXY', async () => {
    const server = await recordingServer();
    const tunnels: string[] = [];
    const proxy = http.createServer();
    // undici tunnels through the proxy with CONNECT, for http targets too.
    proxy.on('connect', (request: http.IncomingMessage, client: net.Socket) => {
      tunnels.push(request.url ?? '');
      const [host, port] = (request.url ?? '').split(':');
      const upstream = net.connect(Number(port), host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.pipe(client).pipe(upstream);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    closers.push(
      () =>
        new Promise<void>((resolve) => {
          proxy.closeAllConnections();
          proxy.close(() => resolve());
        }),
    );
    const proxyURL = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    const clear = { http_proxy: undefined, https_proxy: undefined, no_proxy: undefined };
    await withEnv({ ...clear, HTTP_PROXY: proxyURL, NO_PROXY: undefined }, async () => {
      await ask(provider('undici', { baseURL: server.url }));
    });
    expect(tunnels).toEqual([server.url.replace('http://', '')]);
    await withEnv({ ...clear, HTTP_PROXY: proxyURL, NO_PROXY: '127.0.0.1' }, async () => {
      await ask(provider('undici', { baseURL: server.url }));
    });
    expect(tunnels).toHaveLength(1);
    expect(server.seen).toHaveLength(2);
  });
});

async function refusal(options: EngineOptions): Promise<string> {
  const error = await checkEngine(options).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(UsageError);
  return (error as UsageError).message;
}

describe('provider.transport and provider.connections are checked up front', () => {
  it('refuses an unknown transport and a connection count below 1', async () => {
    expect(await refusal({ provider: { transport: 'http2' as TransportName } })).toBe(
      'Expected `provider.transport` to be undici or sdk, got `http2` (string)',
    );
    expect(await refusal({ provider: { connections: 0 } })).toBe(
      'Expected `provider.connections` to be a whole number from 1 and up, got `0` (number)',
    );
    expect(await refusal({ provider: { connections: 2.5 } })).toMatch(/got `2\.5` \(number\)$/);
    await expect(
      checkEngine({ provider: { transport: 'sdk', connections: 8 } }),
    ).resolves.toBeDefined();
  });
});

describe('--transport and --connections', () => {
  it('a bad --transport is a usage error, exit 2, naming what was expected', async () => {
    const run = runCli(['agent', '--transport', 'http2', 'hello']);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain('Expected `--transport` to be undici or sdk, got `http2`');
  });

  it('--connections 0 is a usage error, exit 2', async () => {
    const run = runCli(['agent', '--connections', '0', 'hello']);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain(
      'Expected `--connections` to be a whole number from 1 and up, got `0`',
    );
  });

  it.each([
    ['sdk', []],
    ['undici', ['--connections', '2']],
  ])('--transport %s runs an agent on the built-in model', async (transport, extra) => {
    const run = runCli(['agent', '--json', '--transport', transport, ...extra, 'Say hello.']);
    expect((await run.exit).code).toBe(0);
    expect(JSON.parse(run.stdout())).toMatchObject({ outcome: 'complete' });
  });

  it('the help lists both flags', async () => {
    const run = runCli(['help', 'agent']);
    expect((await run.exit).code).toBe(0);
    expect(run.stdout()).toMatch(/--transport undici\|sdk/);
    expect(run.stdout()).toMatch(/--connections N/);
  });
});
