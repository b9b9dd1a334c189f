import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { APIConnectionError } from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { classify } from '../src/shared/provider/classify.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../src/shared/provider/config.js';
import { ATTEMPT_HEADER, Provider } from '../src/shared/provider/provider.js';
import type { ProviderRequest, RetryInfo } from '../src/shared/provider/types.js';
import { scriptBlock } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { closedPort, readTranscript } from './helpers.js';

/** A real HTTP server whose every request is answered by `handler`; it counts the requests. */
interface FakeServer {
  url: string;
  requests: http.IncomingMessage[];
  close(): Promise<void>;
}

const servers: FakeServer[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function fakeServer(handler: http.RequestListener): Promise<FakeServer> {
  const requests: http.IncomingMessage[] = [];
  const server = http.createServer((request, response) => {
    requests.push(request);
    handler(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const fake: FakeServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        // A server that never answers keeps its sockets open: close them too.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(fake);
  return fake;
}

function answer(status: number, contentType: string, body: string): http.RequestListener {
  return (_request, response) => {
    response.writeHead(status, { 'content-type': contentType });
    response.end(body);
  };
}

const MESSAGE_START = {
  type: 'message_start',
  message: {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'cohort-test',
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 3, output_tokens: 0 },
  },
};

/** A whole streamed Messages-API turn with one text block, as the API sends it. */
function wholeStream(text: string): string {
  const events: [string, unknown][] = [
    ['message_start', MESSAGE_START],
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
      {
        type: 'message_delta',
        delta: { stop_reason: 'end_turn', stop_sequence: null },
        usage: { output_tokens: 2 },
      },
    ],
    ['message_stop', { type: 'message_stop' }],
  ];
  return events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join('');
}

const API_ERROR = (type: string, message: string) =>
  JSON.stringify({ type: 'error', error: { type, message } });

function provider(baseURL: string, overrides: Partial<ProviderConfig> = {}): Provider {
  return new Provider({
    ...DEFAULT_PROVIDER_CONFIG,
    model: 'cohort-test',
    baseURL,
    backoffBaseMs: 5,
    backoffMaxMs: 20,
    ...overrides,
  });
}

const REQUEST: ProviderRequest = { messages: [{ role: 'user', content: 'hi' }], tools: [] };
const signal = () => new AbortController().signal;

async function complete(target: Provider, onRetry?: (info: RetryInfo) => void) {
  return target.complete(REQUEST, { signal: signal(), ...(onRetry ? { onRetry } : {}) });
}

describe('connection failures name the URL and the cause', () => {
  it('a closed port: ECONNREFUSED, retried, then given up with the attempt count', async () => {
    const port = await closedPort();
    const result = await complete(provider(`http://127.0.0.1:${port}`, { maxRetries: 1 }));
    expect(result).toMatchObject({ ok: false, calls: 2, error: { code: 'connection' } });
    expect(!result.ok && result.error.message).toBe(
      `cannot connect to http://127.0.0.1:${port}/v1/messages: ECONNREFUSED (connection refused: nothing listens on that port) (after 2 attempts)`,
    );
  });

  it('https to a plain-http server is a TLS error, and final: no retry can fix it', async () => {
    const server = await fakeServer(answer(200, 'text/plain', 'plain http'));
    const result = await complete(
      provider(server.url.replace('http:', 'https:'), { maxRetries: 3 }),
    );
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'connection' } });
    expect(!result.ok && result.error.message).toMatch(
      /^cannot connect to https:\/\/127\.0\.0\.1:\d+\/v1\/messages: ERR_SSL_WRONG_VERSION_NUMBER \(TLS handshake failed/,
    );
  });

  it('never shows credentials or the query of the base URL', async () => {
    const port = await closedPort();
    const result = await complete(
      provider(`http://user:hunter2-pass@127.0.0.1:${port}/proxy/?token=query-secret`, {
        maxRetries: 3,
      }),
    );
    expect(result).toMatchObject({ ok: false, error: { code: 'connection' } });
    const message = !result.ok ? result.error.message : '';
    expect(message).toContain(`http://127.0.0.1:${port}/proxy/v1/messages`);
    expect(message).not.toMatch(/hunter2|query-secret|user:/);
    expect(result).toMatchObject({ calls: 1 });
  });

  it('a port fetch refuses (9, discard) is said so, and not retried', async () => {
    const result = await complete(provider('http://127.0.0.1:9', { maxRetries: 3 }));
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'connection' } });
    expect(!result.ok && result.error.message).toBe(
      'cannot connect to http://127.0.0.1:9/v1/messages: bad port (fetch refuses this port, as browsers do; use another)',
    );
  });

  it('a server that never answers: the wait is named with its flag, and it is retried', async () => {
    const server = await fakeServer(() => {});
    const result = await complete(provider(server.url, { requestTimeoutMs: 150, maxRetries: 1 }));
    expect(result).toMatchObject({ ok: false, calls: 2, error: { code: 'connection' } });
    expect(!result.ok && result.error.message).toBe(
      `no response from ${server.url}/v1/messages within 150 ms (the limit is set by --request-timeout, provider.requestTimeoutMs) (after 2 attempts)`,
    );
    expect(server.requests).toHaveLength(2);
  });

  it('a stream that goes quiet after its headers is stalled, named with --idle-timeout', async () => {
    const server = await fakeServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.flushHeaders();
    });
    const result = await complete(provider(server.url, { idleTimeoutMs: 150, maxRetries: 0 }));
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'stalled' } });
    expect(!result.ok && result.error.message).toBe(
      `no stream event from ${server.url}/v1/messages for 150 ms (the limit is set by --idle-timeout, provider.idleTimeoutMs)`,
    );
  });
});

describe('classify reads the cause down the chain', () => {
  // The shapes undici gives: APIConnectionError ← TypeError "fetch failed" ← the coded error.
  const wrapped = (code: string, message: string) =>
    new APIConnectionError({
      cause: new TypeError('fetch failed', { cause: Object.assign(new Error(message), { code }) }),
    });
  const context = { endpoint: 'https://api.example.test/v1/messages', requestTimeoutMs: 1000 };

  it.each([
    ['CERT_HAS_EXPIRED', "the server's TLS certificate has expired", true],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', "the server's TLS certificate is self-signed", true],
    ['ERR_TLS_SOMETHING_NEW', 'TLS error: tls went wrong', true],
    ['ENOTFOUND', 'host name not found', true],
    ['EAI_AGAIN', 'temporary DNS failure', undefined],
    ['ECONNRESET', 'connection reset by the server', undefined],
    ['ETIMEDOUT', 'the connection timed out', undefined],
  ])('%s', (code, text, final) => {
    const failure = classify(wrapped(code, 'tls went wrong'), context);
    expect(failure.error).toEqual({
      code: 'connection',
      message: `cannot connect to https://api.example.test/v1/messages: ${code} (${text})`,
    });
    expect(failure.final).toBe(final);
  });
});

describe('HTTP statuses', () => {
  const KEY = 'sk-ant-test-KEY-0123456789abcdef';
  let savedKey: string | undefined;

  function withKey(key: string | undefined): void {
    savedKey = process.env.ANTHROPIC_API_KEY;
    if (key === undefined) delete process.env.ANTHROPIC_API_KEY;
    else process.env.ANTHROPIC_API_KEY = key;
  }

  afterEach(() => {
    if (savedKey === undefined) delete process.env.ANTHROPIC_API_KEY;
    else process.env.ANTHROPIC_API_KEY = savedKey;
  });

  it('401 is auth, not retried; it names the env var and never the key, even when echoed', async () => {
    withKey(KEY);
    // A hostile or careless server that repeats the key it was sent.
    const server = await fakeServer((request, response) => {
      response.writeHead(401, { 'content-type': 'application/json' });
      response.end(
        API_ERROR('authentication_error', `invalid x-api-key ${request.headers.authorization}`),
      );
    });
    const result = await complete(provider(server.url, { maxRetries: 3 }));
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'auth', status: 401 } });
    // No governor, no breaker to stand behind it.
    expect(!result.ok && result.error.breakerOpen).toBeUndefined();
    const message = !result.ok ? result.error.message : '';
    expect(message).toBe(
      `the API key was refused (${server.url}/v1/messages answered 401: authentication_error: invalid x-api-key Bearer [redacted]); check the key in ANTHROPIC_API_KEY`,
    );
    expect(server.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(message).not.toContain('0123456789abcdef');
  });

  it('403 is auth too; without a key set the message says so', async () => {
    withKey(undefined);
    const server = await fakeServer(
      answer(403, 'application/json', API_ERROR('permission_error', 'not allowed')),
    );
    const result = await complete(provider(server.url, { maxRetries: 3 }));
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'auth', status: 403 } });
    expect(!result.ok && result.error.message).toMatch(
      /permission_error: not allowed\); ANTHROPIC_API_KEY is not set$/,
    );
  });

  it('404 from something that is not the API hints at the base URL; the API own 404 does not', async () => {
    const page = await fakeServer(answer(404, 'text/html', '<html>\n<h1>Not Found</h1></html>'));
    const wrongUrl = await complete(provider(page.url, { maxRetries: 3 }));
    expect(wrongUrl).toMatchObject({
      ok: false,
      calls: 1,
      error: { code: 'bad_request', status: 404 },
    });
    expect(!wrongUrl.ok && wrongUrl.error.message).toBe(
      `${page.url}/v1/messages answered 404: <html>\\n<h1>Not Found</h1></html>; is the base URL right? It should be the server root: cohort adds /v1/messages`,
    );
    const api = await fakeServer(
      answer(404, 'application/json', API_ERROR('not_found_error', 'model: cohort-test')),
    );
    const unknownModel = await complete(provider(api.url));
    expect(!unknownModel.ok && unknownModel.error.message).toBe(
      `${api.url}/v1/messages answered 404: not_found_error: model: cohort-test`,
    );
  });

  it('a 500 HTML page is server_error, retried, with the start of the page', async () => {
    const server = await fakeServer(answer(500, 'text/html', '<h1>Internal error</h1>'));
    const result = await complete(provider(server.url, { maxRetries: 1 }));
    expect(result).toMatchObject({
      ok: false,
      calls: 2,
      error: { code: 'server_error', status: 500 },
    });
    expect(!result.ok && result.error.message).toContain('answered 500: <h1>Internal error</h1>');
  });

  it('reports each retry with the attempt, the limit, the wait, the status and the message', async () => {
    const server = await fakeServer((_request, response) => {
      response.writeHead(429, {
        'content-type': 'application/json',
        'retry-after-ms': '7',
        'request-id': 'req_0123abc',
      });
      response.end(API_ERROR('rate_limit_error', 'slow down'));
    });
    const retries: RetryInfo[] = [];
    const result = await complete(provider(server.url, { maxRetries: 2 }), (info) =>
      retries.push(info),
    );
    expect(result).toMatchObject({ ok: false, calls: 3, error: { code: 'rate_limited' } });
    const said = `${server.url}/v1/messages answered 429: rate_limit_error: slow down`;
    expect(retries).toEqual([
      {
        attempt: 2,
        maxAttempts: 3,
        waitMs: 7,
        error: { code: 'rate_limited', status: 429, message: said, requestId: 'req_0123abc' },
      },
      {
        attempt: 3,
        maxAttempts: 3,
        waitMs: 7,
        error: { code: 'rate_limited', status: 429, message: said, requestId: 'req_0123abc' },
      },
    ]);
    expect(!result.ok && result.error.message).toBe(`${said} (after 3 attempts)`);
    // The server saw the attempts numbered from 0.
    expect(server.requests.map((request) => request.headers[ATTEMPT_HEADER])).toEqual([
      '0',
      '1',
      '2',
    ]);
  });
});

describe('a 200 that is not the Messages API is bad_response, and final', () => {
  it('an HTML page: its content-type and the start of its body, control characters escaped', async () => {
    const server = await fakeServer(
      answer(200, 'text/html; charset=utf-8', '<!doctype html>\n<title>\u001b[31mWelcome</title>'),
    );
    const result = await complete(provider(server.url, { maxRetries: 3 }));
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'bad_response' } });
    expect(!result.ok && result.error.message).toBe(
      `${server.url}/v1/messages answered 200 with content-type text/html; charset=utf-8 and a body that starts \`<!doctype html>\\n<title>\\u001b[31mWelcome</title>\`: not the Messages API; is the base URL right?`,
    );
  });

  it('a JSON body that is not an event stream', async () => {
    const server = await fakeServer(
      answer(
        200,
        'application/json',
        JSON.stringify({ id: 'msg_1', type: 'message', content: [] }),
      ),
    );
    const result = await complete(provider(server.url, { maxRetries: 3 }));
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'bad_response' } });
    expect(!result.ok && result.error.message).toContain(
      'with content-type application/json and a body that starts `{"id":"msg_1","type":"message"',
    );
  });

  it('an event stream that never sends message_start', async () => {
    const server = await fakeServer(
      answer(200, 'text/event-stream', 'event: hello\ndata: {"type":"hello"}\n\n'),
    );
    const result = await complete(provider(server.url, { maxRetries: 3 }));
    expect(result).toMatchObject({ ok: false, calls: 1, error: { code: 'bad_response' } });
    expect(!result.ok && result.error.message).toBe(
      `${server.url}/v1/messages answered with an event stream that has no message_start event: not the Messages API; is the base URL right?`,
    );
  });

  it('a stream cut before its first event is a connection fault, retried, and the retry succeeds', async () => {
    let served = 0;
    const server = await fakeServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      // A proxy letting go of the first stream at once; the second one is whole.
      response.end(served++ === 0 ? '' : wholeStream('hello'));
    });
    const result = await complete(provider(server.url, { maxRetries: 2 }));
    expect(result).toMatchObject({ ok: true, calls: 2 });
    expect(result.ok && result.turn.text).toBe('hello');
  });

  it('a whole Messages-API stream served without a content-type is taken as it is', async () => {
    const server = await fakeServer((_request, response) => {
      response.writeHead(200);
      response.end(wholeStream('no header needed'));
    });
    const result = await complete(provider(server.url, { maxRetries: 0 }));
    expect(result).toMatchObject({ ok: true, calls: 1 });
    expect(result.ok && result.turn.text).toBe('no header needed');
  });

  it('a Messages-API stream cut off after message_start is a connection fault, retried', async () => {
    const start = MESSAGE_START;
    const server = await fakeServer(
      answer(200, 'text/event-stream', `event: message_start\ndata: ${JSON.stringify(start)}\n\n`),
    );
    const result = await complete(provider(server.url, { maxRetries: 1 }));
    expect(result).toMatchObject({ ok: false, calls: 2, error: { code: 'connection' } });
    expect(!result.ok && result.error.message).toBe(
      `the stream from ${server.url}/v1/messages ended before message_stop (after 2 attempts)`,
    );
  });
});

describe('the CLI says what the provider did', () => {
  it('agent --json against a 401: one request, code auth, exit 1', async () => {
    const server = await fakeServer(
      answer(401, 'application/json', API_ERROR('authentication_error', 'invalid x-api-key')),
    );
    const run = runCli(['agent', 'hi', '--json', '--base-url', server.url, '--threads', '1']);
    const { code } = await run.exit;
    expect(code).toBe(1);
    const result = JSON.parse(run.stdout());
    expect(result).toMatchObject({ outcome: 'failed', code: 'auth' });
    expect(result.reason).toContain('the API key was refused');
    expect(result.reason).toContain('ANTHROPIC_API_KEY is not set');
    expect(server.requests).toHaveLength(1);
  });

  it('agent --json against a web page: code bad_response, no retries', async () => {
    const server = await fakeServer(answer(200, 'text/html', '<html>hello</html>'));
    const run = runCli(['agent', 'hi', '--json', '--base-url', server.url, '--threads', '1']);
    expect((await run.exit).code).toBe(1);
    const result = JSON.parse(run.stdout());
    expect(result).toMatchObject({ outcome: 'failed', code: 'bad_response' });
    expect(result.reason).toContain('content-type text/html');
    expect(server.requests).toHaveLength(1);
  });

  it('--request-timeout gives up on an attempt that waits too long', async () => {
    // Every attempt is refused (401, never retried), the first only after 3 s. With the flag the
    // first attempt is given up at 200 ms and a second one is made; with the default two minutes
    // the first one would get its late 401 and be the only request.
    const refuse = answer(401, 'application/json', API_ERROR('authentication_error', 'no'));
    const server = await fakeServer((request, response) => {
      if (request.headers[ATTEMPT_HEADER] !== '0') refuse(request, response);
      else setTimeout(() => refuse(request, response), 3000).unref();
    });
    const run = runCli([
      'agent',
      'hi',
      '--json',
      '--base-url',
      server.url,
      '--threads',
      '1',
      '--request-timeout',
      '200ms',
    ]);
    expect((await run.exit).code).toBe(1);
    expect(JSON.parse(run.stdout())).toMatchObject({ outcome: 'failed', code: 'auth' });
    expect(server.requests).toHaveLength(2);
  });

  it.each([
    ['--request-timeout', '0'],
    ['--request-timeout', 'soon'],
    ['--idle-timeout', '0ms'],
    ['--idle-timeout', '-1s'],
    ['--max-tokens', '0'],
    ['--max-tokens', 'lots'],
  ])('%s %s is a usage error naming the flag', async (flag, value) => {
    const run = runCli(['agent', 'hi', flag, value, '--provider', 'mock']);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain(`\`${flag}\``);
  });

  it('--max-tokens reaches the provider: a reply cut by it tells the model why', async () => {
    // The scripted model honours max_tokens: 40 tokens hold about 160 characters, so the
    // reply call's JSON is cut, and the nudge names the cause.
    const long = 'word '.repeat(200);
    const script = scriptBlock([{ reply: long }, { reply: 'short' }]);
    const run = runCli([
      'agent',
      `go\n${script}`,
      '--json',
      '--provider',
      'mock',
      '--max-tokens',
      '40',
    ]);
    expect((await run.exit).code).toBe(0);
    const result = JSON.parse(run.stdout());
    expect(result).toMatchObject({ outcome: 'complete', text: 'short' });
    const transcript = JSON.stringify(readTranscript(result));
    expect(transcript).toContain('reached max_tokens before its arguments were complete');
  });
});
