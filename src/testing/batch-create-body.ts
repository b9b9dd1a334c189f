/**
 * The body of `POST /v1/messages/batches`, `{"requests": [{"custom_id", "params"}, ...]}`,
 * checked as the real API checks it when a batch is created: the list, each `custom_id`
 * and that `params` is an object. What `params` holds is checked later, request by request,
 * and a bad one comes back `errored` in the results (batch-answers.ts), as the real API
 * documents: it validates `params` asynchronously.
 */
import { isRecord } from './is-record.js';
import {
  checkKeys,
  fail,
  failExtra,
  RequestProblem,
  type Validation,
  validation,
} from './request-problem.js';

/** The most requests one batch may hold, as the real API allows. */
export const MAX_BATCH_REQUESTS = 100_000;

/** The largest body of a batch, 256 MB, as the real API allows. */
export const MAX_BATCH_BYTES = 256 * 1024 * 1024;

/** 1 to 64 letters, digits, `_` and `-`: the real API's pattern of a `custom_id`. */
const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;

const BODY_KEYS = new Set(['requests']);
const REQUEST_KEYS = new Set(['custom_id', 'params']);

/** One request of a batch, as sent: its id, and the Messages API body it stands for. */
export interface BatchRequest {
  customId: string;
  params: Record<string, unknown>;
}

/** Checks a parsed create body; a failure names the path, what was expected and what arrived. */
export function checkBatchCreateBody(body: unknown): Validation<BatchRequest[]> {
  return validation(() => checkBody(body));
}

function checkBody(body: unknown): BatchRequest[] {
  if (!isRecord(body)) fail('the request body', 'a JSON object', body);
  for (const key in body) if (!BODY_KEYS.has(key)) failExtra(key);
  const { requests } = body;
  if (!Array.isArray(requests) || requests.length === 0) {
    fail(
      'requests',
      `a non-empty array (a batch holds 1 to ${MAX_BATCH_REQUESTS} requests)`,
      requests,
    );
  }
  if (requests.length > MAX_BATCH_REQUESTS) {
    // Named by its length: the array itself is too big to show.
    throw new RequestProblem(
      `Expected \`requests\` to hold at most ${MAX_BATCH_REQUESTS} requests, got ${requests.length}`,
    );
  }
  const firstIndex = new Map<string, number>();
  return requests.map((request: unknown, index): BatchRequest => {
    const path = `requests.${index}`;
    if (!isRecord(request)) fail(path, 'an object {"custom_id", "params"}', request);
    checkKeys(request, REQUEST_KEYS, path);
    const { custom_id: customId, params } = request;
    if (typeof customId !== 'string' || !CUSTOM_ID.test(customId)) {
      fail(`${path}.custom_id`, '1 to 64 letters, digits, `_` or `-`', customId);
    }
    const earlier = firstIndex.get(customId);
    if (earlier !== undefined) {
      fail(
        `${path}.custom_id`,
        `unique within the batch (\`requests.${earlier}.custom_id\` has it too)`,
        customId,
      );
    }
    firstIndex.set(customId, index);
    if (!isRecord(params)) fail(`${path}.params`, 'an object: a Messages API request', params);
    return { customId, params };
  });
}
