import { errorTypeCode, excerpt } from '../../shared/provider/classify.js';
import { turnFromMessage } from '../../shared/provider/message-turn.js';
import { isRetryable } from '../../shared/provider/retry.js';
import {
  noUsage,
  type ProviderError,
  type ProviderErrorCode,
  type ProviderResult,
} from '../../shared/provider/types.js';
import { BatchApiError } from './batch-api.js';

/** A results line: `{custom_id, result}`. */
export interface ResultLine {
  custom_id?: unknown;
  result?: {
    type?: unknown;
    message?: unknown;
    error?: { error?: { type?: unknown; message?: unknown } };
  };
}

/** What a step gets of its results line: its answer, or another try through the next batch. */
export type ResultOutcome =
  | { answer: ProviderResult }
  | { retry: string; code?: ProviderErrorCode };

/**
 * A results line's `result` as what its step gets (docs/LANES.md): a `succeeded` message as the
 * step's turn; an `errored` one worth a retry (by its error type's code) another try, any other
 * a failure with that code; `expired` and `canceled` their own failures; anything else another
 * try. `calls` is the batches the step went into. Throws for a message it cannot make a turn of.
 */
export function resultOutcome(
  result: ResultLine['result'],
  batchId: string,
  calls: number,
): ResultOutcome {
  const type = result?.type;
  if (type === 'succeeded') {
    const turn = turnFromMessage(result?.message);
    if (turn) return { answer: { ok: true, turn, calls, batched: true } };
    return { retry: `Message Batch ${batchId} answered a result that is not a message` };
  }
  if (type === 'errored') {
    const error = result?.error?.error;
    const code = errorTypeCode(error?.type);
    const message = `Message Batch ${batchId}: ${typeof error?.message === 'string' ? excerpt(error.message) : 'errored'}`;
    return isRetryable(code)
      ? { retry: message, code }
      : { answer: failed({ code, message }, calls) };
  }
  if (type === 'expired') {
    const message = `Message Batch ${batchId} expired before it processed this step`;
    return { answer: failed({ code: 'batch_expired', message }, calls) };
  }
  if (type === 'canceled') {
    const message = `Message Batch ${batchId} was cancelled before it processed this step`;
    return { answer: failed({ code: 'batch_canceled', message }, calls) };
  }
  return {
    retry: `Message Batch ${batchId} answered a result of type ${excerpt(String(type), 40)}`,
  };
}

/** A create or poll that failed past its retries, as the step's provider error. */
export function createFailure(
  error: unknown,
  attempts: number,
): Extract<ProviderResult, { ok: false }> {
  const found: ProviderError =
    error instanceof BatchApiError
      ? error.failure.error
      : { code: 'server_error', message: excerpt(messageOf(error)) };
  const message = attempts > 1 ? `${found.message} (after ${attempts} attempts)` : found.message;
  return failed({ ...found, message }, attempts);
}

export function failed(
  error: ProviderError,
  calls: number,
): Extract<ProviderResult, { ok: false }> {
  return { ok: false, error, calls, usage: noUsage() };
}

export function aborted(reason: string): ProviderResult {
  return failed({ code: 'aborted', message: `aborted: ${reason}` }, 0);
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
