import { EventEmitter } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Attempt, AttemptCounter } from './attempts.js';
import {
  decideFate,
  type RequestFate,
  type RequestLoad,
  type ResolvedOptions,
  requestLoad,
  resolveOptions,
  ScriptedModelOptionError,
  type ScriptedModelOptions,
} from './load-model.js';
import type { ErrorDetails, MessagesRequest } from './messages-api.js';
import { findModel, listModels } from './models.js';
import { estimateTokens, type MessagePlan, planResponse } from './plan.js';
import { hasRateLimits, RateLimits } from './rate-limits.js';
import { checkConversation, validateRequest } from './request-validation.js';
import { playJson, playStream, sendError } from './response-player.js';
import { THREADS_BETA, ThreadStore } from './threads.js';
import { TickScheduler } from './tick-scheduler.js';

/** Counters of what the server has answered so far. */
export interface ScriptedModelStats {
  /** Every HTTP request received, whatever its path. */
  requests: number;
  /** 200 SSE responses started. */
  streamed: number;
  /** 200 responses (SSE or JSON) sent to the end. */
  completed: number;
  /** Responses cut short because the client closed the connection. */
  clientClosed: number;
  /** Responses with these statuses, scripted or not. */
  rejected400: number;
  rateLimited429: number;
  overloaded529: number;
}

/** Payload of the `request` event: a checked request about to be answered. */
export interface ScriptedRequestEvent {
  turn: number;
  attempt: number;
  stream: boolean;
  /** Names of the advertised tools, in request order: tells a root from a child. */
  tools: string[];
}

/** Payload of the `client-closed` event. */
export interface ScriptedClientClosedEvent {
  turn: number;
  attempt: number;
}

/**
 * A running scripted model. Events: `request` (ScriptedRequestEvent) for every checked
 * request, and `client-closed` (ScriptedClientClosedEvent) when a client closes its
 * connection before its response ended, which is how a test proves an abort reached the
 * server.
 */
export interface ScriptedModel extends EventEmitter {
  /** Base URL, e.g. `http://127.0.0.1:PORT`; pass it as the SDK's `baseURL`. */
  readonly url: string;
  readonly port: number;
  readonly stats: Readonly<ScriptedModelStats>;
  /** Stops listening, destroys every open connection and drops pending timers. */
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** One request and its response, while it is being answered. */
interface Exchange {
  request: IncomingMessage;
  response: ServerResponse;
  requestId: string;
  /** Set when the player destroys the socket on purpose: that is not a client close. */
  deliberateClose: boolean;
  /** Charges generated output to the rate limits, when there are any. */
  onOutput?: (chars: number) => void;
  /** Lets go of a thread this request holds, if any, when the request fails unexpectedly. */
  release?: () => void;
  /** The rate-limit headers of an admitted request, for whatever response it gets. */
  rateHeaders?: Record<string, string>;
}

/** Starts a scripted model that speaks the Anthropic Messages API over HTTP. */
export async function startScriptedModel(
  options: ScriptedModelOptions = {},
): Promise<ScriptedModel> {
  const model = new ScriptedModelServer(resolveOptions(options));
  await model.listen();
  return model;
}

class ScriptedModelServer extends EventEmitter implements ScriptedModel {
  readonly #options: ResolvedOptions;
  readonly #server = createServer({ keepAliveTimeout: 30_000 });
  readonly #scheduler = new TickScheduler();
  readonly #limits: RateLimits | undefined;
  readonly #attempts = new AttemptCounter();
  readonly #threads = new ThreadStore();
  readonly #stats: ScriptedModelStats = {
    requests: 0,
    streamed: 0,
    completed: 0,
    clientClosed: 0,
    rejected400: 0,
    rateLimited429: 0,
    overloaded529: 0,
  };
  #sequence = 0;
  #closing = false;
  #port = 0;

  constructor(options: ResolvedOptions) {
    super();
    this.#options = options;
    this.#limits = hasRateLimits(options) ? new RateLimits(options) : undefined;
    this.#server.on('request', (request, response) => this.#handle(request, response));
  }

  get url(): string {
    const host = this.#options.host.includes(':') ? `[${this.#options.host}]` : this.#options.host;
    return `http://${host}:${this.#port}`;
  }

  get port(): number {
    return this.#port;
  }

  get stats(): Readonly<ScriptedModelStats> {
    return { ...this.#stats };
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#options.port, this.#options.host, () => {
        this.#server.off('error', reject);
        this.#port = (this.#server.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  close(): Promise<void> {
    this.#closing = true;
    this.#scheduler.close();
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  #handle(request: IncomingMessage, response: ServerResponse): void {
    this.#stats.requests++;
    const requestId = `req_cohort_${(++this.#sequence).toString(36).padStart(8, '0')}`;
    response.on('finish', () => this.#count(response.statusCode));
    try {
      this.#route(request, response, requestId);
    } catch (error) {
      request.resume();
      answerFailure(response, requestId, error);
    }
  }

  #route(request: IncomingMessage, response: ServerResponse, requestId: string): void {
    // Split by hand: `new URL` throws on targets Node's parser accepts (`//[`).
    const target = request.url ?? '/';
    const queryAt = target.indexOf('?');
    const path = queryAt === -1 ? target : target.slice(0, queryAt);
    const query = new URLSearchParams(queryAt === -1 ? '' : target.slice(queryAt + 1));
    const route = routeOf(request.method ?? '', path);
    const reject = (status: number, type: string, message: string): void => {
      request.resume();
      sendError(response, { status, type, message, requestId });
    };
    if (route === undefined) {
      reject(
        404,
        'not_found_error',
        `Expected POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models or GET /v1/models/{id}, got ${request.method} ${path}`,
      );
      return;
    }
    const refusal = this.#options.strictAuth ? authRefusal(request.headers) : undefined;
    if (refusal !== undefined) {
      reject(refusal.status, refusal.type, refusal.message);
      return;
    }
    if (route.kind === 'models') {
      request.resume();
      this.#answerModels(response, requestId, query, route.id);
      return;
    }
    this.#readBody(request, response, requestId, (body) => {
      const exchange: Exchange = { request, response, requestId, deliberateClose: false };
      try {
        if (route.kind === 'count_tokens') this.#answerCount(exchange, body);
        else this.#answer(exchange, body);
      } catch (error) {
        // No request may take the server down: a client of a test server is often the
        // test itself, and a dead server turns one bad request into a run of failures.
        exchange.release?.();
        answerFailure(response, requestId, error);
      }
    });
  }

  #readBody(
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

  #answerModels(
    response: ServerResponse,
    requestId: string,
    query: URLSearchParams,
    id: string | undefined,
  ): void {
    const send = (status: number, body: unknown): void => {
      response.writeHead(status, { 'content-type': 'application/json', 'request-id': requestId });
      response.end(JSON.stringify(body));
    };
    if (id === undefined) {
      const listed = listModels(query);
      if (listed.ok) send(200, listed.page);
      else
        sendError(response, {
          status: 400,
          type: 'invalid_request_error',
          message: listed.message,
          requestId,
        });
      return;
    }
    const model = findModel(id);
    if (model !== undefined) send(200, model);
    else
      sendError(response, {
        status: 404,
        type: 'not_found_error',
        message: `model: ${id}`,
        requestId,
      });
  }

  /** `POST /v1/messages/count_tokens`: the input token estimate `usage.input_tokens` would report. */
  #answerCount(exchange: Exchange, body: string): void {
    const { response, requestId } = exchange;
    const parsed = parseBody(body);
    const checked = parsed.ok
      ? validateRequest(parsed.value, { endpoint: 'count_tokens' })
      : parsed;
    if (!checked.ok) {
      sendError(response, {
        status: 400,
        type: 'invalid_request_error',
        message: checked.message,
        requestId,
      });
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json', 'request-id': requestId });
    response.end(JSON.stringify({ input_tokens: inputTokens(checked.value) }));
  }

  #count(status: number): void {
    if (status === 200) this.#stats.completed++;
    else if (status === 400) this.#stats.rejected400++;
    else if (status === 429) this.#stats.rateLimited429++;
    else if (status === 529) this.#stats.overloaded529++;
  }

  #answer(exchange: Exchange, body: string): void {
    const { request, response, requestId } = exchange;
    const key = apiKeyOf(request.headers);
    // Every answer to a request for a key carries that key's rate-limit headers.
    const reject = (refusal: Refusal): void => {
      const rate = exchange.rateHeaders ?? this.#limits?.headers(key, this.#scheduler.now());
      const headers = rate === undefined ? refusal.headers : { ...rate, ...refusal.headers };
      sendError(response, { ...refusal, requestId, ...(headers === undefined ? {} : { headers }) });
    };
    let load: RequestLoad;
    let counted: Attempt;
    try {
      load = requestLoad(request.headers, this.#options);
      counted = this.#attempts.attempt(request.headers, key, body);
      load = { ...load, attempt: counted.attempt };
    } catch (error) {
      if (!(error instanceof ScriptedModelOptionError)) throw error;
      reject(invalid(error.message));
      return;
    }
    const parsed = parseBody(body);
    const checked = parsed.ok ? validateRequest(parsed.value) : parsed;
    if (!checked.ok) {
      reject(invalid(checked.message));
      return;
    }
    const resolved = this.#resolveThread(
      request.headers,
      key,
      checked.value,
      parsed.ok ? parsed.value : undefined,
    );
    if (!resolved.ok) {
      reject(resolved.refusal);
      return;
    }
    const messagesRequest = resolved.request;
    if (resolved.thread?.kind === 'continue') {
      const { from } = resolved.thread;
      exchange.release = () => this.#threads.finish(key, from, false);
    }
    if (!this.#admit(exchange, key, messagesRequest)) {
      exchange.release?.();
      return;
    }
    const { attempt } = load;
    const turn = messagesRequest.messages.filter((message) => message.role === 'assistant').length;
    this.emit('request', {
      turn,
      attempt,
      stream: messagesRequest.stream,
      tools: messagesRequest.tools.map((tool) => tool.name),
    } satisfies ScriptedRequestEvent);
    this.#watchClose(exchange, { turn, attempt });
    const fate = decideFate(load, this.#options.seed, body);
    const plan = fate.overloaded ? undefined : planResponse(messagesRequest, attempt);
    this.#onSettled(exchange, key, resolved, plan, counted);
    if (plan === undefined) {
      reject({
        status: 529,
        type: 'overloaded_error',
        message: 'Overloaded (x-cohort-overload / overloadProbability)',
      });
      return;
    }
    this.#play(exchange, messagesRequest, plan, fate);
  }

  /**
   * Takes the request's share of the rate limits and sets their headers on the response,
   * or answers 429 naming the limit that ran out (false).
   */
  #admit(exchange: Exchange, key: string, request: MessagesRequest): boolean {
    const limits = this.#limits;
    if (limits === undefined) return true;
    const { response, requestId } = exchange;
    const admission = limits.admit(key, inputTokens(request), this.#scheduler.now());
    if (admission.ok) {
      exchange.rateHeaders = admission.headers;
      // Output is charged as it is generated, at 4 characters a token.
      exchange.onOutput = (chars) => limits.chargeOutput(key, chars / 4, this.#scheduler.now());
      return true;
    }
    sendError(response, {
      status: 429,
      type: 'rate_limit_error',
      message: admission.message,
      requestId,
      headers: admission.headers,
      ...(admission.errorCode === undefined
        ? {}
        : { details: { error_code: admission.errorCode } }),
    });
    return false;
  }

  #play(
    exchange: Exchange,
    messagesRequest: MessagesRequest,
    plan: ReturnType<typeof planResponse>,
    fate: RequestFate,
  ): void {
    const { response, requestId } = exchange;
    const play = (): void => {
      if (response.destroyed) return;
      if (plan.kind === 'error') {
        const { status, type, message, headers } = plan;
        const rate = exchange.rateHeaders;
        sendError(response, {
          status,
          type,
          message,
          headers: rate === undefined ? headers : { ...rate, ...headers },
          requestId,
        });
        return;
      }
      const context = {
        response,
        scheduler: this.#scheduler,
        identity: { messageId: messageIdOf(requestId), model: messagesRequest.model },
        requestId,
        ttftMs: fate.ttftMs,
        charsPerMs: fate.charsPerMs,
        chunkChars: this.#options.chunkChars,
        onDeliberateClose: () => {
          exchange.deliberateClose = true;
        },
        ...(exchange.onOutput === undefined ? {} : { onOutput: exchange.onOutput }),
        ...(exchange.rateHeaders === undefined ? {} : { headers: exchange.rateHeaders }),
      };
      if (messagesRequest.stream) {
        this.#stats.streamed++;
        playStream(plan, context);
      } else {
        playJson(plan, context);
      }
    };
    if (plan.delayMs > 0) this.#scheduler.schedule(this.#scheduler.now() + plan.delayMs, play);
    else play();
  }

  /**
   * The request a thread turn stands for: as sent for `create` or no thread; for
   * `continue`, the stored conversation with the new messages after it. A continue holds
   * its thread until `#onSettled` releases it.
   */
  #resolveThread(
    headers: IncomingHttpHeaders,
    key: string,
    sent: MessagesRequest,
    body: unknown,
  ): ResolvedThread | { ok: false; refusal: Refusal } {
    const thread = sent.thread;
    if (thread === undefined) return { ok: true, request: sent };
    const unsupported = threadUnsupported(sent, body);
    if (unsupported.length > 0) {
      return {
        ok: false,
        refusal: {
          ...invalid(
            `Expected a request message threads support, got one with ${unsupported.map((name) => `\`${name}\``).join(' and ')}: send the full conversation without \`thread\``,
          ),
          details: { error_code: 'thread_unsupported_request', unsupported },
        },
      };
    }
    if (!betasOf(headers).includes(THREADS_BETA)) {
      return {
        ok: false,
        refusal: invalid(
          `Expected the anthropic-beta header to include \`${THREADS_BETA}\` for \`thread\`, got ${headers['anthropic-beta'] === undefined ? 'no anthropic-beta header' : `\`${headers['anthropic-beta']}\``}`,
        ),
      };
    }
    if (thread.type === 'create') return { ok: true, request: sent, thread: { kind: 'create' } };
    for (const field of ['system', 'tools'] as const) {
      const raw = field === 'system' ? sent.rawSystem : sent.rawTools;
      if (raw !== undefined) {
        return {
          ok: false,
          refusal: invalid(
            `Expected no \`${field}\` with thread {"type": "continue"}: the thread keeps the system prompt and tools it was created with, got \`${field}\``,
          ),
        };
      }
    }
    const begun = this.#threads.begin(key, thread.previousMessageId, sent.model);
    if (!begun.ok) return { ok: false, refusal: begun.refusal };
    const { state } = begun;
    const conversation = checkConversation([...state.messages, ...sent.messages], {
      tools: state.tools,
      toolChoice: sent.toolChoice,
      thinking: sent.thinking,
    });
    if (!conversation.ok) {
      this.#threads.finish(key, thread.previousMessageId, false);
      return { ok: false, refusal: invalid(conversation.message) };
    }
    const stitched: MessagesRequest = {
      ...sent,
      system: state.system,
      rawSystem: state.rawSystem,
      tools: state.tools,
      rawTools: state.rawTools,
      messages: conversation.value,
      inputChars: state.inputChars + sent.inputChars,
      mediaTokens: state.mediaTokens + sent.mediaTokens,
    };
    return {
      ok: true,
      request: stitched,
      thread: { kind: 'continue', from: thread.previousMessageId },
    };
  }

  /** Stores a thread turn whose response ended in full; releases a continue either way. */
  /**
   * Once the response is over: a whole 200 stores a thread turn and ends the count of a
   * counted attempt; a continue lets go of its thread either way.
   */
  #onSettled(
    exchange: Exchange,
    key: string,
    resolved: ResolvedThread,
    plan: ReturnType<typeof planResponse> | undefined,
    counted: Attempt,
  ): void {
    const { thread } = resolved;
    if (thread === undefined && counted.digest === undefined) return;
    delete exchange.release; // From here the close handler below lets go of the thread.
    const { response, requestId } = exchange;
    response.once('close', () => {
      const whole =
        plan?.kind === 'message' &&
        response.statusCode === 200 &&
        response.writableFinished &&
        !hasBreakingFault(plan);
      if (whole) this.#attempts.settle(counted);
      if (thread?.kind === 'continue') this.#threads.finish(key, thread.from, whole);
      if (whole && thread !== undefined) {
        this.#threads.store(key, messageIdOf(requestId), resolved.request, plan.blocks);
      }
    });
  }

  #watchClose(exchange: Exchange, event: ScriptedClientClosedEvent): void {
    const { response } = exchange;
    response.once('close', () => {
      if (response.writableEnded || this.#closing || exchange.deliberateClose) return;
      this.#stats.clientClosed++;
      this.emit('client-closed', event);
    });
  }
}

function parseBody(body: string): { ok: true; value: unknown } | { ok: false; message: string } {
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

/** An error response before it gets its request id. */
interface Refusal {
  status: number;
  type: string;
  message: string;
  headers?: Record<string, string>;
  details?: ErrorDetails;
}

/** Answers a request that threw, or cuts its response short if one had started. */
function answerFailure(response: ServerResponse, requestId: string, error: unknown): void {
  if (response.headersSent) response.destroy();
  else sendError(response, { ...unexpected(error), requestId });
}

/**
 * The answer to a request that threw: nesting too deep to walk is the client's mistake;
 * anything else is the server's.
 */
function unexpected(error: unknown): Refusal {
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

function invalid(message: string): Refusal {
  return { status: 400, type: 'invalid_request_error', message };
}

/** A checked request after thread resolution, and which thread turn it is. */
interface ResolvedThread {
  ok: true;
  request: MessagesRequest;
  thread?: { kind: 'create' } | { kind: 'continue'; from: string };
}

type Route = { kind: 'messages' } | { kind: 'count_tokens' } | { kind: 'models'; id?: string };

function routeOf(method: string, path: string): Route | undefined {
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

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The credential a request carries: `x-api-key`, else a bearer token, else ''. Never logged. */
function apiKeyOf(headers: IncomingHttpHeaders): string {
  const apiKey = header(headers, 'x-api-key');
  if (apiKey !== undefined && apiKey !== '') return apiKey;
  const authorization = header(headers, 'authorization');
  const bearer = authorization === undefined ? undefined : /^Bearer\s+(\S+)/i.exec(authorization);
  return bearer?.[1] ?? '';
}

/** With strictAuth: the real API's answer to a request without credentials or version. */
function authRefusal(headers: IncomingHttpHeaders): Refusal | undefined {
  if (apiKeyOf(headers) === '') {
    return { status: 401, type: 'authentication_error', message: 'x-api-key header is required' };
  }
  if ((header(headers, 'anthropic-version') ?? '') === '') {
    return invalid('anthropic-version: header is required');
  }
  return undefined;
}

function betasOf(headers: IncomingHttpHeaders): string[] {
  const raw = headers['anthropic-beta'];
  const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
  return values.flatMap((value) => value.split(',').map((beta) => beta.trim()));
}

/**
 * The fields of a request that message threads do not support, named as the SDK's
 * `ThreadUnsupportedFeatureName` names them (the others it lists are refused anyway).
 */
function threadUnsupported(request: MessagesRequest, body: unknown): string[] {
  const unsupported: string[] = [];
  if (request.thinking.type !== 'disabled') unsupported.push('thinking');
  const cacheControl = (body as { cache_control?: unknown } | undefined)?.cache_control;
  if (cacheControl !== undefined && cacheControl !== null) unsupported.push('cache_control');
  return unsupported;
}

function messageIdOf(requestId: string): string {
  return `msg_cohort_${requestId.slice(11)}`;
}

/** Whether a fault keeps the response from ending in full (a stall does not). */
function hasBreakingFault(plan: MessagePlan): boolean {
  const { faults } = plan;
  return faults.malformed || faults.disconnect || faults.error !== undefined;
}

/** The input tokens a request is charged, as `usage.input_tokens` reports them. */
function inputTokens(request: MessagesRequest): number {
  return Math.max(1, estimateTokens(request.inputChars) + request.mediaTokens);
}
