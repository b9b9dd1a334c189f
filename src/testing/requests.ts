/**
 * The HTTP side of a request to the scripted model, before any Messages API meaning: which
 * route it takes, whose credential it carries, its body as JSON, and the error answers
 * every route shares.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorDetails } from './messages-api.js';
import { sendError } from './response-player.js';

const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** An error response before it gets its request id. */
export interface Refusal {
  status: number;
  type: string;
  message: string;
  headers?: Record<string, string>;
  details?: ErrorDetails;
}

export function invalid(message: string): Refusal {
  return { status: 400, type: 'invalid_request_error', message };
}

/**
 * The answer to a request that threw: nesting too deep to walk is the client's mistake;
 * anything else is the server's.
 */
export function unexpected(error: unknown): Refusal {
  if (error instanceof RangeError) {
    return invalid(
      `Expected a request the server can walk, got one nested too deeply (${error.message})`,
    );
  }
  const reason = error instanceof Error ? error.message : String(error);
  return {
    status: 500,
    type: 'api_error',
    message: `The scripted model failed on this request: ${reason}`,
  };
}

/** Answers a request that threw, or cuts its response short if one had started. */
export function answerFailure(response: ServerResponse, requestId: string, error: unknown): void {
  if (response.headersSent) response.destroy();
  else sendError(response, { ...unexpected(error), requestId });
}

export function parseBody(
  body: string,
): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(body) };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      ok: false,
      message: `Expected the request body to be JSON, got a parse error: ${reason}`,
    };
  }
}

export type Route =
  | { kind: 'messages' }
  | { kind: 'count_tokens' }
  | { kind: 'models'; id?: string };

export function routeOf(method: string, path: string): Route | undefined {
  if (method === 'POST' && path === '/v1/messages') return { kind: 'messages' };
  if (method === 'POST' && path === '/v1/messages/count_tokens') return { kind: 'count_tokens' };
  if (method !== 'GET') return undefined;
  if (path === '/v1/models') return { kind: 'models' };
  const match = /^\/v1\/models\/([^/]+)$/.exec(path);
  if (match === null) return undefined;
  try {
    return { kind: 'models', id: decodeURIComponent(match[1]!) };
  } catch {
    return undefined; // A malformed %-escape names no model.
  }
}

export function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The credential a request carries: `x-api-key`, else a bearer token, else ''. Never logged. */
export function apiKeyOf(headers: IncomingHttpHeaders): string {
  const apiKey = header(headers, 'x-api-key');
  if (apiKey !== undefined && apiKey !== '') return apiKey;
  const authorization = header(headers, 'authorization');
  const bearer = authorization === undefined ? undefined : /^Bearer\s+(\S+)/i.exec(authorization);
  return bearer?.[1] ?? '';
}

/** With strictAuth: the real API's answer to a request without credentials or version. */
export function authRefusal(headers: IncomingHttpHeaders): Refusal | undefined {
  if (apiKeyOf(headers) === '') {
    return { status: 401, type: 'authentication_error', message: 'x-api-key header is required' };
  }
  if ((header(headers, 'anthropic-version') ?? '') === '') {
    return invalid('anthropic-version: header is required');
  }
  return undefined;
}

export function betasOf(headers: IncomingHttpHeaders): string[] {
  const raw = headers['anthropic-beta'];
  const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
  return values.flatMap((value) => value.split(',').map((beta) => beta.trim()));
}

/** Reads a whole request body as UTF-8, then calls `then`; a body over 32 MiB gets a 413. */
export function readBody(
  request: IncomingMessage,
  response: ServerResponse,
  requestId: string,
  then: (body: string) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  request.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  });
  request.on('end', () => {
    if (size > MAX_BODY_BYTES) {
      sendError(response, {
        status: 413,
        type: 'request_too_large',
        message: `Expected a body of at most ${MAX_BODY_BYTES} bytes, got ${size}`,
        requestId,
      });
      return;
    }
    then(Buffer.concat(chunks).toString('utf8'));
  });
}
