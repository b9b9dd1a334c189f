import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk/error';
import { redactSecrets } from '../redact.js';
import { API_KEY_ENV, AUTH_TOKEN_ENV } from './config.js';
import type { ProviderError, ProviderErrorCode } from './types.js';

/** A failed attempt as the retry loop sees it. */
export interface AttemptFailure {
  error: ProviderError;
  /** Response headers of the failed attempt (for retry-after), when it had any. */
  headers?: Headers | undefined;
  /**
   * Set when no retry can change the answer although the code is a retryable one: a certificate
   * the client refuses, a host name that does not exist, a 200 from something that is not the
   * Messages API. Retrying those only hides the mistake behind growing waits.
   */
  final?: boolean;
}

/** What a message needs besides the error: where the request went and the limit in force. */
export interface FailureContext {
  /** The request URL, without credentials or query (see `publicEndpoint`). */
  endpoint: string;
  requestTimeoutMs: number;
  /** The key was given in code (`provider.apiKey` of a spawn or a group), not the environment. */
  keyInCode?: boolean;
}

/**
 * The URL requests go to, fit to show: the base URL with its credentials, query and fragment
 * removed (they may hold secrets), plus the Messages API path the SDK adds.
 */
export function publicEndpoint(baseURL: string): string {
  try {
    const url = new URL(baseURL);
    return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}/v1/messages`;
  } catch {
    return 'the configured base URL';
  }
}

/** A URL without what may be secret in it: credentials, query and fragment. */
export function publicUrl(text: string): string {
  try {
    const url = new URL(text);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    // Not a URL after all: still drop what would be credentials or a query.
    return (text.split(/[?#]/)[0] ?? '').replace(/\/\/[^/]*@/, '//');
  }
}

/** Maps whatever the SDK threw to a stable code and a message that says what happened. */
export function classify(error: unknown, context: FailureContext): AttemptFailure {
  const { endpoint } = context;
  if (error instanceof APIUserAbortError) return { error: { code: 'aborted', message: 'aborted' } };
  if (error instanceof APIConnectionTimeoutError) {
    const waited = formatMs(context.requestTimeoutMs);
    return {
      error: {
        code: 'connection',
        message: `no response from ${endpoint} within ${waited} (the limit is set by --request-timeout, provider.requestTimeoutMs)`,
      },
    };
  }
  if (error instanceof APIConnectionError) return networkFailure(error, endpoint, 'connect');
  if (error instanceof APIError) {
    const failure =
      error.status === undefined
        ? streamErrorEvent(error, endpoint)
        : httpFailure(error, error.status, endpoint, context.keyInCode);
    // The server's id of the request travels with the error, for its support to look up.
    if (typeof error.requestID === 'string' && error.requestID !== '') {
      failure.error.requestId = excerpt(error.requestID, 100);
    }
    return failure;
  }
  // Unparsable data in an event stream that began well: a garbled chunk may not recur, so it
  // keeps the retry that `bad_response` has.
  if (
    error instanceof SyntaxError ||
    (error instanceof Error && error.cause instanceof SyntaxError)
  ) {
    return {
      error: {
        code: 'bad_response',
        message: `unparsable data in the event stream from ${endpoint}: ${excerpt(errorText(error))}`,
      },
    };
  }
  // A body that broke off mid-stream (undici's "terminated", a reset socket): worth a retry.
  if (causeCode(error) !== undefined || /premature|\bterminated\b|socket/i.test(errorText(error))) {
    return networkFailure(error, endpoint, 'stream');
  }
  return {
    error: { code: 'bad_response', message: `${endpoint}: ${excerpt(errorText(error), 300)}` },
  };
}

interface CauseInfo {
  text: string;
  /** The failure will be the same on every attempt. */
  final?: boolean;
}

// Node and undici error codes a user can act on, and what they mean.
const CAUSES: Record<string, CauseInfo> = {
  ECONNREFUSED: { text: 'connection refused: nothing listens on that port' },
  // A name that does not resolve is nearly always a typo; EAI_AGAIN is the transient DNS failure.
  ENOTFOUND: { text: 'host name not found', final: true },
  EAI_AGAIN: { text: 'temporary DNS failure' },
  ECONNRESET: { text: 'connection reset by the server' },
  ETIMEDOUT: { text: 'the connection timed out' },
  EHOSTUNREACH: { text: 'host unreachable' },
  ENETUNREACH: { text: 'network unreachable' },
  EPIPE: { text: 'the server closed the connection' },
  UND_ERR_SOCKET: { text: 'the server closed the connection' },
  UND_ERR_CONNECT_TIMEOUT: { text: 'the connection attempt timed out' },
  CERT_HAS_EXPIRED: { text: "the server's TLS certificate has expired", final: true },
  DEPTH_ZERO_SELF_SIGNED_CERT: { text: "the server's TLS certificate is self-signed", final: true },
  SELF_SIGNED_CERT_IN_CHAIN: {
    text: "the server's TLS certificate chain has a self-signed certificate",
    final: true,
  },
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: {
    text: "the server's TLS certificate cannot be verified",
    final: true,
  },
  ERR_TLS_CERT_ALTNAME_INVALID: {
    text: "the server's TLS certificate is for another host name",
    final: true,
  },
  ERR_SSL_WRONG_VERSION_NUMBER: {
    text: 'TLS handshake failed: does the server speak plain http?',
    final: true,
  },
};

// URLs fetch refuses before any traffic, the same way on every attempt.
const REFUSED_BY_FETCH: [RegExp, string][] = [
  [/^bad port$/, 'bad port (fetch refuses this port, as browsers do; use another)'],
  [/includes credentials/, 'fetch refuses a URL with a user name or password in it'],
];

/** A TLS failure will not heal on retry: the certificate or the protocol is wrong. */
function isTlsCode(code: string): boolean {
  return /^ERR_TLS_|^ERR_SSL_|CERT/.test(code);
}

/** A failure of the connection itself, named by its URL and its cause code when there is one. */
function networkFailure(
  error: unknown,
  endpoint: string,
  phase: 'connect' | 'stream',
): AttemptFailure {
  const code = causeCode(error);
  const lead =
    phase === 'connect' ? `cannot connect to ${endpoint}` : `the connection to ${endpoint} broke`;
  const detail = excerpt(innermostText(error));
  if (code === undefined) {
    const refused = REFUSED_BY_FETCH.find(([pattern]) => pattern.test(detail));
    if (refused) {
      return { error: { code: 'connection', message: `${lead}: ${refused[1]}` }, final: true };
    }
    return { error: { code: 'connection', message: `${lead}: ${detail}` } };
  }
  const known = CAUSES[code];
  const tls = isTlsCode(code);
  const text = known?.text ?? (tls ? `TLS error: ${detail}` : detail);
  const final = known?.final === true || tls;
  return {
    error: { code: 'connection', message: `${lead}: ${code} (${text})` },
    ...(final ? { final } : {}),
  };
}

/** The first error code down an error's `cause` chain, e.g. ECONNREFUSED under "fetch failed". */
export function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Object; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The message of the deepest error in the `cause` chain: the most specific one. */
function innermostText(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 8; depth++) {
    const next = current instanceof Object ? (current as { cause?: unknown }).cause : undefined;
    if (!(next instanceof Error)) break;
    current = next;
  }
  return errorText(current);
}

/** A status the server answered with. */
function httpFailure(
  error: APIError,
  status: number,
  endpoint: string,
  keyInCode = false,
): AttemptFailure {
  const said = `${endpoint} answered ${status}: ${serverSaid(error)}`;
  const headers = error.headers;
  if (status === 401 || status === 403) {
    return {
      error: { code: 'auth', status, message: credentialHint(said, keyInCode) },
      headers,
    };
  }
  const pointless = retryIsPointless(error, status);
  if (pointless !== undefined) {
    const message = `${said}; ${pointless}, so retrying cannot help until a person acts`;
    return { error: { code: 'quota_exhausted', status, message }, headers, final: true };
  }
  // The server said not to retry: obey it, as the SDK does.
  const final = headers?.get('x-should-retry') === 'false' ? { final: true } : {};
  if (status === 429) {
    return { error: { code: 'rate_limited', status, message: said }, headers, ...final };
  }
  if (status === 529) {
    return { error: { code: 'overloaded', status, message: said }, headers, ...final };
  }
  if (status >= 500) {
    return { error: { code: 'server_error', status, message: said }, headers, ...final };
  }
  // A 404 in the API's own error shape is about the request (an unknown model); any other 404
  // means nothing serves the Messages API at that URL.
  const hint =
    status === 404 && apiErrorBody(error) === undefined
      ? '; is the base URL right? It should be the server root: cohort adds /v1/messages'
      : '';
  return { error: { code: 'bad_request', status, message: `${said}${hint}` }, headers };
}

/** What a 401 or 403 says about the credential that was sent (the key wins over the token). */
function credentialHint(said: string, keyInCode: boolean): string {
  if (keyInCode) {
    return `the API key was refused (${said}); check the \`provider.apiKey\` of the spawn or its group`;
  }
  if (process.env[API_KEY_ENV]?.trim()) {
    return `the API key was refused (${said}); check the key in ${API_KEY_ENV}`;
  }
  if (process.env[AUTH_TOKEN_ENV]?.trim()) {
    return `the auth token was refused (${said}); check the token in ${AUTH_TOKEN_ENV}`;
  }
  return `the API key was refused (${said}); ${API_KEY_ENV} is not set`;
}

/**
 * Why a refusal is final although it looks like a rate limit, or nothing: the body names a spend
 * limit (a 429 for one carries no `retry-after`; a 402 is the linked organisation's), or the
 * server answered 429 with `x-should-retry: false`.
 */
function retryIsPointless(error: APIError, status: number): string | undefined {
  const headers = error.headers;
  const told = headers?.has('retry-after') === true || headers?.has('retry-after-ms') === true;
  if ((status === 429 && !told) || status === 402) {
    const code = errorCodeOf(error);
    if (code !== undefined && /spend_limit/.test(code))
      return `the spend limit is reached (${code})`;
  }
  if (status === 429 && headers?.get('x-should-retry') === 'false') {
    return 'the server said not to retry (x-should-retry: false)';
  }
  return undefined;
}

/** `error.details.error_code` of an Anthropic error body, when it has one. */
function errorCodeOf(error: APIError): string | undefined {
  const details = (apiErrorBody(error) as { details?: { error_code?: unknown } } | undefined)
    ?.details;
  return typeof details?.error_code === 'string' ? details.error_code : undefined;
}

/** An `error` event inside an event stream has no status; its type says what it was. */
function streamErrorEvent(error: APIError, endpoint: string): AttemptFailure {
  const type = error.type ?? apiErrorBody(error)?.type;
  const message = `${endpoint} sent an error event mid-stream: ${serverSaid(error)}`;
  const code = errorCodeOf(error);
  if (code !== undefined && /spend_limit/.test(code)) {
    const why = `${message}; the spend limit is reached (${code}), so retrying cannot help until a person acts`;
    return { error: { code: 'quota_exhausted', message: why }, final: true };
  }
  if (type === 'overloaded_error') return { error: { code: 'overloaded', message } };
  if (type === 'rate_limit_error') return { error: { code: 'rate_limited', message } };
  return { error: { code: 'server_error', message } };
}

/**
 * The code of an API error type, as a Message Batch's `errored` result names it (it has no
 * status). A type this does not know is a `server_error`, so it is retried.
 */
export function errorTypeCode(type: unknown): ProviderErrorCode {
  switch (type) {
    case 'invalid_request_error':
    case 'not_found_error':
    case 'request_too_large':
      return 'bad_request';
    case 'authentication_error':
    case 'permission_error':
      return 'auth';
    case 'billing_error':
      return 'quota_exhausted';
    case 'rate_limit_error':
      return 'rate_limited';
    case 'overloaded_error':
      return 'overloaded';
    default:
      return 'server_error';
  }
}

/** The `error` object of an Anthropic error body, `{type:"error", error:{type, message}}`. */
function apiErrorBody(error: APIError): { type?: unknown; message?: unknown } | undefined {
  const body = error.error as { error?: unknown } | undefined;
  const inner = body?.error;
  return typeof inner === 'object' && inner !== null ? inner : undefined;
}

/** What the server said, short: the API's error type and message, or the start of its body. */
function serverSaid(error: APIError): string {
  const inner = apiErrorBody(error);
  if (inner && typeof inner.message === 'string') {
    return excerpt(
      typeof inner.type === 'string' ? `${inner.type}: ${inner.message}` : inner.message,
    );
  }
  // The SDK's message is "<status> <body or JSON>"; the status is said already.
  return excerpt(error.message.replace(/^\d{3}\s*/, '')) || '(empty body)';
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Text from a server or an error, fit for one line of a message: secrets redacted, control
 * characters escaped (a body may carry terminal escapes), and clipped to `maxChars`.
 */
export function excerpt(text: string, maxChars = 200): string {
  // Redact before clipping: a clip could cut a key short of the shape that is recognised.
  const clean = redactSecrets(text).replace(/\bhttps?:\/\/[^\s"'<>`]+/gi, publicUrl);
  const clipped = clean.length > maxChars ? `${clean.slice(0, maxChars)}…` : clean;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: escaping control characters is the point.
  return clipped.replace(/[\u0000-\u001f\u007f-\u009f]/g, (char) => {
    if (char === '\n') return '\\n';
    if (char === '\r') return '\\r';
    if (char === '\t') return '\\t';
    return `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

/** A duration for a message: `800 ms`, `2 s`, `1.5 s`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  return `${Number((ms / 1000).toFixed(1))} s`;
}
