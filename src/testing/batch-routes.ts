/**
 * The HTTP side of the Message Batches API: `POST /v1/messages/batches` (create),
 * `GET /v1/messages/batches` (list), `GET /v1/messages/batches/{id}` (retrieve),
 * `POST …/{id}/cancel`, `DELETE …/{id}` and `GET …/{id}/results` (the JSONL of
 * batch-results.ts), each answered as the real API answers it, per API key.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AttemptCounter } from './attempts.js';
import { answerBatchRequest, type BatchAnswerContext } from './batch-answers.js';
import { checkBatchCreateBody, MAX_BATCH_BYTES } from './batch-create-body.js';
import { resultLines, sendResultLines } from './batch-results.js';
import { fnv1a, seededRandom } from './hash.js';
import { pageOf } from './list-page.js';
import {
  parseNumber,
  type ResolvedOptions,
  type Rule,
  ScriptedModelOptionError,
} from './load-model.js';
import { BatchStore, type BatchTiming, batchJson, StoredBatch } from './message-batches.js';
import type { PromptCache } from './prompt-cache.js';
import {
  answerFailure,
  apiKeyOf,
  type BatchAction,
  header,
  parseBody,
  readBody,
} from './requests.js';
import { sendError } from './response-player.js';
import type { ScriptedModelStats } from './server-types.js';

/** What the batch routes share with the rest of the server. */
export interface BatchServerParts {
  options: ResolvedOptions;
  /** The server clock, in ms. */
  now: () => number;
  /** The prompt cache, or undefined with `cache: false`. */
  cache: PromptCache | undefined;
  attempts: AttemptCounter;
  /** The server's counters: the routes count creates, retrieves and downloads. */
  stats: ScriptedModelStats;
  /** The server's base URL, for a `results_url` when a request names no host. */
  baseUrl: () => string;
}

/** A batch's own settings: the server's, or what the create's `x-cohort-batch-*` headers say. */
interface BatchLoad {
  latencyMs: number;
  errorProbability: number;
  expireProbability: number;
}

/** Answers the Message Batches routes from one store of batches. */
export class BatchRoutes {
  readonly #parts: BatchServerParts;
  readonly #store = new BatchStore();
  /** The wall time at the clock's origin: RFC 3339 dates follow the server clock. */
  readonly #wallOffset: number;

  constructor(parts: BatchServerParts) {
    this.#parts = parts;
    this.#wallOffset = Date.now() - parts.now();
  }

  /** Answers one request to a batch route. */
  answer(
    request: IncomingMessage,
    response: ServerResponse,
    requestId: string,
    route: { action: BatchAction; id?: string },
    query: URLSearchParams,
  ): void {
    const key = apiKeyOf(request.headers);
    if (route.action === 'create') {
      this.#create(request, response, requestId, key);
      return;
    }
    request.resume();
    const reply = new Reply(response, requestId);
    if (route.action === 'list') {
      this.#list(reply, key, request.headers, query);
      return;
    }
    const id = route.id!;
    const batch = this.#store.find(key, id);
    if (batch === undefined) {
      reply.error(
        404,
        'not_found_error',
        `Expected the id of a Message Batch of this API key, got \`${id}\` (never created, deleted, or another key's)`,
      );
      return;
    }
    const now = this.#parts.now();
    const status = batch.status(now);
    switch (route.action) {
      case 'retrieve':
        this.#parts.stats.batchRetrieves++;
        reply.json(this.#json(batch, now, request.headers));
        return;
      case 'cancel':
        if (status === 'ended') {
          reply.invalid(
            `Expected a Message Batch still processing, got \`${id}\`, which has ended`,
          );
          return;
        }
        batch.cancel(now);
        reply.json(this.#json(batch, now, request.headers));
        return;
      case 'delete':
        if (status !== 'ended') {
          reply.invalid(
            `Expected a Message Batch whose processing has ended (cancel it first, then wait for it to end), got \`${id}\`, which is ${status}`,
          );
          return;
        }
        this.#store.delete(key, id);
        reply.json({ id, type: 'message_batch_deleted' });
        return;
      case 'results': {
        const types = batch.resultTypes(now);
        if (types === undefined) {
          reply.invalid(
            `Expected a Message Batch whose processing has ended, got \`${id}\`, which is ${status}: its results are ready once it ends`,
          );
          return;
        }
        this.#parts.stats.batchResultDownloads++;
        sendResultLines(response, requestId, resultLines(batch, types, this.#parts.options.seed));
        return;
      }
    }
  }

  #create(
    request: IncomingMessage,
    response: ServerResponse,
    requestId: string,
    key: string,
  ): void {
    const reply = new Reply(response, requestId);
    let load: BatchLoad;
    try {
      load = batchLoad(request.headers, this.#parts.options);
    } catch (error) {
      if (!(error instanceof ScriptedModelOptionError)) throw error;
      request.resume();
      reply.invalid(error.message);
      return;
    }
    const created = (body: string): void => {
      const parsed = parseBody(body);
      const checked = parsed.ok ? checkBatchCreateBody(parsed.value) : parsed;
      if (!checked.ok) {
        reply.invalid(checked.message);
        return;
      }
      const { seed, batchQueueSize } = this.#parts.options;
      const now = this.#parts.now();
      if (batchQueueSize > 0) {
        // The key's processing queue: the requests of its batches still in progress.
        const open = this.#store.list(key).filter((batch) => batch.status(now) !== 'ended');
        const queued = open.reduce((sum, batch) => sum + batch.entries.length, 0);
        if (queued + checked.value.length > batchQueueSize) {
          this.#parts.stats.batchCreatesRefused++;
          const firstEnd = Math.min(...open.map((batch) => batch.endsAt), now + 1000);
          const seconds = Math.max(1, Math.ceil((firstEnd - now) / 1000));
          reply.error(
            429,
            'rate_limit_error',
            `Number of batch requests in processing queue (${queued}) plus this batch's ${checked.value.length} exceeds the limit of ${batchQueueSize}`,
            { 'retry-after': String(seconds) },
          );
          return;
        }
      }
      const context: BatchAnswerContext = {
        key,
        seed,
        errorProbability: load.errorProbability,
        cache: this.#parts.cache,
        attempts: this.#parts.attempts,
        now,
      };
      const id = this.#store.newId();
      const suffix = id.slice(id.lastIndexOf('_') + 1);
      const entries = checked.value.map(({ customId, params }, index) => {
        const ids = {
          messageId: `msg_cohort_${suffix}_${index.toString(36)}`,
          requestId: `req_cohort_${suffix}_${index.toString(36)}`,
        };
        return { customId, answer: answerBatchRequest(params, ids, context) };
      });
      const expiring =
        load.expireProbability > 0 &&
        seededRandom(fnv1a(`${seed}\u0000batch-expire\u0000${body}`))() < load.expireProbability;
      const timing: BatchTiming = { latencyMs: load.latencyMs, expiring };
      const batch = new StoredBatch(id, entries, now, timing);
      this.#store.add(key, batch);
      this.#parts.stats.batchesCreated++;
      this.#parts.stats.batchRequests += entries.length;
      reply.json(this.#json(batch, now, request.headers));
    };
    readBody(
      request,
      response,
      requestId,
      (body) => {
        try {
          created(body);
        } catch (error) {
          // No request may take the server down, a batch of a hundred thousand least of all.
          answerFailure(response, requestId, error);
        }
      },
      MAX_BATCH_BYTES,
    );
  }

  #list(reply: Reply, key: string, headers: IncomingHttpHeaders, query: URLSearchParams): void {
    const listed = pageOf(
      this.#store.list(key),
      query,
      (batch) => batch.id,
      'a Message Batch id of this listing',
    );
    if (!listed.ok) {
      reply.invalid(listed.message);
      return;
    }
    const now = this.#parts.now();
    const { page } = listed;
    reply.json({ ...page, data: page.data.map((batch) => this.#json(batch, now, headers)) });
  }

  #json(batch: StoredBatch, now: number, headers: IncomingHttpHeaders) {
    // The results are where the client reached this server, as the real API gives its own host.
    const host = header(headers, 'host');
    const base = host === undefined || host === '' ? this.#parts.baseUrl() : `http://${host}`;
    const dateOf = (time: number): string => new Date(this.#wallOffset + time).toISOString();
    return batchJson(batch, now, dateOf, `${base}/v1/messages/batches/${batch.id}/results`);
  }
}

/** Reads the `x-cohort-batch-*` headers of a create over the server options. */
function batchLoad(headers: IncomingHttpHeaders, options: ResolvedOptions): BatchLoad {
  const read = (name: string, rule: Rule, fallback: number): number => {
    const text = header(headers, name);
    return text === undefined ? fallback : parseNumber(`header \`${name}\``, text, rule);
  };
  return {
    latencyMs: read('x-cohort-batch-latency-ms', 'non-negative', options.batchLatencyMs),
    errorProbability: read('x-cohort-batch-error', 'fraction', options.batchErrorProbability),
    expireProbability: read('x-cohort-batch-expire', 'fraction', options.batchExpireProbability),
  };
}

/** The JSON and error answers of one request. */
class Reply {
  readonly #response: ServerResponse;
  readonly #requestId: string;

  constructor(response: ServerResponse, requestId: string) {
    this.#response = response;
    this.#requestId = requestId;
  }

  json(body: unknown): void {
    this.#response.writeHead(200, {
      'content-type': 'application/json',
      'request-id': this.#requestId,
    });
    this.#response.end(JSON.stringify(body));
  }

  error(status: number, type: string, message: string, headers?: Record<string, string>): void {
    sendError(this.#response, {
      status,
      type,
      message,
      requestId: this.#requestId,
      ...(headers ? { headers } : {}),
    });
  }

  invalid(message: string): void {
    this.error(400, 'invalid_request_error', message);
  }
}
