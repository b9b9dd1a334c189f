import type { Readable } from 'node:stream';
import {
  AnthropicError,
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk/error';
import { Agent, type Dispatcher, EnvHttpProxyAgent, interceptors } from 'undici';
import type { ProviderConfig } from '../config.js';
import { stackless } from '../teardown.js';
import { decodeBody } from './content-coding.js';
import { fetchRefusal, messagesURL, resolveBaseURL, resolveCredential } from './endpoint.js';
import { requestHeaders } from './request-headers.js';
import { readStart, safeJSON, streamEvents } from './sse.js';
import {
  ATTEMPT_HEADER,
  type MessagesBody,
  type SendOptions,
  type Transport,
  type TransportResponse,
} from './types.js';

/**
 * How much of an error body is read: the SDK reads it whole, so this is far above any API error
 * (a 400 may quote a long input back), and bounded only against a server that floods.
 */
const MAX_ERROR_BODY_BYTES = 8 * 1024 * 1024;

/** Statuses whose response has no body at all, for fetch (and so for the SDK's stream). */
const NULL_BODY_STATUSES = new Set([204, 205]);

/** The connect timeout of Node's global fetch, which the SDK transport runs on. */
const FETCH_CONNECT_TIMEOUT_MS = 10_000;

/** The most redirects fetch follows in one request. */
const FETCH_MAX_REDIRECTIONS = 20;

const PROXY_VARIABLES = ['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY'];

/**
 * Sends Messages requests with `undici.request` on a keep-alive pool of its own, and reads the
 * event stream with eventsource-parser: no web streams, no fetch, no SDK request building. It
 * fails the way the SDK fails (see `Transport`), so `classify` cannot tell the two apart.
 */
export class UndiciTransport implements Transport {
  readonly name = 'undici';
  readonly baseURL: string;
  readonly credential: string;
  readonly #dispatcher: Dispatcher;
  /** Where requests go, or why none can be sent. */
  readonly #target: Target;
  /** Every header but the attempt's, as undici's flat name, value, name, value… list. */
  readonly #headers: string[];

  constructor(config: ProviderConfig, apiKey?: string) {
    this.baseURL = resolveBaseURL(config);
    this.credential = resolveCredential(apiKey);
    this.#target = target(this.baseURL);
    this.#headers = [...requestHeaders(config, this.credential)].flat();
    this.#dispatcher = makeDispatcher(config);
  }

  async send(body: MessagesBody, options: SendOptions): Promise<TransportResponse> {
    const { signal, attempt } = options;
    // In the SDK's order: it builds the URL, then checks the signal, then fetch refuses.
    if ('invalid' in this.#target) throw this.#target.invalid;
    if (signal.aborted) throw new APIUserAbortError();
    if ('refusal' in this.#target) throw new APIConnectionError({ cause: this.#target.refusal });
    let response: Dispatcher.ResponseData;
    try {
      response = await this.#dispatcher.request({
        origin: this.#target.origin,
        path: this.#target.path,
        method: 'POST',
        headers: [...this.#headers, ATTEMPT_HEADER, String(attempt)],
        body: JSON.stringify(body),
        signal,
        // Past the last redirect fetch fails rather than answering the 3xx; the redirect
        // handler reads this from the request's options (undici's types leave it out).
        throwOnMaxRedirect: true,
      } as Dispatcher.RequestOptions);
    } catch (error) {
      throw requestFailure(error, signal);
    }
    const status = response.statusCode;
    const headers = webHeaders(response.headers);
    const responseBody = decodeBody(response.body, status, headers.get('content-encoding'));
    if (status < 200 || status > 299) throw await statusError(status, responseBody, headers);
    return {
      status,
      headers,
      events: NULL_BODY_STATUSES.has(status)
        ? noBody(responseBody)
        : streamEvents(responseBody, headers, signal),
      bodyStart: async (maxBytes) =>
        new TextDecoder().decode(await readStart(responseBody, maxBytes)),
    };
  }

  close(): Promise<void> {
    return this.#dispatcher.close();
  }
}

/**
 * The events of a response fetch gives no body (a 204): the SDK's stream refuses to iterate it,
 * with its own error, which `classify` reads as a `bad_response`.
 */
// biome-ignore lint/correctness/useYield: it only throws, as the SDK's stream does.
async function* noBody(body: Readable): AsyncGenerator<never> {
  // Nothing to read: drained, the connection goes back to the pool.
  body.resume();
  throw new AnthropicError('Attempted to iterate over a response with no body');
}

/**
 * Where requests go: the origin and path of the Messages URL. Or why no request can be sent: a
 * base URL that does not parse (the SDK throws that TypeError itself, before any request), or one
 * fetch refuses (the SDK wraps that in an `APIConnectionError`).
 */
export type Target = { origin: string; path: string } | { invalid: Error } | { refusal: Error };

export function target(baseURL: string): Target {
  let url: URL;
  try {
    url = messagesURL(baseURL);
  } catch (error) {
    return { invalid: error instanceof Error ? error : new TypeError(String(error)) };
  }
  const refusal = fetchRefusal(url);
  if (refusal) return { refusal };
  return { origin: url.origin, path: `${url.pathname}${url.search}` };
}

/**
 * A keep-alive pool per origin. Proxy variables are honoured when one is set (either case), as
 * `EnvHttpProxyAgent` reads them; without them the plain agent skips its per-request URL parse.
 */
export function makeDispatcher(config: ProviderConfig): Dispatcher {
  const options = {
    connections: config.connections ?? null,
    // Until headers arrive the request timeout applies; the provider's idle timer covers the body.
    headersTimeout: config.requestTimeoutMs,
    bodyTimeout: 0,
    connectTimeout: Math.min(config.requestTimeoutMs, FETCH_CONNECT_TIMEOUT_MS),
  };
  const proxied = PROXY_VARIABLES.some(
    (name) => process.env[name] || process.env[name.toLowerCase()],
  );
  const agent = proxied ? new EnvHttpProxyAgent(options) : new Agent(options);
  // Redirects are followed as fetch follows them (at most 20; a 301 or 302 to a POST becomes a
  // GET; credentials are dropped on a move to another origin), so both transports agree.
  return agent.compose(interceptors.redirect({ maxRedirections: FETCH_MAX_REDIRECTIONS }));
}

/**
 * What a request that got no response becomes, by the SDK's rules: the caller's abort is
 * `APIUserAbortError`; anything that reads as a timeout (undici's headers or connect timeout,
 * ETIMEDOUT) is `APIConnectionTimeoutError`; the rest is `APIConnectionError` with the cause.
 */
export function requestFailure(error: unknown, signal: AbortSignal): Error {
  // Read by no one when the caller aborted (the provider knows why): no stack to capture.
  if (signal.aborted) return stackless(() => new APIUserAbortError());
  const cause = error instanceof Object ? (error as { cause?: unknown }).cause : undefined;
  const text = String(error) + (cause === undefined ? '' : String(cause));
  if (isAbortError(error) || /timed? ?out/i.test(text)) return new APIConnectionTimeoutError();
  // In fetch's words, so both transports say the same.
  if (/max redirects/i.test(text)) {
    const cause = new Error('redirect count exceeded');
    return new APIConnectionError({ cause: new TypeError('fetch failed', { cause }) });
  }
  return new APIConnectionError({ cause: error instanceof Error ? error : new Error(text) });
}

function isAbortError(error: unknown): boolean {
  return error instanceof Object && (error as { name?: unknown }).name === 'AbortError';
}

/**
 * The SDK's error for a non-2xx status: the body parsed as JSON when it is JSON, else its text as
 * the message, so `APIError`'s message (and `classify`'s "what the server said") is the same.
 */
export async function statusError(
  status: number,
  body: Readable,
  headers: Headers,
): Promise<APIError> {
  let text: string;
  try {
    text = new TextDecoder().decode(await readStart(body, MAX_ERROR_BODY_BYTES));
  } catch {
    // As fetch's `text()` says it of a body that broke off: the status is what matters.
    text = 'terminated';
  }
  const json = safeJSON(text);
  return APIError.generate(status, json as object | undefined, json ? undefined : text, headers);
}

/**
 * undici's parsed headers as a web `Headers`, the type the SDK's errors and the governor read.
 * A repeated header is appended, so its values are joined as fetch joins them. A name or value
 * `Headers` refuses is left out rather than failing a response that otherwise works.
 */
export function webHeaders(raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const name in raw) {
    const value = raw[name];
    if (value === undefined) continue;
    try {
      if (typeof value === 'string') headers.append(name, value);
      else for (const item of value) headers.append(name, item);
    } catch {
      // An invalid header name or value from a broken server.
    }
  }
  return headers;
}
