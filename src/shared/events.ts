import type { ProviderUsage } from './provider/types.js';
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
  | { type: 'provider-retry'; agentId: string; attempt: number; waitMs: number; code: string }
  | { type: 'step-end'; agentId: string; step: number; usage: ProviderUsage }
  | { type: 'agent-resume'; agentId: string; attempt: number; reason: string }
  | { type: 'agent-settle'; agentId: string; result: AgentResult }
  /** A result of an older generation (or for a closed scope): never delivered, only reported. */
  | { type: 'agent-stale'; agentId: string; generation: number; current: number };

export type AgentMode = 'sync' | 'async' | 'direct';
