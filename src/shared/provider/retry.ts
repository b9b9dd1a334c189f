import type { AttemptFailure } from './classify.js';
import type { ProviderErrorCode } from './types.js';

/**
 * Codes worth another attempt: the server's load, its faults, the network. `bad_response` is
 * here for a garbled chunk in a stream that began well, which may not recur; a 200 from
 * something that is not the Messages API is `bad_response` too, but marked final where it is
 * found (provider.ts), since that URL will answer the same way every time. Never retried:
 * `bad_request` and `auth` (the same request gets the same answer) and `aborted`.
 */
const RETRYABLE: ReadonlySet<ProviderErrorCode> = new Set([
  'rate_limited',
  'overloaded',
  'server_error',
  'connection',
  'stalled',
  'bad_response',
]);

export function isRetryable(code: ProviderErrorCode): boolean {
  return RETRYABLE.has(code);
}

/** Whether a failed attempt is worth another: a retryable code that nothing marked final. */
export function shouldRetry(failure: AttemptFailure): boolean {
  return failure.final !== true && isRetryable(failure.error.code);
}

export interface BackoffInput {
  /** 0 for the wait after the first attempt. */
  retry: number;
  baseMs: number;
  maxMs: number;
  /** Response headers of the failed attempt, when it had any. */
  headers?: Headers | undefined;
  /** Source of randomness in [0, 1); injectable for tests. */
  random?: () => number;
}

/**
 * How long to wait before the next attempt: `retry-after-ms`, then `retry-after` (seconds or an
 * HTTP date), else exponential backoff with full jitter. Always within [0, maxMs].
 */
export function backoffMs(input: BackoffInput): number {
  const fromHeaders = retryAfterMs(input.headers);
  if (fromHeaders !== undefined) return Math.min(Math.max(0, fromHeaders), input.maxMs);
  const ceiling = Math.min(input.maxMs, input.baseMs * 2 ** input.retry);
  const random = input.random ?? Math.random;
  // Full jitter, but never below half the step, so retries of many agents spread out without
  // collapsing to zero.
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

export function retryAfterMs(headers: Headers | undefined): number | undefined {
  return headers ? retryAfterFrom((name) => headers.get(name)) : undefined;
}

/**
 * `retry-after-ms`, else `retry-after` (seconds or an HTTP date), in ms from now, from a header
 * lookup: the response's `Headers`, or the plain record that crossed to the governor.
 */
export function retryAfterFrom(
  get: (name: string) => string | null | undefined,
): number | undefined {
  const ms = get('retry-after-ms');
  if (ms !== null && ms !== undefined && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value) && value >= 0) return value;
  }
  const after = get('retry-after');
  if (after !== null && after !== undefined && after.trim() !== '') {
    const seconds = Number(after);
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    const date = Date.parse(after);
    if (Number.isFinite(date)) return Math.max(0, date - Date.now());
  }
  return undefined;
}
