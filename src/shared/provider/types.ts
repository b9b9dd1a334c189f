import type Anthropic from '@anthropic-ai/sdk';
import type { Gate } from '../governor/types.js';
import type { TraceSink } from '../trace/types.js';
import type { CacheSettings } from './cache.js';

export type MessageParam = Anthropic.MessageParam;
export type ContentBlockParam = Anthropic.ContentBlockParam;
export type ToolParam = Anthropic.Tool;
export type ToolUseBlock = Anthropic.ToolUseBlockParam;
export type ToolResultBlock = Anthropic.ToolResultBlockParam;

/**
 * Stable codes for every way a provider request can fail (docs/ARCHITECTURE.md, "Provider
 * failures", says what each means and whether it is retried).
 */
export type ProviderErrorCode =
  | 'rate_limited'
  /** The provider said retrying is pointless: a spend limit, or a 429 with `x-should-retry: false`. */
  | 'quota_exhausted'
  | 'overloaded'
  | 'server_error'
  | 'connection'
  | 'stalled'
  | 'bad_response'
  | 'bad_request'
  | 'auth'
  /** A Message Batch ended before it processed the request (24 hours, or the provider's word). */
  | 'batch_expired'
  /** The Message Batch holding the request was cancelled by someone else than this engine. */
  | 'batch_canceled'
  | 'aborted';

export interface ProviderError {
  code: ProviderErrorCode;
  /** For people: what happened, the request URL (without credentials) and the cause. Redacted. */
  message: string;
  /** The HTTP status, when the server answered with one. */
  status?: number;
  /** The server's `request-id` header, when it sent one: what its support asks for. */
  requestId?: string;
  /**
   * The governor's circuit breaker for this key stands behind the failure (`connection` or
   * `auth`): it refused the attempt without sending it, or this attempt's refused key opened it.
   * Every request of the key fails at once until a probe finds the provider back.
   */
  breakerOpen?: true;
}

/** What the retry loop reports before it waits to try again: plain data, for events and logs. */
export interface RetryInfo {
  /** The attempt about to be made, counted from 1: 2 at the first retry. */
  attempt: number;
  /** How many attempts there will be at most: the config's `maxRetries` + 1. */
  maxAttempts: number;
  /** How long the loop waits before that attempt, in ms. */
  waitMs: number;
  /** Why the last attempt failed. */
  error: ProviderError;
  /**
   * The rate-limit governor paces this retry: it waits in the governor's queue rather than a
   * backoff of its own, and does not count against `maxAttempts`.
   */
  paced?: boolean;
}

/** One request: what the agent loop asks of the provider. */
export interface ProviderRequest {
  system?: string;
  messages: MessageParam[];
  tools: ToolParam[];
  /** Overrides the config's model for this request. */
  model?: string;
  /** Prompt-cache breakpoints (cache.ts); unset sends none. */
  cache?: CacheSettings;
}

/**
 * What one response reported. `inputTokens` is the API's `input_tokens`: the input that was
 * neither read from nor written to the prompt cache. The request's whole input is
 * `inputTokens + cacheReadTokens + cacheWriteTokens`.
 */
export interface ProviderUsage {
  inputTokens: number;
  outputTokens: number;
  /** `cache_read_input_tokens`: input read back from the prompt cache (0.1× the input price). */
  cacheReadTokens: number;
  /** `cache_creation_input_tokens`: input written to the prompt cache (1.25×, or 2× for 1 h). */
  cacheWriteTokens: number;
  /** Of `cacheWriteTokens`, those written with the one-hour lifetime; absent when none. */
  cacheWrite1hTokens?: number;
}

/** Adds `more` into `into`. */
export function addUsage(into: ProviderUsage, more: ProviderUsage): void {
  into.inputTokens += more.inputTokens;
  into.outputTokens += more.outputTokens;
  into.cacheReadTokens += more.cacheReadTokens;
  into.cacheWriteTokens += more.cacheWriteTokens;
  if (more.cacheWrite1hTokens) {
    into.cacheWrite1hTokens = (into.cacheWrite1hTokens ?? 0) + more.cacheWrite1hTokens;
  }
}

/** A usage with every count 0. */
export function noUsage(): ProviderUsage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
}

/** A tool call as the model made it. `inputError` is set when its JSON did not parse. */
export interface ToolCall {
  id: string;
  name: string;
  input: unknown;
  inputError?: string;
}

export interface AssistantTurn {
  /** The assistant message exactly as it goes back into the transcript. */
  message: { role: 'assistant'; content: ContentBlockParam[] };
  text: string;
  calls: ToolCall[];
  stopReason: string | null;
  usage: ProviderUsage;
}

/** The outcome of one `complete` call, retries included. Failures are values, never throws. */
/** A model call's outcome; `batched` when a Message Batch answered it (batch prices apply). */
export type ProviderResult =
  | { ok: true; turn: AssistantTurn; calls: number; batched?: true }
  | { ok: false; error: ProviderError; calls: number; usage: ProviderUsage; batched?: true };

/**
 * What the agent loop asks its model calls of: a `Provider` (the realtime lane), or a batches
 * lane's client, which hands each request to main's batch collector. The loop does not know which.
 */
export interface ModelClient {
  complete(request: ProviderRequest, options: CompleteOptions): Promise<ProviderResult>;
}

export interface CompleteOptions {
  signal: AbortSignal;
  /** The agent's step this request is, counted from 1: a batch request's id names it. */
  step?: number;
  /** The rate-limit governor each attempt asks first; none means every attempt goes at once. */
  gate?: Gate | undefined;
  /** A later step of a running agent: the governor lets it go before new agents. */
  priority?: boolean;
  /**
   * How long one request may keep being refused (429/529) before it fails, in ms: the spawn's
   * `patienceMs`, else the governor's.
   */
  patienceMs?: number | undefined;
  /** Called with each text delta as it streams. */
  onTextDelta?: (text: string) => void;
  /** Called before each retry wait, for events and logs. */
  onRetry?: (info: RetryInfo) => void;
  /** Where each attempt's `chat {model}` span goes, when the agent is traced. */
  trace?: TraceSink;
}
