/**
 * Answers one request of a Message Batch as `POST /v1/messages` would answer its `params`
 * without streaming: the same checks, the same script step or default policy, the same
 * usage and prompt cache. What would be an error response comes back `errored`, with the
 * error body the real-time request would have got, and so does a share of the rest when
 * the batch's error probability says so.
 */

import { describeValue } from '../shared/errors.js';
import type { AttemptCounter } from './attempts.js';
import { fnv1a, seededRandom } from './hash.js';
import { type ErrorDetails, errorBody } from './messages-api.js';
import { inputTokens, type MessagePlan, planResponse } from './plan.js';
import { type PromptCache, uncachedUsage } from './prompt-cache.js';
import { validateRequest } from './request-validation.js';
import { messageJson } from './sse-events.js';

/** The outcome of one request, and the JSON of its `result` in the results file. */
export interface BatchAnswer {
  outcome: 'succeeded' | 'errored';
  /** `{"type":"succeeded","message":…}` or `{"type":"errored","error":…}`. */
  result: string;
}

/** What answering a request of a batch needs from the server and the batch. */
export interface BatchAnswerContext {
  /** The API key of the batch: its prompt cache and its attempt counts. */
  key: string;
  seed: number;
  /** 0..1: the chance that a request that would succeed comes back errored. */
  errorProbability: number;
  /** The prompt cache, or undefined with `cache: false`. */
  cache: PromptCache | undefined;
  attempts: AttemptCounter;
  /** The server clock now, for the prompt cache. */
  now: number;
}

/** The ids one request of a batch answers with. */
export interface BatchRequestIds {
  /** `msg_cohort_…`, the id of its message if it succeeds. */
  messageId: string;
  /** `req_cohort_…`, the `request_id` of its error if it errors. */
  requestId: string;
}

/** Answers the `params` of one request of a batch; never throws for a bad request. */
export function answerBatchRequest(
  params: Record<string, unknown>,
  ids: BatchRequestIds,
  context: BatchAnswerContext,
): BatchAnswer {
  const errored = (type: string, message: string, details?: ErrorDetails): BatchAnswer => ({
    outcome: 'errored',
    result: `{"type":"errored","error":${errorBody(type, message, ids.requestId, details)}}`,
  });
  const { cache, attempts, key } = context;
  const checked = validateRequest(params, cache === undefined ? {} : { cache: 'hash' });
  if (!checked.ok) return errored('invalid_request_error', checked.message);
  const request = checked.value;
  // The real API answers a batch's requests whole, in the results: none of them streams.
  if (request.stream) {
    return errored(
      'invalid_request_error',
      `stream: a request in a Message Batch cannot stream; its message comes back whole in the batch's results. Expected \`stream\` to be false or absent, got ${describeValue(params.stream)}`,
    );
  }
  if (request.thread !== undefined) {
    return errored(
      'invalid_request_error',
      `thread: the message-threads beta is not served inside a Message Batch. Expected \`thread\` to be absent, got ${describeValue(params.thread, 80)}`,
    );
  }
  const body = JSON.stringify(params);
  const counted = attempts.counted(key, body);
  const total = inputTokens(request);
  const cached = cache?.lookup(key, request, total, context.now);
  const plan = planResponse(request, counted.attempt, cached?.usage ?? uncachedUsage(total));
  if (plan.kind === 'error') return errored(plan.type, plan.message, plan.details);
  const fault = faultOf(plan);
  if (fault !== undefined) return errored(fault.type, fault.message, fault.details);
  if (context.errorProbability > 0) {
    const random = seededRandom(fnv1a(`${context.seed}\u0000${counted.attempt}\u0000${body}`));
    if (random() < context.errorProbability) {
      return errored(
        'api_error',
        'Internal server error (x-cohort-batch-error / batchErrorProbability)',
      );
    }
  }
  // As a real-time 200 would: its cache writes become readable, and its next sending is
  // a new conversation.
  if (cached !== undefined) cache?.commit(cached, context.now);
  attempts.settle(counted);
  const identity = {
    messageId: ids.messageId,
    model: request.model,
    serviceTier: 'batch' as const,
  };
  return {
    outcome: 'succeeded',
    result: `{"type":"succeeded","message":${messageJson(plan, identity)}}`,
  };
}

/**
 * A script step's fault, as a batch has it: a mid-stream error is the request's error; a
 * disconnect or a malformed body, which break a connection a batch request does not have,
 * are an `api_error`. A stall only delays, and a batch request has no time of its own.
 */
function faultOf(
  plan: MessagePlan,
): { type: string; message: string; details?: ErrorDetails } | undefined {
  const { faults } = plan;
  if (faults.error !== undefined) return faults.error;
  const broken = faults.disconnect ? 'disconnect' : faults.malformed ? 'malformed' : undefined;
  if (broken === undefined) return undefined;
  return {
    type: 'api_error',
    message: `Internal server error (the script's \`${broken}\` fault, which errors a request of a Message Batch)`,
  };
}
