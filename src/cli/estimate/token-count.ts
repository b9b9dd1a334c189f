import type Anthropic from '@anthropic-ai/sdk';
import { APIError } from '@anthropic-ai/sdk/error';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { resolveBaseURL, resolveCredential } from '../../shared/provider/transport/endpoint.js';
import { redactSecrets } from '../../shared/redact.js';
import type { TaskRequest } from './first-request.js';

/** count_tokens requests in flight at once: enough to count thousands of tasks in seconds. */
export const COUNT_CONCURRENCY = 8;

/** How the input tokens were counted. */
export type CountMethod = 'count_tokens' | 'local';

export interface TokenCounts {
  /** Each request's input tokens, in the order of the requests. */
  tokens: number[];
  method: CountMethod;
  /** Why count_tokens was not used, when it was not: the provider's answer, redacted. */
  fallback?: string;
}

/**
 * Each request's input tokens, counted by the provider's `POST /v1/messages/count_tokens` (the
 * official SDK's `messages.countTokens`), at most `concurrency` at once, with the SDK's own
 * retries of 429s, 5xx and dropped connections. count_tokens sends no message and costs nothing.
 *
 * If one count fails for good (a server without the endpoint answers 404), the rest are not
 * asked: every request is then estimated locally, as the client estimates it for the governor
 * (the characters of its JSON / 4), and `fallback` says why, so one run never mixes the two.
 */
export async function countInputTokens(
  requests: readonly TaskRequest[],
  config: ProviderConfig,
  concurrency = COUNT_CONCURRENCY,
): Promise<TokenCounts> {
  const local = (fallback: string): TokenCounts => ({
    tokens: requests.map((request) => request.localTokens),
    method: 'local',
    fallback,
  });
  // The SDK's client is imported here, not with the module: batch loads this file for every run.
  const { default: Client } = await import('@anthropic-ai/sdk');
  const client = new Client({
    apiKey: resolveCredential(),
    baseURL: resolveBaseURL(config),
    maxRetries: 2,
    timeout: config.requestTimeoutMs,
    logLevel: 'off',
    ...(config.headers ? { defaultHeaders: config.headers } : {}),
  });
  const tokens: number[] = new Array(requests.length).fill(0);
  let next = 0;
  let failure: string | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < requests.length) {
      const index = next++;
      const request = requests[index] as TaskRequest;
      try {
        const counted = await client.messages.countTokens(
          request.body as Anthropic.MessageCountTokensParams,
        );
        tokens[index] = counted.input_tokens;
      } catch (error) {
        failure ??= failureText(error);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, requests.length) }, () => worker()));
  return failure === undefined ? { tokens, method: 'count_tokens' } : local(failure);
}

/** The provider's answer in a few words: its status and message, or the connection's error. */
function failureText(error: unknown): string {
  return redactSecrets(rawFailureText(error));
}

function rawFailureText(error: unknown): string {
  if (error instanceof APIError && error.status !== undefined) {
    const body = error.error as { error?: { message?: unknown } } | undefined;
    const message = typeof body?.error?.message === 'string' ? body.error.message : error.message;
    return `${error.status}: ${message.slice(0, 200)}`;
  }
  return error instanceof Error ? error.message.slice(0, 200) : String(error);
}
