import { Agent, type Dispatcher } from 'undici';
import type { LaneParams } from '../../shared/protocol.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { retryAfterFrom } from '../../shared/provider/retry.js';
import { resolveBaseURL, resolveCredential } from '../../shared/provider/transport/endpoint.js';
import { requestHeaders } from '../../shared/provider/transport/request-headers.js';
import { redactSecrets } from '../../shared/redact.js';

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
 * A call of the Message Batches API that did not succeed. `retry`: worth trying again (a 429, a
 * 5xx, no answer at all); otherwise the same call would fail the same way. The message names
 * the route and what answered, never the key.
 */
export class BatchApiError extends Error {
  readonly status: number | undefined;
  readonly retry: boolean;
  /** What the answer's `retry-after` (or `retry-after-ms`) asked to wait, in ms. */
  readonly retryAfterMs: number | undefined;
  constructor(
    message: string,
    status: number | undefined,
    retry: boolean,
    retryAfterMs?: number | undefined,
  ) {
    super(redactSecrets(message));
    this.status = status;
    this.retry = retry;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * The Message Batches API of one account (a base URL and a key) over undici, the provider's own
 * HTTP stack: the same base URL, credential and headers a streamed request carries.
 */
export class BatchApi {
  readonly #origin: string;
  readonly #base: string;
  readonly #headers: string[];
  readonly #dispatcher: Dispatcher;
  /** The base URL as messages show it: no credentials, no query. */
  readonly endpoint: string;

  constructor(config: ProviderConfig, apiKey: string | undefined) {
    const baseURL = resolveBaseURL(config);
    const url = new URL(baseURL.endsWith('/') ? baseURL : `${baseURL}/`);
    this.#origin = url.origin;
    this.#base = url.pathname;
    this.endpoint = `${url.origin}${url.pathname}`.replace(/\/$/, '');
    this.#headers = [...requestHeaders(config, resolveCredential(apiKey))].flat();
    this.#dispatcher = new Agent({
      headersTimeout: config.requestTimeoutMs,
      bodyTimeout: config.requestTimeoutMs,
    });
  }

  /** Creates a batch of `requests`; answers it as created. */
  async create(requests: readonly BatchRequest[], signal: AbortSignal): Promise<MessageBatch> {
    return batchOf(await this.#json('POST', 'v1/messages/batches', signal, { requests }));
  }

  /** The batch as it is now: how it is polled. */
  async retrieve(id: string, signal: AbortSignal): Promise<MessageBatch> {
    return batchOf(
      await this.#json('GET', `v1/messages/batches/${encodeURIComponent(id)}`, signal),
    );
  }

  /** Starts the batch's cancellation. */
  async cancel(id: string, signal: AbortSignal): Promise<void> {
    await this.#json('POST', `v1/messages/batches/${encodeURIComponent(id)}/cancel`, signal);
  }

  /**
   * The results file at `url` (the batch's `results_url`), as its lines come: each line, and at
   * the end what followed the last newline (`''` when the file ended with one).
   */
  async *results(url: string, signal: AbortSignal): AsyncGenerator<string, void> {
    const target = new URL(url);
    const response = await this.#send(
      'GET',
      target.origin,
      target.pathname + target.search,
      signal,
    );
    if (response.statusCode !== 200) throw await failure(response, 'GET results');
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
    path: string,
    signal: AbortSignal,
    body?: unknown,
  ): Promise<unknown> {
    const response = await this.#send(method, this.#origin, this.#base + path, signal, body);
    const route = `${method} ${this.endpoint}/${path}`;
    if (response.statusCode !== 200) throw await failure(response, route);
    try {
      return await response.body.json();
    } catch {
      throw new BatchApiError(`${route} answered 200 with a body that is not JSON`, 200, true);
    }
  }

  async #send(
    method: 'GET' | 'POST',
    origin: string,
    path: string,
    signal: AbortSignal,
    body?: unknown,
  ): Promise<Dispatcher.ResponseData> {
    try {
      return await this.#dispatcher.request({
        origin,
        path,
        method,
        headers: this.#headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal,
      });
    } catch (error) {
      if (signal.aborted) throw error;
      const cause = error instanceof Error ? error.message : String(error);
      throw new BatchApiError(
        `${method} ${origin}${path} got no answer: ${cause}`,
        undefined,
        true,
      );
    }
  }
}

/** What a status that is not 200 says: its API error message, and whether to try again. */
async function failure(response: Dispatcher.ResponseData, route: string): Promise<BatchApiError> {
  const status = response.statusCode;
  let detail = '';
  try {
    const text = await response.body.text();
    const parsed = JSON.parse(text) as { error?: { message?: unknown } };
    detail = typeof parsed.error?.message === 'string' ? parsed.error.message : text.slice(0, 200);
  } catch {
    // No body, or not JSON: the status says it.
  }
  const retry = status === 429 || status >= 500;
  const after = retryAfterFrom((name) => {
    const value = response.headers[name];
    return Array.isArray(value) ? value[0] : value;
  });
  return new BatchApiError(
    `${route} answered ${status}${detail === '' ? '' : `: ${detail}`}`,
    status,
    retry,
    after,
  );
}

function batchOf(value: unknown): MessageBatch {
  const batch = value as Partial<MessageBatch> | null;
  if (
    typeof batch !== 'object' ||
    batch === null ||
    typeof batch.id !== 'string' ||
    typeof batch.processing_status !== 'string'
  ) {
    throw new BatchApiError(
      'the Message Batches API answered something that is not a batch',
      200,
      true,
    );
  }
  return {
    id: batch.id,
    processing_status: batch.processing_status,
    results_url: typeof batch.results_url === 'string' ? batch.results_url : null,
  };
}
