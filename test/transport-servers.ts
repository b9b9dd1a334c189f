import { execFile, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { type ScriptStep, scriptBlock, startScriptedModel } from '../src/testing/index.js';

/**
 * The odd servers of the transport conformance suite: what the scripted model cannot do (write a
 * body one byte at a time, answer garbage, reset before headers, never answer, speak TLS). Each
 * one is plain node:http or node:https, so both transports meet exactly the same bytes.
 */

/** Something a provider can be pointed at, and how many requests it has received. */
export interface Target {
  readonly url: string;
  readonly port: number;
  requests(): number;
  /** Calls `listener` as each request arrives (for the scripted model: once it is checked). */
  onRequest(listener: () => void): void;
  close(): Promise<void>;
}

/** Answers one request; the request body has been read in full before it is called. */
export type Handler = (request: IncomingMessage, response: ServerResponse) => void;

export interface TlsFiles {
  key: Buffer;
  cert: Buffer;
  /** The certificate's path, for NODE_EXTRA_CA_CERTS. */
  certPath: string;
}

/** Starts a server on 127.0.0.1, on a port of its own, that runs `handler` for every request. */
export async function startServer(
  handler: Handler,
  options: { tls?: TlsFiles } = {},
): Promise<Target> {
  let requests = 0;
  const listeners: (() => void)[] = [];
  const onRequest = (request: IncomingMessage, response: ServerResponse) => {
    requests++;
    for (const listener of listeners) listener();
    // Read the whole request first, so a fault never races the client's own upload.
    request.resume();
    request.once('end', () => handler(request, response));
  };
  const { tls } = options;
  const server = tls
    ? https.createServer({ key: tls.key, cert: tls.cert }, onRequest)
    : http.createServer(onRequest);
  const sockets = new Set<Socket>();
  // A TLS server hands out its TLS sockets here; the handshake failures end on their own.
  server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    port,
    requests: () => requests,
    onRequest: (listener) => listeners.push(listener),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A `Target` at `url` that nothing serves: a port just let go of, or one never asked. */
export async function nowhere(url?: (port: number) => string): Promise<Target> {
  const probe = await startServer(silent);
  await probe.close();
  return {
    url: url ? url(probe.port) : probe.url,
    port: probe.port,
    requests: () => 0,
    onRequest: () => {},
    close: async () => {},
  };
}

/** `target` reached at another URL (another scheme, credentials in it), same port. */
export function viaUrl(target: Target, url: string): Target {
  return { ...target, url };
}

/** The scripted model behind the `Target` shape, on a port of its own. */
export async function startScripted(chunkChars = 4): Promise<Target> {
  const model = await startScriptedModel({ port: 0, chunkChars });
  return {
    url: model.url,
    port: model.port,
    requests: () => model.stats.requests,
    onRequest: (listener) => model.on('request', listener),
    close: () => model.close(),
  };
}

/** The user message that carries `steps` for the scripted model. */
export function scriptedPrompt(steps: ScriptStep[]): string {
  return `Go.\n${scriptBlock({ steps })}`;
}

/** The raw SSE body the scripted model streams for `steps`: bytes to replay elsewhere. */
export async function recordStream(steps: ScriptStep[]): Promise<Buffer> {
  const model = await startScripted();
  try {
    const response = await fetch(`${model.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({
        model: 'cohort-scripted',
        max_tokens: 4096,
        stream: true,
        messages: [{ role: 'user', content: scriptedPrompt(steps) }],
      }),
    });
    const body = Buffer.from(await response.arrayBuffer());
    if (response.status !== 200 || !body.includes('message_stop')) {
      throw new Error(
        `Expected a whole event stream from the scripted model, got ${response.status}: ${body.toString('utf8', 0, 200)}`,
      );
    }
    return body;
  } finally {
    await model.close();
  }
}

const SSE_HEAD = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
};

/** Lets the event loop turn, so each write leaves in a TCP segment of its own. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Writes `body` with status 200, `bytesPerWrite` bytes at a time, each write flushed first. */
export function replay(
  body: Buffer,
  options: { bytesPerWrite?: number; headers?: Record<string, string> } = {},
): Handler {
  const step = options.bytesPerWrite ?? body.length;
  return (_request, response) => {
    response.socket?.setNoDelay(true);
    response.writeHead(200, options.headers ?? SSE_HEAD);
    void (async () => {
      for (let start = 0; start < body.length && !response.destroyed; start += step) {
        const chunk = body.subarray(start, start + step);
        await new Promise<void>((resolve) => response.write(chunk, () => resolve()));
        await nextTurn();
      }
      response.end();
    })();
  };
}

/** Writes the start of `body` (up to the end of event number `events`), then resets the socket. */
export function resetAfterEvents(body: Buffer, events: number): Handler {
  const cut = eventsEnd(body, events);
  return (request, response) => {
    response.writeHead(200, SSE_HEAD);
    response.write(body.subarray(0, cut), () => request.socket.resetAndDestroy());
  };
}

/**
 * Writes the start of `body` (up to the end of event number `events`) in proper chunked
 * encoding, then a chunk header that is not hex, then closes: the body's framing breaks mid-stream.
 */
export function brokenChunkAfterEvents(body: Buffer, events: number): Handler {
  const cut = eventsEnd(body, events);
  return (_request, response) => {
    response.writeHead(200, { ...SSE_HEAD, 'transfer-encoding': 'chunked' });
    response.write(body.subarray(0, cut), () => {
      response.socket?.end('zz\r\nnot a chunk\r\n');
    });
  };
}

/** Answers every request with a 307 to a fresh path: a redirect that never ends. */
export const redirectForever: Handler = (request, response) => {
  response.writeHead(307, { location: `/again${request.url}`, 'content-type': 'text/plain' });
  response.end('Again');
};

/** Where event number `events` of a recorded stream ends. */
function eventsEnd(body: Buffer, events: number): number {
  let cut = 0;
  for (let index = 0; index < events; index++) {
    const end = body.indexOf('\n\n', cut);
    if (end < 0) throw new Error(`Expected ${events} events in the recorded stream, got ${index}`);
    cut = end + 2;
  }
  return cut;
}

/** Resets the connection (TCP RST) once the request has arrived: no status, no headers. */
export const resetBeforeHeaders: Handler = (request) => {
  request.socket.resetAndDestroy();
};

/** Never answers: the socket stays open and silent until the server closes. */
export const silent: Handler = () => {};

/** Answers 200 with `contentType` and `body` in one piece. */
export function answer(contentType: string, body: Buffer | string): Handler {
  return (_request, response) => {
    response.writeHead(200, { 'content-type': contentType });
    response.end(body);
  };
}

/** Answers `code` with `contentType` and `body` (coded `coding`, if given): an error page, say. */
export function status(
  code: number,
  contentType: string,
  body: string | Buffer,
  coding?: string,
): Handler {
  const headers = {
    'content-type': contentType,
    ...(coding ? { 'content-encoding': coding } : {}),
  };
  return (_request, response) => {
    response.writeHead(code, headers);
    response.end(body);
  };
}

/** Answers 401 with the credential it received in the message, as a careless proxy might. */
export const echoCredential: Handler = (request, response) => {
  const credential = request.headers.authorization ?? request.headers['x-api-key'] ?? '(none)';
  const error = { type: 'authentication_error', message: `invalid credential: ${credential}` };
  response.writeHead(401, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ type: 'error', error }));
};

/** `inner`, noting each request's user-agent in `agents`: which transport sent it. */
export function noteAgents(agents: string[], inner: Handler): Handler {
  return (request, response) => {
    agents.push(String(request.headers['user-agent']));
    inner(request, response);
  };
}

/** Answers `/v1/messages` with a 308 to `/moved/v1/messages`, where `inner` answers. */
export function redirect(inner: Handler): Handler {
  return (request, response) => {
    if (request.url !== '/v1/messages') return inner(request, response);
    response.writeHead(308, { location: '/moved/v1/messages', 'content-type': 'text/plain' });
    response.end('Moved');
  };
}

// Reshapings of a recorded stream. Each is still the same events to a parser that follows the
// SSE rules the SDK follows, or breaks them in one named way.

/** Every line ending made `ending` (the SSE rules allow CRLF and a lone CR too). */
export function withLineEndings(body: Buffer, ending: '\r\n' | '\r'): Buffer {
  return Buffer.from(body.toString('utf8').replaceAll('\n', ending));
}

/** A comment, an `id:` and a `retry:` field before each event, and its data over two lines. */
export function withSseExtras(body: Buffer): Buffer {
  const events = body
    .toString('utf8')
    .split('\n\n')
    .filter((event) => event !== '');
  const extended = events.map(
    (event, index) =>
      `: comment ${index}\nid: ${index}\nretry: 1000\n${event.replace(/^data: \{/m, 'data: {\ndata: ')}\n\n`,
  );
  return Buffer.from(extended.join(''));
}

/** The events without their `event:` lines: data alone, which the SDK's rules skip. */
export function withoutEventLines(body: Buffer): Buffer {
  return Buffer.from(body.toString('utf8').replace(/^event: .*\n/gm, ''));
}

/** The first `count` events of `body`, then `tail`. */
export function eventsThen(body: Buffer, count: number, tail: string): Buffer {
  const events = body.toString('utf8').split('\n\n').slice(0, count);
  return Buffer.from(`${events.join('\n\n')}\n\n${tail}`);
}

/** The body as latin1 bytes: each letter past ASCII one byte that UTF-8 cannot read. */
export function inLatin1(body: Buffer): Buffer {
  return Buffer.from(body.toString('utf8'), 'latin1');
}

/** A UTF-8 byte order mark, then the body. */
export function withBom(body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
}

/** A whole Messages-API message as JSON: what a non-streaming request is answered with. */
export const WHOLE_MESSAGE_JSON = JSON.stringify({
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  model: 'cohort-scripted',
  content: [{ type: 'text', text: 'A whole message, not a stream.' }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 5, output_tokens: 8 },
});

/** `size` bytes from a fixed linear congruential sequence: garbage, the same on every run. */
export function garbageBytes(size: number, seed = 7): Buffer {
  const bytes = Buffer.alloc(size);
  let state = seed;
  for (let index = 0; index < size; index++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    bytes[index] = state >>> 16;
  }
  return bytes;
}

/** A self-signed certificate for 127.0.0.1 and localhost, made now by openssl in `dir`. */
export function makeCertificate(dir: string): TlsFiles {
  const keyPath = path.join(dir, 'key.pem');
  const certPath = path.join(dir, 'cert.pem');
  const args = ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost'];
  args.push('-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-days', '1');
  args.push('-keyout', keyPath, '-out', certPath);
  try {
    execFileSync('openssl', args, { stdio: 'pipe' });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `Expected openssl on the PATH to make a self-signed test certificate, got: ${reason}`,
    );
  }
  return { key: readFileSync(keyPath), cert: readFileSync(certPath), certPath };
}

/**
 * Runs one request through each transport in a child process that trusts `certPath` through
 * NODE_EXTRA_CA_CERTS (Node reads it only at startup, hence the child), against `baseURL`.
 * Returns what the child printed: `{sdk, undici}`, each a ProviderResult. Needs `npm run build`.
 */
export async function completeInTrustingChild(
  baseURL: string,
  certPath: string,
): Promise<Record<string, unknown>> {
  const dist = (file: string) =>
    new URL(`../dist/src/shared/provider/${file}`, import.meta.url).href;
  const code = `
    import { DEFAULT_PROVIDER_CONFIG } from ${JSON.stringify(dist('config.js'))};
    import { Provider } from ${JSON.stringify(dist('provider.js'))};
    const results = {};
    for (const transport of ['sdk', 'undici']) {
      const provider = new Provider({ ...DEFAULT_PROVIDER_CONFIG, model: 'cohort-scripted',
        baseURL: ${JSON.stringify(baseURL)}, transport, maxRetries: 0 });
      const request = { messages: [{ role: 'user', content: 'Hi.' }], tools: [] };
      results[transport] = await provider.complete(request, { signal: new AbortController().signal });
      await provider.close();
    }
    process.stdout.write(JSON.stringify(results));`;
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_EXTRA_CA_CERTS: certPath };
  // Nothing of the caller's account or network setup may steer the child.
  for (const name of ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL']) {
    delete env[name];
  }
  for (const name of ['HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy']) delete env[name];
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--input-type=module', '-e', code],
    { env, timeout: 30_000 },
  );
  return JSON.parse(stdout) as Record<string, unknown>;
}
