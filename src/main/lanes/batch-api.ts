import { APIConnectionError } from '@anthropic-ai/sdk/error';
import type { Dispatcher } from 'undici';
import type { LaneParams } from '../../shared/protocol.js';
import {
  type AttemptFailure,
  classify,
  type FailureContext,
  publicUrl,
} from '../../shared/provider/classify.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { retryAfterFrom, shouldRetry } from '../../shared/provider/retry.js';
import {
  fetchRefusal,
  resolveBaseURL,
  resolveCredential,
} from '../../shared/provider/transport/endpoint.js';
import { requestHeaders } from '../../shared/provider/transport/request-headers.js';
import {
  makeDispatcher,
  requestFailure,
  statusError,
  type Target,
  target,
  webHeaders,
} from '../../shared/provider/transport/undici-transport.js';

/** One request of a batch, as the create takes it. */
export interface BatchRequest {
  custom_id: string;
  params: LaneParams;
}

/** A Message Batch as the API answers it: the fields the lane reads. */
export interface MessageBatch {
  id: string;
  processing_status: 'in_progress' | 'canceling' | 'ended';
  results_url: string | null;
}

/**
 * A call of the Message Batches API that did not succeed, classified as a streamed request's
 * failure is (`classify`): its code, its message (the route and what answered, never the key or
 * a URL's query), the response's headers (for `retry-after`), and whether it is final.
 */
export class BatchApiError extends Error {
  readonly failure: AttemptFailure;
  constructor(failure: AttemptFailure) {
    super(failure.error.message);
    this.failure = failure;
  }

  get status(): number | undefined {
    return this.failure.error.status;
  }

  /** Worth trying again: a retryable code that nothing marked final. */
  get retry(): boolean {
    return shouldRetry(this.failure);
  }

  /** What the answer's `retry-after` (or `retry-after-ms`) asked to wait, in ms. */
  get retryAfterMs(): number | undefined {
    const headers = this.failure.headers;
    return headers ? retryAfterFrom((name) => headers.get(name)) : undefined;
  }
}

/**
 * The Message Batches API of one account (a base URL and a key) over the undici transport's own
 * HTTP stack: the same base URL (its path and query kept), credential, headers, proxy, redirects
 * and timeouts a streamed request has.
 */
export class BatchApi {
  /** Where the Messages API is, or why no request can go there. */
  readonly #target: Target;
  readonly #headers: string[];
  readonly #dispatcher: Dispatcher;
  readonly #context: FailureContext;
  /** The base URL as messages and the journal show it: no credentials, no query. */
  readonly endpoint: string;

  constructor(config: ProviderConfig, apiKey: string | undefined) {
    const baseURL = resolveBaseURL(config);
    this.#target = target(baseURL);
    this.endpoint = publicUrl(baseURL).replace(/\/+$/, '');
    this.#headers = [...requestHeaders(config, resolveCredential(apiKey))].flat();
    this.#dispatcher = makeDispatcher(config);
    this.#context = {
      endpoint: `${this.endpoint}/v1/messages/batches`,
      requestTimeoutMs: config.requestTimeoutMs,
      keyInCode: apiKey !== undefined,
    };
  }

  /** Creates a batch of `requests`; answers it as created. */
  async create(requests: readonly BatchRequest[], signal: AbortSignal): Promise<MessageBatch> {
    return batchOf(await this.#json('POST', '', signal, { requests }));
  }

  /** The batch as it is now: how it is polled. */
  async retrieve(id: string, signal: AbortSignal): Promise<MessageBatch> {
    return batchOf(await this.#json('GET', `/${encodeURIComponent(id)}`, signal));
  }

  /** Starts the batch's cancellation. */
  async cancel(id: string, signal: AbortSignal): Promise<void> {
    await this.#json('POST', `/${encodeURIComponent(id)}/cancel`, signal);
  }

  /**
   * The results file at `url` (the batch's `results_url`), as its lines come: each line, and at
   * the end what followed the last newline (`''` when the file ended with one). The credential
   * goes only to the base URL's own origin: a results file elsewhere is asked for without it.
   */
  async *results(url: string, signal: AbortSignal): AsyncGenerator<string, void> {
    const context = { ...this.#context, endpoint: publicUrl(url) };
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new BatchApiError({
        error: { code: 'bad_response', message: `results_url ${context.endpoint} is not a URL` },
      });
    }
    const refusal = fetchRefusal(parsed);
    if (refusal) throw fail(new APIConnectionError({ cause: refusal }), context, true);
    const own = 'origin' in this.#target && this.#target.origin === parsed.origin;
    const response = await this.#send(
      {
        origin: parsed.origin,
        path: parsed.pathname + parsed.search,
        method: 'GET',
        headers: own ? this.#headers : [],
      },
      signal,
      context,
    );
    const decoder = new TextDecoder();
    let rest = '';
    for await (const chunk of response.body) {
      rest += decoder.decode(chunk as Buffer, { stream: true });
      let newline = rest.indexOf('\n');
      while (newline >= 0) {
        yield rest.slice(0, newline);
        rest = rest.slice(newline + 1);
        newline = rest.indexOf('\n');
      }
    }
    rest += decoder.decode();
    yield rest;
  }

  close(): Promise<void> {
    return this.#dispatcher.close();
  }

  async #json(
    method: 'GET' | 'POST',
    route: string,
    signal: AbortSignal,
    body?: unknown,
  ): Promise<unknown> {
    const at = this.#target;
    const context = { ...this.#context, endpoint: `${this.#context.endpoint}${route}` };
    // Refused as the streamed request would be, and never worth a retry: the URL stays the same.
    if ('invalid' in at) {
      throw new BatchApiError({
        error: {
          code: 'bad_request',
          message: `the base URL ${JSON.stringify(this.endpoint)} is not a URL: ${at.invalid.message}`,
        },
        final: true,
      });
    }
    if ('refusal' in at) throw fail(new APIConnectionError({ cause: at.refusal }), context, true);
    // The Messages URL with `/batches…` after its path, before the base URL's query.
    const [pathname, query] = splitQuery(at.path);
    const response = await this.#send(
      {
        origin: at.origin,
        path: `${pathname}/batches${route}${query}`,
        method,
        headers: this.#headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      },
      signal,
      context,
    );
    try {
      return await response.body.json();
    } catch {
      throw new BatchApiError({
        error: {
          code: 'bad_response',
          status: 200,
          message: `${context.endpoint} answered 200 with a body that is not JSON`,
        },
      });
    }
  }

  /** One request; any answer but a 2xx is thrown, classified. */
  async #send(
    request: Omit<Dispatcher.RequestOptions, 'signal'>,
    signal: AbortSignal,
    context: FailureContext,
  ): Promise<Dispatcher.ResponseData> {
    let response: Dispatcher.ResponseData;
    try {
      response = await this.#dispatcher.request({
        ...request,
        signal,
        throwOnMaxRedirect: true,
      } as Dispatcher.RequestOptions);
    } catch (error) {
      if (signal.aborted) throw error;
      throw fail(requestFailure(error, signal), context);
    }
    const status = response.statusCode;
    if (status < 200 || status > 299) {
      throw fail(await statusError(status, response.body, webHeaders(response.headers)), context);
    }
    return response;
  }
}

function fail(error: unknown, context: FailureContext, final = false): BatchApiError {
  const failure = classify(error, context);
  return new BatchApiError(final ? { ...failure, final } : failure);
}

function splitQuery(path: string): [string, string] {
  const at = path.indexOf('?');
  return at < 0 ? [path, ''] : [path.slice(0, at), path.slice(at)];
}

function batchOf(value: unknown): MessageBatch {
  const batch = value as Partial<MessageBatch> | null;
  if (
    typeof batch !== 'object' ||
    batch === null ||
    typeof batch.id !== 'string' ||
    typeof batch.processing_status !== 'string'
  ) {
    throw new BatchApiError({
      error: {
        code: 'bad_response',
        status: 200,
        message: 'the Message Batches API answered something that is not a batch',
      },
    });
  }
  return {
    id: batch.id,
    processing_status: batch.processing_status,
    results_url: typeof batch.results_url === 'string' ? batch.results_url : null,
  };
}
