/**
 * Counts the HTTP attempts of the engines built on other libraries (ai-sdk, langchain), their
 * own retries included, into each agent's `usage.providerCalls`, as sdk-loop's middleware does
 * for the official SDK. Each library takes a `fetch` of the user's (the documented way to watch
 * its requests) and sends a call's own headers with every attempt of that call, retries
 * included: so one `fetch` wrapper shared by every agent finds the agent by a header, and the
 * libraries keep one shared client each, as a user would write them.
 */
import type { AgentEvent } from '../../src/shared/events.js';
import type { FailureCode } from '../../src/shared/failure.js';
import type { ProviderErrorCode } from '../../src/shared/provider/types.js';
import type { AgentUsage } from '../../src/shared/result.js';

/** The request header that names the agent a request belongs to. */
export const AGENT_HEADER = 'x-bench-agent';

interface Entry {
  agentId: string;
  usage: AgentUsage;
  maxAttempts: number;
  onEvent: ((event: AgentEvent) => void) | undefined;
  /** The last attempt's refusal, reported as a retry only once the next attempt starts. */
  refused: { code: ProviderErrorCode; status: number } | undefined;
}

export class AttemptLedger {
  readonly #entries = new Map<string, Entry>();

  /**
   * A `fetch` to give the library: the global one, counting each attempt into the agent its
   * header names. A 429 or 529 becomes a `provider-retry` event only when another attempt
   * follows, as cohort's loop reports it: the last attempt's refusal is the agent's failure.
   */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const agentId = headerOf(init?.headers, AGENT_HEADER);
    const entry = agentId === undefined ? undefined : this.#entries.get(agentId);
    if (entry !== undefined) {
      entry.usage.providerCalls++;
      const { refused } = entry;
      if (refused !== undefined && entry.onEvent !== undefined) {
        entry.onEvent({
          type: 'provider-retry',
          agentId: entry.agentId,
          attempt: entry.usage.providerCalls,
          maxAttempts: entry.maxAttempts,
          waitMs: 0,
          ...refused,
          message: `HTTP ${refused.status}`,
        });
      }
      entry.refused = undefined;
    }
    const response = await fetch(input, init);
    if (entry !== undefined) {
      if (response.status === 429) entry.refused = { code: 'rate_limited', status: 429 };
      if (response.status === 529) entry.refused = { code: 'overloaded', status: 529 };
    }
    return response;
  };

  /** Starts counting for one agent; returns the headers its every call must carry. */
  open(
    agentId: string,
    options: {
      usage: AgentUsage;
      maxAttempts: number;
      onEvent: ((event: AgentEvent) => void) | undefined;
    },
  ): Record<string, string> {
    this.#entries.set(agentId, { agentId, ...options, refused: undefined });
    return { [AGENT_HEADER]: agentId };
  }

  close(agentId: string): void {
    this.#entries.delete(agentId);
  }
}

function headerOf(headers: RequestInit['headers'], name: string): string | undefined {
  if (headers === undefined) return undefined;
  if (headers instanceof Headers) return headers.get(name) ?? undefined;
  if (Array.isArray(headers)) return headers.find(([key]) => key?.toLowerCase() === name)?.[1];
  const value = (headers as Record<string, string | readonly string[] | undefined>)[name];
  return typeof value === 'string' ? value : value?.[0];
}

/**
 * A failed call of another library, as a failure code and a reason: the HTTP status it carries
 * (the AI SDK's `statusCode`, on the error or its `lastError` after retries; the Anthropic SDK's
 * `status`, under LangChain), else a connection failure.
 */
export function failureOf(error: unknown): { code: FailureCode; reason: string } {
  const status = statusOf(error);
  const code = codeOfStatus(status);
  const message = error instanceof Error ? error.message : String(error);
  return { code, reason: `provider ${code}: ${message.split('\n')[0]?.slice(0, 200) ?? ''}` };
}

function statusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const record = error as { status?: unknown; statusCode?: unknown; lastError?: unknown };
  if (typeof record.statusCode === 'number') return record.statusCode;
  if (typeof record.status === 'number') return record.status;
  return record.lastError === undefined ? undefined : statusOf(record.lastError);
}

function codeOfStatus(status: number | undefined): FailureCode {
  if (status === undefined) return 'connection';
  if (status === 429) return 'rate_limited';
  if (status === 529) return 'overloaded';
  if (status === 401 || status === 403) return 'auth';
  if (status >= 500) return 'server_error';
  return 'bad_request';
}
