import type { ProviderErrorCode } from './types.js';

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
  if (!headers) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value) && value >= 0) return value;
  }
  const after = headers.get('retry-after');
  if (after !== null && after.trim() !== '') {
    const seconds = Number(after);
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    const date = Date.parse(after);
    if (Number.isFinite(date)) return Math.max(0, date - Date.now());
  }
  return undefined;
}
