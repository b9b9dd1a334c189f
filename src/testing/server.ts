import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { defined } from '../shared/option-schema.js';
import { type Attempt, AttemptCounter } from './attempts.js';
import { BatchRoutes } from './batch-routes.js';
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
import type { MessagesRequest } from './messages-api.js';
import { answerModels } from './models.js';
import { hasBreakingFault, inputTokens, planResponse } from './plan.js';
import { type CacheDecision, PromptCache, uncachedUsage } from './prompt-cache.js';
import { hasRateLimits, RateLimits, rateLimitRefusal } from './rate-limits.js';
import { validateRequest } from './request-validation.js';
import {
  answerFailure,
  apiKeyOf,
  authRefusal,
  invalid,
  parseBody,
  type Refusal,
  readBody,
  routeOf,
} from './requests.js';
import { playJson, playStream, sendError } from './response-player.js';
import {
  countAnswer,
  emptyStats,
  type ScriptedClientClosedEvent,
  type ScriptedModel,
  type ScriptedModelStats,
  type ScriptedRequestEvent,
} from './server-types.js';
import { SpendCap } from './spend-cap.js';
import { StreamCapacity } from './stream-capacity.js';
import { type ResolvedThread, resolveThread } from './thread-turns.js';
import { ThreadStore } from './threads.js';
import { TickScheduler } from './tick-scheduler.js';

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
  readonly #scheduler: TickScheduler;
  readonly #limits: RateLimits | undefined;
  /** Undefined with `cache: false`: cache_control is then only checked for its shape. */
  readonly #cache: PromptCache | undefined;
  readonly #spend: SpendCap | undefined;
  readonly #capacity: StreamCapacity | undefined;
  readonly #attempts = new AttemptCounter();
  readonly #threads = new ThreadStore();
  readonly #stats = emptyStats();
  readonly #batches: BatchRoutes;
  #sequence = 0;
  #closing = false;
  #port = 0;

  constructor(options: ResolvedOptions) {
    super();
    this.#options = options;
    this.#scheduler = new TickScheduler(4, options.clock);
    this.#cache = options.cache ? new PromptCache() : undefined;
    this.#limits = hasRateLimits(options) ? new RateLimits(options) : undefined;
    this.#spend = options.spendCapTokens > 0 ? new SpendCap(options.spendCapTokens) : undefined;
    this.#capacity = options.maxStreams > 0 ? new StreamCapacity(options.maxStreams) : undefined;
    this.#batches = new BatchRoutes({
      options,
      now: () => this.#scheduler.now(),
      cache: this.#cache,
      attempts: this.#attempts,
      stats: this.#stats,
      baseUrl: () => this.url,
    });
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
    response.on('finish', () => countAnswer(this.#stats, response.statusCode));
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
        `Expected POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models, GET /v1/models/{id}, POST or GET /v1/messages/batches, GET or DELETE /v1/messages/batches/{id}, POST /v1/messages/batches/{id}/cancel or GET /v1/messages/batches/{id}/results, got ${request.method} ${path}`,
      );
      return;
    }
    if (route.kind === 'messages') this.#stats.messages++;
    const refusal = this.#options.strictAuth ? authRefusal(request.headers) : undefined;
    if (refusal !== undefined) {
      reject(refusal.status, refusal.type, refusal.message);
      return;
    }
    if (route.kind === 'models') {
      request.resume();
      answerModels(response, requestId, query, route.id);
      return;
    }
    if (route.kind === 'batches') {
      this.#batches.answer(request, response, requestId, route, query);
      return;
    }
    readBody(request, response, requestId, (body) => {
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

  /** `POST /v1/messages/count_tokens`: the input token estimate `usage.input_tokens` would report. */
  #answerCount(exchange: Exchange, body: string): void {
    const { response, requestId } = exchange;
    const parsed = parseBody(body);
    const cache = this.#cache === undefined ? {} : { cache: 'check' as const };
    const checked = parsed.ok
      ? validateRequest(parsed.value, { endpoint: 'count_tokens', ...cache })
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

  #answer(exchange: Exchange, body: string): void {
    const { request, response, requestId } = exchange;
    const key = apiKeyOf(request.headers);
    // Every answer to a request for a key carries that key's rate-limit headers.
    const reject = (refusal: Refusal): void => {
      const rate = exchange.rateHeaders ?? this.#limits?.headers(key, this.#scheduler.now());
      const headers = rate === undefined ? refusal.headers : { ...rate, ...refusal.headers };
      sendError(response, { ...refusal, requestId, ...defined({ headers }) });
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
    const options = this.#cache === undefined ? {} : { cache: 'hash' as const };
    const checked = parsed.ok ? validateRequest(parsed.value, options) : parsed;
    if (!checked.ok) {
      reject(invalid(checked.message));
      return;
    }
    // A full server refuses before anything is taken from the buckets, as a 529 costs nothing.
    const full = this.#capacity?.refusal();
    if (full !== undefined) {
      reject(full);
      return;
    }
    // Past the spend cap nothing else matters: the request takes nothing from the buckets.
    const spent = this.#spend?.refusal(key);
    if (spent !== undefined) {
      reject(spent);
      return;
    }
    const resolved = resolveThread(
      this.#threads,
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
    // What the request would read and write decides its usage and what the limits charge;
    // the cache itself changes only once a message response starts (see #play).
    const totalInput = inputTokens(messagesRequest);
    const cached = this.#cache?.lookup(key, messagesRequest, totalInput, this.#scheduler.now());
    const usage = cached?.usage ?? uncachedUsage(totalInput);
    // As the real API's input-token limit does, reads are not charged, writes are.
    const limited = this.#admit(exchange, key, usage.inputTokens + usage.cacheCreationInputTokens);
    if (limited !== undefined) {
      exchange.release?.();
      reject(limited);
      return;
    }
    const { attempt } = load;
    this.#announce(exchange, messagesRequest, attempt);
    const fate = decideFate(load, this.#options.seed, body);
    const plan = fate.overloaded ? undefined : planResponse(messagesRequest, attempt, usage);
    // Only a message is billed, at the usage it reports (every input token, read from the
    // cache, written to it or neither, and the output); an error or a 529 costs nothing.
    if (this.#spend !== undefined && plan?.kind === 'message') {
      this.#spend.charge(key, totalInput + plan.outputTokens);
    }
    this.#onSettled(exchange, key, resolved, plan, counted);
    if (plan === undefined) {
      reject({
        status: 529,
        type: 'overloaded_error',
        message: 'Overloaded (x-cohort-overload / overloadProbability)',
      });
      return;
    }
    this.#play(exchange, messagesRequest, plan, fate, cached);
  }

  /**
   * Takes the request's share of the rate limits and sets their headers on the response, or
   * says which limit ran out (the 429).
   */
  #admit(exchange: Exchange, key: string, chargedInput: number): Refusal | undefined {
    const limits = this.#limits;
    if (limits === undefined) return undefined;
    const admission = limits.admit(key, chargedInput, this.#scheduler.now());
    if (!admission.ok) return rateLimitRefusal(admission);
    exchange.rateHeaders = admission.headers;
    // Output is charged as it is generated, at 4 characters a token.
    exchange.onOutput = (chars) => limits.chargeOutput(key, chars / 4, this.#scheduler.now());
    return undefined;
  }

  #play(
    exchange: Exchange,
    messagesRequest: MessagesRequest,
    plan: ReturnType<typeof planResponse>,
    fate: RequestFate,
    cached: CacheDecision | undefined,
  ): void {
    const { response, requestId } = exchange;
    this.#capacity?.hold(response);
    const play = (): void => {
      if (response.destroyed) return;
      if (plan.kind === 'error') {
        const { status, type, message, headers, details } = plan;
        const rate = exchange.rateHeaders;
        sendError(response, {
          status,
          type,
          message,
          headers: rate === undefined ? headers : { ...rate, ...headers },
          requestId,
          ...defined({ details }),
        });
        return;
      }
      // The response starts now (a stream's message_start goes out at once): what it wrote
      // to the cache becomes readable, and what it read lives on.
      if (cached !== undefined) this.#cache?.commit(cached, this.#scheduler.now());
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
        ...defined({ onOutput: exchange.onOutput, headers: exchange.rateHeaders }),
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

  /** Emits `request` for an admitted request and watches for its client closing early. */
  #announce(exchange: Exchange, request: MessagesRequest, attempt: number): void {
    const turn = request.messages.filter((message) => message.role === 'assistant').length;
    this.emit('request', {
      turn,
      attempt,
      stream: request.stream,
      tools: request.tools.map((tool) => tool.name),
    } satisfies ScriptedRequestEvent);
    this.#watchClose(exchange, { turn, attempt });
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

function messageIdOf(requestId: string): string {
  return `msg_cohort_${requestId.slice(11)}`;
}
