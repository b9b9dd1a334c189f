import { type Context, context as otelContext, type Tracer } from '@opentelemetry/api';
import { defined } from '../../shared/option-schema.js';
import type { AgentResult } from '../../shared/result.js';
import type { TraceSpanId } from '../../shared/trace/types.js';
import { ROOT_ID, type TurnResult } from '../root-turn.js';
import type { ServedChild, Serving, Uplink } from '../runners/capabilities.js';
import { OtelSpans, openAgentSpan } from './otel-spans.js';

/**
 * What main keeps of one traced child, from spawn to result (the `trace` capability): its
 * `invoke_agent` span, and the sink its worker's span operations replay into, from whichever
 * worker runs it now.
 */
export class ChildTrace implements Serving<'trace'> {
  readonly #span: ReturnType<typeof openAgentSpan>;
  readonly #spans: OtelSpans;
  #child: ServedChild | undefined;

  /** Opens the child's `invoke_agent` span under `parent`. */
  constructor(
    tracer: Tracer,
    parent: Context,
    agent: { id: string; name: string; model: string; depth: number; mode?: string },
  ) {
    this.#span = openAgentSpan(tracer, parent, agent);
    this.#spans = new OtelSpans(tracer, this.#span.context);
  }

  /** Serves `child`: the child whose uplink `contextOf` catches up with. */
  serving(child: ServedChild): this {
    this.#child = child;
    return this;
  }

  /** Replays one of the child's span operations. */
  receive(message: Uplink<'trace'>): void {
    this.#spans.apply(message.op);
  }

  /** Its run was lost with its worker: the spans that run left open end as `worker_lost`. */
  resumed(): void {
    this.#spans.abandon('worker_lost');
  }

  /**
   * The context of the child's tool-call span `span`, to hang a spawn of its under. A spawn over
   * the bridge can arrive before the `open` of the span it names, which the worker posted first
   * on its uplink, another port: the child's uplink is read first.
   */
  contextOf(span: TraceSpanId | undefined): Context {
    if (span !== undefined && !this.#spans.isOpen(span)) this.#child?.readUplink();
    return this.#spans.contextOf(span);
  }

  /** The child settled: what is still open ends, then its `invoke_agent` span. */
  settled(result: AgentResult): void {
    // A cancelled child's worker may not close what it had open; main ends it with the result.
    // A child that failed with its worker left its spans open there: they were lost with it.
    const lost = result.code === 'worker_crashed' || result.code === 'worker_lost';
    this.#spans.abandon(
      lost ? 'worker_lost' : result.outcome === 'complete' ? 'unfinished' : result.outcome,
    );
    this.#span.end(result);
  }
}

/** One root turn's trace: the sink of its steps, and the end of its `invoke_agent root` span. */
export interface RootTrace {
  spans: OtelSpans;
  end(result: TurnResult): void;
}

/** Opens a root turn's `invoke_agent root` span under the active context. */
export function traceRootTurn(tracer: Tracer, model: string): RootTrace {
  const span = openAgentSpan(tracer, otelContext.active(), {
    id: ROOT_ID,
    name: ROOT_ID,
    model,
    depth: 0,
  });
  const spans = new OtelSpans(tracer, span.context);
  return {
    spans,
    end: (result) => {
      spans.abandon(result.outcome);
      // The span takes an agent's result: a turn ended `ready` is the root's `complete`.
      span.end({
        id: ROOT_ID,
        title: ROOT_ID,
        outcome: result.outcome === 'ready' ? 'complete' : result.outcome,
        text: '',
        truncated: false,
        elapsedMs: 0,
        generation: result.generation,
        usage: result.usage,
        ...defined({ reason: result.reason, code: result.code }),
      });
    },
  };
}
