import type { ProviderErrorCode, ProviderUsage } from './provider/types.js';
import type { AgentResult } from './result.js';

/**
 * Live events of an agent, named noun-verb. They carry the agent's id so a session's stream can
 * interleave many agents. Only plain data: they cross threads as they are.
 */
export type AgentEvent =
  | { type: 'agent-start'; agentId: string; title: string; depth: number; mode: AgentMode }
  | { type: 'step-start'; agentId: string; step: number }
  | { type: 'text-delta'; agentId: string; text: string }
  | { type: 'tool-call'; agentId: string; callId: string; name: string; input: unknown }
  | { type: 'tool-result'; agentId: string; callId: string; name: string; isError: boolean }
  | ({ type: 'provider-retry'; agentId: string } & ProviderRetry)
  | { type: 'step-end'; agentId: string; step: number; usage: ProviderUsage }
  | { type: 'agent-resume'; agentId: string; attempt: number; reason: string }
  | { type: 'agent-settle'; agentId: string; result: AgentResult }
  /** A result of an older generation (or for a closed scope): never delivered, only reported. */
  | { type: 'agent-stale'; agentId: string; generation: number; current: number };

export type AgentMode = 'sync' | 'async' | 'direct';

/**
 * A provider request failed and will be tried again, with enough for a view to say "retrying
 * after 429 (attempt 2 of 5, waiting 1.2 s)".
 */
export interface ProviderRetry {
  /** The attempt about to be made, counted from 1: 2 at the first retry. */
  attempt: number;
  /** How many attempts there will be at most. */
  maxAttempts: number;
  /** How long the wait before that attempt is, in ms. */
  waitMs: number;
  /** Why the last attempt failed. */
  code: ProviderErrorCode;
  /** The HTTP status of the last attempt, when the server answered with one. */
  status?: number;
  /** The rate-limit governor paces this retry; it does not count against `maxAttempts`. */
  paced?: boolean;
  /** The failed attempt's `request-id`, when the server sent one. */
  requestId?: string;
  /** What happened, with the URL and the cause; already redacted of secrets. */
  message: string;
}
