import type { AgentEvent } from '../events.js';
import type { LoopSink } from './agent-loop.js';

/** The loop's reports as live events of one agent: every hook but `commit`. */
export function eventSink(
  agentId: string,
  emit: (event: AgentEvent) => void,
): Required<
  Pick<
    LoopSink,
    'stepStart' | 'textDelta' | 'toolCall' | 'toolResult' | 'stepEnd' | 'providerRetry'
  >
> {
  return {
    stepStart: (step) => emit({ type: 'step-start', agentId, step }),
    textDelta: (text) => emit({ type: 'text-delta', agentId, text }),
    toolCall: (call) =>
      emit({ type: 'tool-call', agentId, callId: call.id, name: call.name, input: call.input }),
    toolResult: (call, block) =>
      emit({
        type: 'tool-result',
        agentId,
        callId: call.id,
        name: call.name,
        isError: block.is_error === true,
      }),
    stepEnd: (step, usage) => emit({ type: 'step-end', agentId, step, usage }),
    providerRetry: (info) => emit({ type: 'provider-retry', agentId, ...info }),
  };
}
