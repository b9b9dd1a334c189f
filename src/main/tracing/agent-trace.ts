import type { Context, Tracer } from '@opentelemetry/api';
import type { AgentResult } from '../../shared/result.js';
import type { TraceSpanId } from '../../shared/trace/types.js';
import { OtelSpans, openAgentSpan } from './otel-spans.js';

/** What the engine keeps of one traced child, from spawn to result. */
export interface ChildTrace {
  /** Replays the child's span operations (from whichever worker runs it now). */
  apply: OtelSpans['apply'];
  /** Its run was lost with its worker: the spans that run left open end as `worker_lost`. */
  resumed(): void;
  /** The context of the child's tool-call span `span`, to hang a spawn of its under. */
  contextOf(span: TraceSpanId | undefined): Context;
  /** The child settled: what is still open ends, then its `invoke_agent` span. */
  settle(result: AgentResult): void;
}

/** Opens a child's `invoke_agent` span and the sink its worker's operations replay into. */
export function traceChild(
  tracer: Tracer,
  parent: Context,
  agent: { id: string; name: string; model: string; depth: number; mode?: string },
): ChildTrace {
  const span = openAgentSpan(tracer, parent, agent);
  const spans = new OtelSpans(tracer, span.context);
  return {
    apply: (op) => spans.apply(op),
    resumed: () => spans.abandon('worker_lost'),
    contextOf: (id) => spans.contextOf(id),
    settle: (result) => {
      // A cancelled child's worker may not close what it had open; main ends it with the result.
      spans.abandon(result.outcome === 'complete' ? 'unfinished' : result.outcome);
      span.end(result);
    },
  };
}
