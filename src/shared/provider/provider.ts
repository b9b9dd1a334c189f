import Anthropic from '@anthropic-ai/sdk';
import { delay } from 'abort-controller-x';
import { type AttemptFailure, classify, excerpt, formatMs, publicEndpoint } from './classify.js';
import { API_KEY_ENV, PLACEHOLDER_KEY, type ProviderConfig } from './config.js';
import { backoffMs, shouldRetry } from './retry.js';
import { TurnAssembler } from './turn-assembler.js';
import type {
  AssistantTurn,
  CompleteOptions,
  ProviderError,
  ProviderRequest,
  ProviderResult,
  ProviderUsage,
} from './types.js';

/** Header that tells a server which attempt this is (0 first). The scripted model reads it. */
export const ATTEMPT_HEADER = 'x-cohort-attempt';

/** Why our own code aborted a request's controller, as opposed to the caller's signal. */
const STALLED = Symbol('stalled');

type AttemptOutcome =
  | { ok: true; turn: AssistantTurn }
  | ({ ok: false; usage: ProviderUsage } & AttemptFailure);

/**
 * Talks to a Messages-API server. One instance per config per thread; it holds one SDK client.
 *
 * The SDK runs with `maxRetries: 0`: its own retry sleep does not observe the abort signal, so
 * retries happen here, with an abortable backoff. Each attempt has its own AbortController linked
 * to the caller's signal, so aborting one request never aborts another.
 */
export class Provider {
  readonly config: ProviderConfig;
  readonly #client: Anthropic;
  /** The request URL as messages show it: no credentials, no query. */
  readonly #endpoint: string;

  constructor(config: ProviderConfig) {
    this.config = config;
    this.#client = new Anthropic({
      apiKey: process.env[API_KEY_ENV] || PLACEHOLDER_KEY,
      ...(config.baseURL === undefined ? {} : { baseURL: config.baseURL }),
      maxRetries: 0,
      timeout: config.requestTimeoutMs,
      // The SDK would print a malformed stream chunk to the console; failures are values here.
      logLevel: 'off',
      ...(config.headers === undefined ? {} : { defaultHeaders: config.headers }),
    });
    // The client's own base URL: it has resolved ANTHROPIC_BASE_URL and the default already.
    this.#endpoint = publicEndpoint(this.#client.baseURL);
  }

  async complete(request: ProviderRequest, options: CompleteOptions): Promise<ProviderResult> {
    const usage: ProviderUsage = { inputTokens: 0, outputTokens: 0 };
    const maxAttempts = this.config.maxRetries + 1;
    for (let attempt = 1; ; attempt++) {
      if (options.signal.aborted) return aborted(attempt - 1, usage, options.signal);
      const outcome = await this.#attempt(request, attempt - 1, options);
      if (outcome.ok) return { ok: true, turn: outcome.turn, calls: attempt };
      usage.inputTokens += outcome.usage.inputTokens;
      usage.outputTokens += outcome.usage.outputTokens;
      const error = outcome.error;
      if (error.code === 'aborted') return { ok: false, error, calls: attempt, usage };
      if (!shouldRetry(outcome) || attempt >= maxAttempts) {
        return { ok: false, error: gaveUp(error, attempt), calls: attempt, usage };
      }
      const waitMs = backoffMs({
        retry: attempt - 1,
        baseMs: this.config.backoffBaseMs,
        maxMs: this.config.backoffMaxMs,
        headers: outcome.headers,
      });
      options.onRetry?.({ attempt: attempt + 1, maxAttempts, waitMs, error });
      try {
        await delay(options.signal, waitMs);
      } catch {
        return aborted(attempt, usage, options.signal);
      }
    }
  }

  async #attempt(
    request: ProviderRequest,
    attempt: number,
    options: CompleteOptions,
  ): Promise<AttemptOutcome> {
    const controller = new AbortController();
    const onAbort = () => controller.abort(options.signal.reason);
    options.signal.addEventListener('abort', onAbort, { once: true });
    const idleMs = this.config.idleTimeoutMs;
    let idleTimer: NodeJS.Timeout | undefined;
    const armIdle = () => {
      if (idleTimer) idleTimer.refresh();
      else idleTimer = setTimeout(() => controller.abort(STALLED), idleMs);
    };
    const assembler = new TurnAssembler();
    try {
      // Until headers arrive the SDK's own timeout applies; the idle limit covers the stream.
      const { data: stream, response } = await this.#client.messages
        .create(
          {
            model: request.model ?? this.config.model,
            max_tokens: this.config.maxTokens,
            messages: request.messages,
            ...(request.system === undefined ? {} : { system: request.system }),
            ...(request.tools.length === 0 ? {} : { tools: request.tools }),
            stream: true,
          },
          { signal: controller.signal, headers: { [ATTEMPT_HEADER]: String(attempt) } },
        )
        .withResponse();
      armIdle();
      const notAStream = await notAnEventStream(response, this.#endpoint);
      if (notAStream !== undefined) return this.#wrongServer(notAStream, assembler);
      let events = 0;
      for await (const event of stream) {
        armIdle();
        events++;
        const delta = assembler.push(event);
        if (delta && options.onTextDelta) options.onTextDelta(delta);
      }
      // The SDK ends an aborted stream quietly instead of throwing: say why it ended.
      if (controller.signal.aborted) throw controller.signal.reason;
      return this.#ended(assembler, events);
    } catch (error) {
      if (options.signal.aborted) {
        return { ok: false, error: abortError(options.signal), usage: assembler.usage };
      }
      if (controller.signal.aborted && controller.signal.reason === STALLED) {
        const message = `no stream event from ${this.#endpoint} for ${formatMs(idleMs)} (the limit is set by --idle-timeout, provider.idleTimeoutMs)`;
        return { ok: false, error: { code: 'stalled', message }, usage: assembler.usage };
      }
      const context = { endpoint: this.#endpoint, requestTimeoutMs: this.config.requestTimeoutMs };
      return { ok: false, ...classify(error, context), usage: assembler.usage };
    } finally {
      if (idleTimer) clearTimeout(idleTimer);
      options.signal.removeEventListener('abort', onAbort);
    }
  }

  /** The stream ended without an error: a whole turn, or a stream that was not what it seemed. */
  #ended(assembler: TurnAssembler, events: number): AttemptOutcome {
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
    return { ok: true, turn: assembler.finish() };
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
async function notAnEventStream(response: Response, endpoint: string): Promise<string | undefined> {
  const type = response.headers.get('content-type');
  // Only a type that is plainly something else (a web page, a JSON or XML API) is judged here;
  // a stream served with no content-type, or an odd one, is judged by its events instead.
  if (
    type === null ||
    !/^\s*(text\/html|text\/xml|application\/(json|xml|problem\+json))\b/i.test(type)
  ) {
    return undefined;
  }
  const start = await bodyStart(response);
  const kind = `content-type ${excerpt(type, 80)}`;
  const body = start === '' ? 'an empty body' : `a body that starts \`${excerpt(start, 60)}\``;
  return `${endpoint} answered ${response.status} with ${kind} and ${body}`;
}

/** The first bytes of a body as text. The rest is never read: the connection is let go. */
async function bodyStart(response: Response, maxBytes = 256): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, maxBytes));
}

/** The last attempt's error; when there were several, the message says how many. */
function gaveUp(error: ProviderError, attempts: number): ProviderError {
  return attempts > 1
    ? { ...error, message: `${error.message} (after ${attempts} attempts)` }
    : error;
}

function aborted(calls: number, usage: ProviderUsage, signal: AbortSignal): ProviderResult {
  return { ok: false, error: abortError(signal), calls, usage };
}

function abortError(signal: AbortSignal): ProviderError {
  const reason = signal.reason;
  const text = typeof reason === 'string' ? reason : reason instanceof Error ? reason.message : '';
  return { code: 'aborted', message: text ? `aborted: ${text}` : 'aborted' };
}
