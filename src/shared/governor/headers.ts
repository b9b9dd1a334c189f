import { retryAfterFrom } from '../provider/retry.js';

/** Reading the provider's rate-limit headers into numbers. */

/** One limit as a response reported it. */
export interface LimitReport {
  limit: number;
  remaining: number;
  /** Epoch ms at which the bucket is full again, when the header was readable. */
  resetAt?: number;
}

export interface RateLimitReport {
  requests?: LimitReport;
  inputTokens?: LimitReport;
  outputTokens?: LimitReport;
}

const PREFIX = 'anthropic-ratelimit-';

/** Only these headers cross from a worker to the governor: everything else stays behind. */
export function pickRateLimitHeaders(headers: Headers | undefined): Record<string, string> {
  const picked: Record<string, string> = {};
  if (!headers) return picked;
  headers.forEach((value, name) => {
    if (name.startsWith(PREFIX) || name === 'retry-after' || name === 'retry-after-ms') {
      picked[name] = value;
    }
  });
  return picked;
}

export function readRateLimits(headers: Record<string, string>): RateLimitReport {
  const report: RateLimitReport = {};
  const requests = readLimit(headers, 'requests');
  const input = readLimit(headers, 'input-tokens');
  const output = readLimit(headers, 'output-tokens');
  if (requests) report.requests = requests;
  if (input) report.inputTokens = input;
  if (output) report.outputTokens = output;
  return report;
}

function readLimit(headers: Record<string, string>, name: string): LimitReport | undefined {
  const limit = Number(headers[`${PREFIX}${name}-limit`]);
  const remaining = Number(headers[`${PREFIX}${name}-remaining`]);
  // A limit of 0 or a garbled value says nothing usable: ignore it rather than stop the key.
  if (!Number.isFinite(limit) || limit <= 0 || !Number.isFinite(remaining) || remaining < 0) {
    return undefined;
  }
  const resetText = headers[`${PREFIX}${name}-reset`];
  const resetAt = resetText === undefined ? Number.NaN : Date.parse(resetText);
  return Number.isFinite(resetAt) ? { limit, remaining, resetAt } : { limit, remaining };
}

/** `retry-after-ms`, else `retry-after`, in ms from now, from the headers a settle carried. */
export function retryAfterMsOf(headers: Record<string, string> | undefined): number | undefined {
  return headers ? retryAfterFrom((name) => headers[name]) : undefined;
}
