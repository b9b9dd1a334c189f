import { GEN_AI, type TraceSink, type TraceSpanId, usageAttributes } from '../trace/types.js';
import type { AssistantTurn, ProviderError, ProviderUsage } from './types.js';

/** Opens the `chat {model}` span (CLIENT) of one provider attempt. */
export function openChatSpan(trace: TraceSink, model: string): TraceSpanId {
  return trace.open(`chat ${model}`, 'client', {
    [GEN_AI.operation]: 'chat',
    [GEN_AI.provider]: 'anthropic',
    [GEN_AI.requestModel]: model,
  });
}

/**
 * Closes an attempt's span with what it came to: the usage and the stop reason, or the failure's
 * stable code as `error.type` (an aborted attempt too, so a cancel shows in the trace).
 */
export function closeChatSpan(
  trace: TraceSink,
  span: TraceSpanId,
  outcome:
    | { ok: true; turn: AssistantTurn }
    | { ok: false; error: ProviderError; usage: ProviderUsage },
): void {
  const usage = outcome.ok ? outcome.turn.usage : outcome.usage;
  const attributes = {
    ...usageAttributes(usage),
    ...(outcome.ok && outcome.turn.stopReason !== null
      ? { [GEN_AI.finishReasons]: [outcome.turn.stopReason] }
      : {}),
    ...(!outcome.ok && outcome.error.status !== undefined
      ? { 'http.response.status_code': outcome.error.status }
      : {}),
  };
  trace.close(span, attributes, outcome.ok ? undefined : outcome.error.code);
}
