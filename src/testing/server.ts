import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  decideFate,
  type RequestLoad,
  type ResolvedOptions,
  requestLoad,
  resolveOptions,
  ScriptedModelOptionError,
  type ScriptedModelOptions,
  TokenBucket,
} from './load-model.js';
import { planResponse } from './plan.js';
import { validateRequest } from './request-validation.js';
import { playJson, playStream, sendError } from './response-player.js';
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
  readonly #bucket: TokenBucket | undefined;
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
    this.#bucket =
      options.rpm > 0 ? new TokenBucket(options.rpm, this.#scheduler.now()) : undefined;
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
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'POST' || path !== '/v1/messages') {
      request.resume();
      sendError(response, {
        status: 404,
        type: 'not_found_error',
        message: `Expected POST /v1/messages, got ${request.method} ${request.url}`,
        requestId,
      });
      return;
    }
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
      const exchange: Exchange = { request, response, requestId, deliberateClose: false };
      this.#answer(exchange, Buffer.concat(chunks).toString('utf8'));
    });
  }

  #count(status: number): void {
    if (status === 200) this.#stats.completed++;
    else if (status === 400) this.#stats.rejected400++;
    else if (status === 429) this.#stats.rateLimited429++;
    else if (status === 529) this.#stats.overloaded529++;
  }

  #answer(exchange: Exchange, body: string): void {
    const { request, response, requestId } = exchange;
    const reject = (
      status: number,
      type: string,
      message: string,
      headers?: Record<string, string>,
    ) => sendError(response, { status, type, message, requestId, ...(headers && { headers }) });
    let load: RequestLoad;
    try {
      load = requestLoad(request.headers, this.#options);
    } catch (error) {
      if (!(error instanceof ScriptedModelOptionError)) throw error;
      reject(400, 'invalid_request_error', error.message);
      return;
    }
    if (!this.#takeRateToken(reject)) return;
    const parsed = parseBody(body);
    if (!parsed.ok) {
      reject(400, 'invalid_request_error', parsed.message);
      return;
    }
    const checked = validateRequest(parsed.value);
    if (!checked.ok) {
      reject(400, 'invalid_request_error', checked.message);
      return;
    }
    const messagesRequest = checked.value;
    const turn = messagesRequest.messages.filter((message) => message.role === 'assistant').length;
    const { attempt } = load;
    this.emit('request', {
      turn,
      attempt,
      stream: messagesRequest.stream,
      tools: messagesRequest.tools.map((tool) => tool.name),
    } satisfies ScriptedRequestEvent);
    this.#watchClose(exchange, { turn, attempt });
    const fate = decideFate(load, this.#options.seed, body);
    if (fate.overloaded) {
      reject(529, 'overloaded_error', 'Overloaded (x-cohort-overload / overloadProbability)');
      return;
    }
    const plan = planResponse(messagesRequest, attempt);
    const play = (): void => {
      if (response.destroyed) return;
      if (plan.kind === 'error') {
        reject(plan.status, plan.type, plan.message, plan.headers);
        return;
      }
      const context = {
        response,
        scheduler: this.#scheduler,
        identity: { messageId: `msg_cohort_${requestId.slice(11)}`, model: messagesRequest.model },
        requestId,
        ttftMs: fate.ttftMs,
        charsPerMs: fate.charsPerMs,
        chunkChars: this.#options.chunkChars,
        onDeliberateClose: () => {
          exchange.deliberateClose = true;
        },
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

  /** Takes a token from the requests-per-minute bucket, or answers 429 (false). */
  #takeRateToken(
    reject: (
      status: number,
      type: string,
      message: string,
      headers: Record<string, string>,
    ) => void,
  ): boolean {
    if (this.#bucket === undefined) return true;
    const token = this.#bucket.take(this.#scheduler.now());
    if (token.ok) return true;
    reject(
      429,
      'rate_limit_error',
      `Rate limit of ${this.#options.rpm} requests per minute exceeded; retry in ${token.waitMs} ms`,
      {
        'retry-after': String(Math.max(1, Math.ceil(token.waitMs / 1000))),
        'retry-after-ms': String(token.waitMs),
      },
    );
    return false;
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
