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

/** What a request to a Message Batches route asks for. */
export type BatchAction = 'create' | 'list' | 'retrieve' | 'cancel' | 'delete' | 'results';

export type Route =
  | { kind: 'messages' }
  | { kind: 'count_tokens' }
  | { kind: 'models'; id?: string }
  | { kind: 'batches'; action: BatchAction; id?: string };

const BATCHES = '/v1/messages/batches';

export function routeOf(method: string, path: string): Route | undefined {
  if (method === 'POST' && path === '/v1/messages') return { kind: 'messages' };
  if (method === 'POST' && path === '/v1/messages/count_tokens') return { kind: 'count_tokens' };
  if (path === BATCHES || path.startsWith(`${BATCHES}/`)) return batchRouteOf(method, path);
  if (method !== 'GET') return undefined;
  if (path === '/v1/models') return { kind: 'models' };
  const id = pathId(/^\/v1\/models\/([^/]+)$/.exec(path));
  return id === undefined ? undefined : { kind: 'models', id };
}

/** Which action each method of a batch's own paths (the batch, `/cancel`, `/results`) takes. */
const BATCH_ACTIONS: Record<string, Partial<Record<string, BatchAction>>> = {
  '': { GET: 'retrieve', DELETE: 'delete' },
  '/cancel': { POST: 'cancel' },
  '/results': { GET: 'results' },
};

/** The Message Batches routes: the collection, a batch, its cancel and its results. */
function batchRouteOf(method: string, path: string): Route | undefined {
  if (path === BATCHES) {
    if (method === 'POST') return { kind: 'batches', action: 'create' };
    return method === 'GET' ? { kind: 'batches', action: 'list' } : undefined;
  }
  const match = /^\/v1\/messages\/batches\/([^/]+)(\/cancel|\/results)?$/.exec(path);
  const id = pathId(match);
  const action = BATCH_ACTIONS[match?.[2] ?? '']?.[method];
  return id === undefined || action === undefined ? undefined : { kind: 'batches', action, id };
}

/** The decoded id a path names, or undefined: a malformed %-escape names nothing. */
function pathId(match: RegExpExecArray | null): string | undefined {
  if (match === null) return undefined;
  try {
    return decodeURIComponent(match[1]!);
  } catch {
    return undefined;
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

/** Sends the 413 of a body over `maxBytes`. */
function tooLarge(response: ServerResponse, requestId: string, size: number, maxBytes: number) {
  sendError(response, {
    status: 413,
    type: 'request_too_large',
    message: `Expected a body of at most ${maxBytes} bytes, got ${size}`,
    requestId,
  });
}

/**
 * Reads a whole request body as UTF-8, then calls `then`; a body over `maxBytes` (32 MiB
 * unless given) gets a 413, at once when its `content-length` says so.
 */
export function readBody(
  request: IncomingMessage,
  response: ServerResponse,
  requestId: string,
  then: (body: string) => void,
  maxBytes = MAX_BODY_BYTES,
): void {
  const declared = Number(header(request.headers, 'content-length') ?? Number.NaN);
  if (declared > maxBytes) {
    // Nothing of it is kept: the server discards the rest of the body once this is sent.
    tooLarge(response, requestId, declared, maxBytes);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  request.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= maxBytes) chunks.push(chunk);
  });
  request.on('end', () => {
    if (size > maxBytes) {
      tooLarge(response, requestId, size, maxBytes);
      return;
    }
    then(Buffer.concat(chunks).toString('utf8'));
  });
}
