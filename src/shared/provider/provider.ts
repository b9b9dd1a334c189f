import { createHash } from 'node:crypto';
import { delay } from 'abort-controller-x';
import { pickRateLimitHeaders } from '../governor/headers.js';
import {
  type Admission,
  type AdmitRequest,
  opensBreaker,
  type SettleOutcome,
  type SettleReport,
} from '../governor/types.js';
import { defined } from '../option-schema.js';
import { type CachePlan, planCache } from './cache.js';
import { closeChatSpan, openChatSpan } from './chat-span.js';
import { type AttemptFailure, classify, excerpt, formatMs, publicEndpoint } from './classify.js';
import type { ProviderConfig } from './config.js';
import { estimateInputTokens } from './request-size.js';
import { backoffMs, retryAfterMs, shouldRetry } from './retry.js';
import { abortSoon } from './teardown.js';
import {
  createTransport,
  type MessagesBody,
  type Transport,
  type TransportResponse,
} from './transport/index.js';
import { TurnAssembler } from './turn-assembler.js';
import {
  type AssistantTurn,
  addUsage,
  type CompleteOptions,
  type ModelClient,
  noUsage,
  type ProviderError,
  type ProviderRequest,
  type ProviderResult,
  type ProviderUsage,
} from './types.js';

export { estimateInputTokens } from './request-size.js';
export { ATTEMPT_HEADER } from './transport/types.js';

/** Why our own code aborted a request's controller, as opposed to the caller's signal. */
const STALLED = Symbol('stalled');

type AttemptOutcome =
  | { ok: true; turn: AssistantTurn; headers: Headers }
  | ({ ok: false; usage: ProviderUsage; reached?: boolean } & AttemptFailure);

/**
 * Talks to a Messages-API server. One instance per config per thread; it holds one transport
 * (`config.transport`, see transport/types.ts) and with it the connections.
 *
 * Retries happen here, with an abortable backoff: neither transport retries on its own. Each
 * attempt has its own AbortController linked to the caller's signal, so aborting one request
 * never aborts another.
 */
export class Provider implements ModelClient {
  readonly config: ProviderConfig;
  readonly #transport: Transport;
  /** The request URL as messages show it: no credentials, no query. */
  readonly #endpoint: string;
  /** The governor's key without the model: a hash of the base URL and the API key. */
  readonly #account: string;
  /** Whether the key was given in code rather than read from the environment. */
  readonly #keyInCode: boolean;

  /**
   * `apiKey`: a key given in code (a spawn's or a group's `provider.apiKey`); unset, the
   * environment's. The governor's key hashes it, so each key's limits are learned apart.
   */
  constructor(config: ProviderConfig, apiKey?: string) {
    this.config = config;
    this.#transport = createTransport(config, apiKey);
    this.#keyInCode = apiKey !== undefined;
    // The transport's base URL: it has resolved ANTHROPIC_BASE_URL and the default already.
    this.#endpoint = publicEndpoint(this.#transport.baseURL);
    this.#account = accountKey(this.#transport.baseURL, this.#transport.credential);
  }

  /** Lets go of the transport's pooled connections. Requests in flight finish first. */
  close(): Promise<void> {
    return this.#transport.close();
  }

  async complete(request: ProviderRequest, options: CompleteOptions): Promise<ProviderResult> {
    const usage: ProviderUsage = noUsage();
    const maxAttempts = this.config.maxRetries + 1;
    const { gate, signal } = options;
    // Attempts that count against maxRetries: 429s and 529s the governor paces do not.
    let counted = 0;
    // When the current run of 429s and 529s began, and how many, for the governor's patience.
    let refusedSince: number | undefined;
    let refusals = 0;
    let lastRefusal: ProviderError | undefined;
    const patienceMs = gate ? (options.patienceMs ?? gate.patienceMs) : 0;
    const model = request.model ?? this.config.model;
    const cache =
      request.cache?.mode === 'auto' ? planCache(request, model, request.cache.ttl) : undefined;
    const body = this.#body(request, cache);
    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) return aborted(attempt - 1, usage, signal);
      let permit: number | undefined;
      if (gate) {
        // While refused, the wait in the governor's queue counts against the patience too.
        const left =
          refusedSince === undefined ? undefined : patienceMs - (Date.now() - refusedSince);
        const patience = left === undefined ? undefined : patienceTimer(signal, left);
        let admission: Admission;
        try {
          admission = await gate.admit(
            this.#admitRequest(request, attempt, options, cache),
            patience?.signal ?? signal,
          );
        } finally {
          patience?.clear();
        }
        if (!admission.ok) {
          if (admission.reason === 'aborted') {
            if (signal.aborted || refusedSince === undefined || lastRefusal === undefined) {
              return aborted(attempt - 1, usage, signal);
            }
            return outOfPatience(
              lastRefusal,
              Date.now() - refusedSince,
              attempt - 1,
              usage,
              options,
            );
          }
          const error: ProviderError =
            admission.reason === 'breaker'
              ? { code: admission.code, message: admission.message, breakerOpen: true }
              : { code: 'quota_exhausted', message: admission.message };
          return { ok: false, error, calls: attempt - 1, usage };
        }
        permit = admission.permit;
        // A cancel can land while the grant's continuation waits its turn: a worker's uplink
        // hands it the grant and the cancel in one post, with no turn between them, and the
        // cancel's abort fires before the attempt below listens. Sent anyway, the request would
        // run to its end, cancel or not: the permit goes back unused instead.
        if (signal.aborted) {
          gate.settle(permit, { outcome: 'aborted', usage: noUsage() });
          return aborted(attempt - 1, usage, signal);
        }
      }
      const span = options.trace
        ? openChatSpan(options.trace, request.model ?? this.config.model)
        : undefined;
      const onHead =
        gate && permit !== undefined
          ? (headers: Headers) => gate.opened(permit, pickRateLimitHeaders(headers))
          : undefined;
      const outcome = await this.#attempt(body, attempt - 1, options, onHead);
      if (span !== undefined) closeChatSpan(options.trace!, span, outcome);
      // The head already carried the headers: the settle need not carry them again.
      let report: SettleReport | undefined;
      if (gate && permit !== undefined) {
        report = settleReport(outcome, !onHead);
        gate.settle(permit, report);
      }
      if (outcome.ok) return { ok: true, turn: outcome.turn, calls: attempt };
      addUsage(usage, outcome.usage);
      const error = outcome.error;
      if (error.code === 'aborted') return { ok: false, error, calls: attempt, usage };
      if (gate && isPaced(outcome)) {
        refusedSince ??= Date.now();
        refusals++;
        lastRefusal = error;
        const waited = Date.now() - refusedSince;
        if (waited >= patienceMs) {
          return outOfPatience(error, waited, attempt, usage, options);
        }
        // A `retry-after` pauses the whole key in the governor: back through it at once. A
        // refusal without one is this request's alone: it backs off, jittered, and goes again
        // through the governor, which judges by round trip whether the key should slow down.
        const told = retryAfterMs(outcome.headers);
        const waitMs =
          told !== undefined && told > 0
            ? 0
            : Math.min(
                patienceMs - waited,
                backoffMs({
                  retry: refusals - 1,
                  baseMs: this.config.backoffBaseMs,
                  maxMs: this.config.backoffMaxMs,
                }),
              );
        options.onRetry?.({ attempt: attempt + 1, maxAttempts, waitMs, error, paced: true });
        if (waitMs > 0) {
          try {
            await delay(signal, waitMs);
          } catch {
            return aborted(attempt, usage, signal);
          }
        }
        continue;
      }
      refusedSince = undefined;
      refusals = 0;
      counted++;
      if (!shouldRetry(outcome) || counted >= maxAttempts) {
        // Its settle shut the key (a refused key): a caller may stop sending that key work.
        const shut = report !== undefined && opensBreaker(report.outcome);
        const final = gaveUp(error, attempt);
        return {
          ok: false,
          error: shut ? { ...final, breakerOpen: true } : final,
          calls: attempt,
          usage,
        };
      }
      const waitMs = backoffMs({
        retry: counted - 1,
        baseMs: this.config.backoffBaseMs,
        maxMs: this.config.backoffMaxMs,
        headers: outcome.headers,
      });
      options.onRetry?.({ attempt: attempt + 1, maxAttempts, waitMs, error });
      try {
        await delay(signal, waitMs);
      } catch {
        return aborted(attempt, usage, signal);
      }
    }
  }

  #admitRequest(
    request: ProviderRequest,
    attempt: number,
    options: CompleteOptions,
    cache: CachePlan | undefined,
  ): AdmitRequest {
    const model = request.model ?? this.config.model;
    const admit: AdmitRequest = {
      key: governorKey(this.#account, model),
      label: `${model} at ${this.#endpoint}`,
      inputTokens: cache?.inputTokens ?? estimateInputTokens(request),
      maxTokens: this.config.maxTokens,
      priority: attempt > 1 || options.priority === true,
    };
    if (cache !== undefined) {
      admit.cache = cache.shared
        ? { history: cache.history, shared: cache.shared }
        : { history: cache.history };
    }
    return admit;
  }

  async #attempt(
    body: MessagesBody,
    attempt: number,
    options: CompleteOptions,
    onHead: ((headers: Headers) => void) | undefined,
  ): Promise<AttemptOutcome> {
    const assembler = new TurnAssembler();
    // A response arrived: a failure after this is not the provider being unreachable.
    let reached = false;
    const controller = new AbortController();
    // A request still waiting for its response head is answered `aborted` at once and torn down
    // a few turns later (teardown.ts): the caller's result does not wait behind the socket. Once
    // the response is streaming, the abort ends its events, so it is aborted at once.
    let halt: ((reason: unknown) => void) | undefined;
    const halted = new Promise<never>((_, reject) => {
      halt = reject;
    });
    const onAbort = () => {
      if (reached) controller.abort(options.signal.reason);
      else {
        halt?.(options.signal.reason);
        abortSoon(controller, options.signal.reason);
      }
    };
    options.signal.addEventListener('abort', onAbort, { once: true });
    const idleMs = this.config.idleTimeoutMs;
    let idleTimer: NodeJS.Timeout | undefined;
    const armIdle = () => {
      if (idleTimer) idleTimer.refresh();
      else idleTimer = setTimeout(() => controller.abort(STALLED), idleMs);
    };
    try {
      // Until headers arrive the request timeout applies; the idle limit covers the stream.
      const sending = this.#transport.send(body, { signal: controller.signal, attempt });
      // Answered by `halted` first, it rejects (or its body is let go) when torn down.
      sending.catch(ignore);
      const response = await Promise.race([sending, halted]);
      reached = true;
      armIdle();
      const notAStream = await notAnEventStream(response, this.#endpoint);
      if (notAStream !== undefined) return this.#wrongServer(notAStream, assembler);
      onHead?.(response.headers);
      let events = 0;
      for await (const event of response.events) {
        armIdle();
        events++;
        const delta = assembler.push(event);
        if (delta && options.onTextDelta) options.onTextDelta(delta);
      }
      // Both transports end an aborted stream quietly instead of throwing: say why it ended.
      if (controller.signal.aborted) throw controller.signal.reason;
      return this.#ended(assembler, events, response.headers);
    } catch (error) {
      if (options.signal.aborted) {
        return { ok: false, error: abortError(options.signal), usage: assembler.usage };
      }
      if (controller.signal.aborted && controller.signal.reason === STALLED) {
        const message = `no stream event from ${this.#endpoint} for ${formatMs(idleMs)} (the limit is set by --idle-timeout, provider.idleTimeoutMs)`;
        return { ok: false, error: { code: 'stalled', message }, usage: assembler.usage };
      }
      const context = {
        endpoint: this.#endpoint,
        requestTimeoutMs: this.config.requestTimeoutMs,
        keyInCode: this.#keyInCode,
      };
      // An HTTP status is an answer too: the transport throws it before the head is read.
      const failure = classify(error, context);
      const answered = reached || failure.error.status !== undefined;
      return { ok: false, ...failure, usage: assembler.usage, reached: answered };
    } finally {
      if (idleTimer) clearTimeout(idleTimer);
      options.signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * The request as a Message Batch request's `params`: the body a streamed attempt would send,
   * breakpoints in place when caching, without `stream` (a request in a batch cannot stream).
   */
  batchParams(request: ProviderRequest): Omit<MessagesBody, 'stream'> {
    const model = request.model ?? this.config.model;
    const cache =
      request.cache?.mode === 'auto' ? planCache(request, model, request.cache.ttl) : undefined;
    const { stream: _stream, ...params } = this.#body(request, cache);
    return params;
  }

  /** The request as sent: the same body for every attempt, breakpoints in place when caching. */
  #body(request: ProviderRequest, cache: CachePlan | undefined): MessagesBody {
    const parts = cache?.parts ?? request;
    return defined({
      model: request.model ?? this.config.model,
      max_tokens: this.config.maxTokens,
      messages: parts.messages,
      system: parts.system,
      tools: parts.tools.length === 0 ? undefined : parts.tools,
      stream: true as const,
    });
  }

  /** The stream ended without an error: a whole turn, or a stream that was not what it seemed. */
  #ended(assembler: TurnAssembler, events: number, headers: Headers): AttemptOutcome {
    if (events === 0) {
      // Cut before its first event (a proxy or a load balancer letting go): worth a retry.
      const message = `the stream from ${this.#endpoint} ended before its first event`;
      return { ok: false, error: { code: 'connection', message }, usage: assembler.usage };
    }
    if (!assembler.started) {
      return this.#wrongServer(
        `${this.#endpoint} answered with an event stream that has no message_start event`,
        assembler,
      );
    }
    if (!assembler.stopped) {
      // It began as a Messages-API stream and broke off: a connection fault, worth a retry.
      const message = `the stream from ${this.#endpoint} ended before message_stop`;
      return { ok: false, error: { code: 'connection', message }, usage: assembler.usage };
    }
    return { ok: true, turn: assembler.finish(), headers };
  }

  /**
   * A 200 from something that is not the Messages API: a web page, a JSON API, a proxy's notice.
   * It is `bad_response` like a garbled stream, but final: the same URL will answer the same way,
   * so retrying would only delay the message that the base URL is wrong.
   */
  #wrongServer(what: string, assembler: TurnAssembler): AttemptOutcome {
    return {
      ok: false,
      error: {
        code: 'bad_response',
        message: `${what}: not the Messages API; is the base URL right?`,
      },
      final: true,
      usage: assembler.usage,
    };
  }
}

/**
 * Says why a response is not an event stream, or nothing when it is one. The message shows the
 * content-type and the start of the body, so the user can recognise what answered.
 */
async function notAnEventStream(
  response: TransportResponse,
  endpoint: string,
): Promise<string | undefined> {
  const type = response.headers.get('content-type');
  // Only a type that is plainly something else (a web page, a JSON or XML API) is judged here;
  // a stream served with no content-type, or an odd one, is judged by its events instead.
  if (
    type === null ||
    !/^\s*(text\/html|text\/xml|application\/(json|xml|problem\+json))\b/i.test(type)
  ) {
    return undefined;
  }
  const start = await response.bodyStart(256);
  const kind = `content-type ${excerpt(type, 80)}`;
  const body = start === '' ? 'an empty body' : `a body that starts \`${excerpt(start, 60)}\``;
  return `${endpoint} answered ${response.status} with ${kind} and ${body}`;
}

/** A 429 or 529 the governor paces: one no retry can change is not. */
function isPaced(outcome: AttemptFailure): boolean {
  const { code } = outcome.error;
  return (code === 'rate_limited' || code === 'overloaded') && outcome.final !== true;
}

/**
 * What the governor learns from an attempt: its outcome, its cost and its rate-limit headers
 * (`withHeaders` false when its head carried them already).
 */
function settleReport(outcome: AttemptOutcome, withHeaders: boolean): SettleReport {
  if (outcome.ok) {
    const report: SettleReport = { outcome: 'ok', usage: outcome.turn.usage };
    if (withHeaders) report.headers = pickRateLimitHeaders(outcome.headers);
    return report;
  }
  const report: SettleReport = {
    outcome: settleOutcome(outcome),
    usage: outcome.usage,
    headers: pickRateLimitHeaders(outcome.headers),
  };
  const { outcome: said } = report;
  if (said === 'exhausted' || said === 'unreachable' || said === 'auth') {
    report.message = outcome.error.message;
  }
  if (outcome.reached === true) report.answered = true;
  return report;
}

function settleOutcome(outcome: Extract<AttemptOutcome, { ok: false }>): SettleOutcome {
  const { code } = outcome.error;
  if (code === 'quota_exhausted') return 'exhausted';
  if (code === 'auth') return 'auth';
  if (code === 'aborted') return 'aborted';
  // No answer at all: the provider is down, or the base URL points at nothing.
  if (code === 'connection' && outcome.reached !== true) return 'unreachable';
  if (outcome.final === true) return 'failed';
  if (code === 'rate_limited') return 'rate_limited';
  if (code === 'overloaded') return 'overloaded';
  return 'failed';
}

/** A request refused past its patience fails with the last refusal, saying so. */
function outOfPatience(
  error: ProviderError,
  waited: number,
  calls: number,
  usage: ProviderUsage,
  options: CompleteOptions,
): ProviderResult {
  const source =
    options.patienceMs === undefined
      ? 'governor.patienceMs'
      : "the agent's patienceMs, else governor.patienceMs";
  const message = `${error.message} (still refused after ${formatMs(waited)} of paced retries; the limit is set by ${source})`;
  return { ok: false, error: { ...error, message }, calls, usage };
}

/** A signal that aborts with `signal`, or when `ms` have passed: the patience left. */
function patienceTimer(signal: AbortSignal, ms: number): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(), Math.max(0, ms));
  return {
    signal: controller.signal,
    clear() {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * The account part of a governor key: the start of the SHA-256 of the base URL and the API key,
 * so accounts are told apart while neither the key nor credentials in the URL ever leave here
 * (the key appears in events).
 */
export function accountKey(baseURL: string, apiKey: string): string {
  return createHash('sha256').update(`${baseURL}\n${apiKey}`).digest('hex').slice(0, 16);
}

/** The governor's key for a model on an account (`accountKey`): what its limits are learned by. */
export function governorKey(account: string, model: string): string {
  return `${account} ${model}`;
}

/** The last attempt's error; when there were several, the message says how many. */
function gaveUp(error: ProviderError, attempts: number): ProviderError {
  return attempts > 1
    ? { ...error, message: `${error.message} (after ${attempts} attempts)` }
    : error;
}

function ignore(): void {}

function aborted(calls: number, usage: ProviderUsage, signal: AbortSignal): ProviderResult {
  return { ok: false, error: abortError(signal), calls, usage };
}

function abortError(signal: AbortSignal): ProviderError {
  const reason = signal.reason;
  const text = typeof reason === 'string' ? reason : reason instanceof Error ? reason.message : '';
  return { code: 'aborted', message: text ? `aborted: ${text}` : 'aborted' };
}
