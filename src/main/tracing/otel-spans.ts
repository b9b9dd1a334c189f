import { readFileSync } from 'node:fs';
import {
  type Context,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { defined } from '../../shared/option-schema.js';
import type { AgentResult } from '../../shared/result.js';
import {
  GEN_AI,
  type TraceAttributes,
  type TraceOp,
  type TraceSink,
  type TraceSpanId,
  type TraceSpanKind,
  usageAttributes,
} from '../../shared/trace/types.js';

/** cohort's own attribute names, beside the GenAI ones (`GEN_AI`). */
const COHORT = {
  depth: 'cohort.depth',
  mode: 'cohort.mode',
  outcome: 'cohort.outcome',
  costUsd: 'cohort.usage.cost_usd',
  cacheSavedUsd: 'cohort.usage.cache_saved_usd',
  budgetExceeded: 'cohort.budget_exceeded',
  cancelReason: 'cohort.cancel_reason',
} as const;

const KINDS: Record<TraceSpanKind, SpanKind> = {
  internal: SpanKind.INTERNAL,
  client: SpanKind.CLIENT,
};

/**
 * A TraceSink backed by a real OpenTelemetry tracer; also replays a worker's ops.
 *
 * One per agent, made on main under the agent's `invoke_agent` context. The root's loop calls
 * `open`/`close` directly; a child's ops arrive over its worker's uplink and go to `apply`, which
 * uses the worker's timestamps. Nothing here throws on a bad id: a late op from a worker that was
 * abandoned must not take down the main thread.
 */
export class OtelSpans implements TraceSink {
  readonly #tracer: Tracer;
  readonly #parent: Context;
  readonly #open = new Map<TraceSpanId, Span>();
  #next: TraceSpanId = 1;

  constructor(tracer: Tracer, parent: Context) {
    this.#tracer = tracer;
    this.#parent = parent;
  }

  open(
    name: string,
    kind: TraceSpanKind,
    attributes: TraceAttributes,
    parent?: TraceSpanId,
  ): TraceSpanId {
    const id = this.#next++;
    this.#start(id, { name, kind, attributes, parent, time: undefined });
    return id;
  }

  close(id: TraceSpanId, attributes?: TraceAttributes, error?: string): void {
    this.#end(id, attributes, error, undefined);
  }

  /** Replays a worker's op, with the op's time as the span's start or end time. */
  apply(op: TraceOp): void {
    // The uplink checks only that an op is a record with a numeric id: check the rest here.
    const time = Number.isFinite(op.time) ? op.time : undefined;
    if (op.op === 'open') {
      if (typeof op.name !== 'string' || this.#open.has(op.id)) return;
      // Keep `open` from reusing a number the worker chose.
      if (op.id >= this.#next) this.#next = op.id + 1;
      this.#start(op.id, {
        name: op.name,
        kind: op.kind,
        attributes: isRecord(op.attributes) ? op.attributes : {},
        parent: op.parent,
        time,
      });
    } else if (op.op === 'close') {
      const attributes = isRecord(op.attributes) ? op.attributes : undefined;
      this.#end(op.id, attributes, typeof op.error === 'string' ? op.error : undefined, time);
    }
  }

  /**
   * The context of open span `id` (to parent a child spawned from it); the sink's parent when
   * unknown/closed/undefined.
   */
  /** Whether span `id` is open here (a worker's `open` for it has been replayed). */
  isOpen(id: TraceSpanId): boolean {
    return this.#open.has(id);
  }

  contextOf(id?: TraceSpanId): Context {
    const span = id === undefined ? undefined : this.#open.get(id);
    return span ? trace.setSpan(this.#parent, span) : this.#parent;
  }

  /**
   * Ends every open span now with ERROR and `error.type` = `error`; forgets the ids (a resumed
   * agent's worker numbers from 1 again).
   */
  abandon(error: string): void {
    // Innermost first (they were opened last), so no child outlives its parent.
    const spans = [...this.#open.values()].reverse();
    this.#open.clear();
    for (const span of spans) endSpan(span, undefined, error, undefined);
  }

  #start(
    id: TraceSpanId,
    span: {
      name: string;
      kind: TraceSpanKind;
      attributes: TraceAttributes;
      parent: TraceSpanId | undefined;
      time: number | undefined;
    },
  ): void {
    const options = {
      // A worker's op may carry any string here: only our own keys count.
      kind: Object.hasOwn(KINDS, span.kind) ? KINDS[span.kind] : SpanKind.INTERNAL,
      attributes: span.attributes,
      ...defined({ startTime: span.time }),
    };
    this.#open.set(id, this.#tracer.startSpan(span.name, options, this.contextOf(span.parent)));
  }

  #end(
    id: TraceSpanId,
    attributes: TraceAttributes | undefined,
    error: string | undefined,
    time: number | undefined,
  ): void {
    const span = this.#open.get(id);
    if (!span) return;
    this.#open.delete(id);
    endSpan(span, attributes, error, time);
  }
}

function endSpan(
  span: Span,
  attributes: TraceAttributes | undefined,
  error: string | undefined,
  time: number | undefined,
): void {
  if (attributes) span.setAttributes(attributes);
  if (error !== undefined) {
    span.setAttribute(GEN_AI.errorType, error);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end(time);
}

/**
 * Opens an agent's `invoke_agent {name}` span (INTERNAL) under `parent`.
 *
 * Main holds it from spawn to result, across crash resumes, so an agent has one span however
 * many workers it ran on. `end` is idempotent: a second result (which the engine never produces)
 * changes nothing.
 */
export function openAgentSpan(
  tracer: Tracer,
  parent: Context,
  agent: { id: string; name: string; model: string; depth: number; mode?: string },
): { context: Context; end(result: AgentResult): void } {
  const attributes: TraceAttributes = {
    [GEN_AI.operation]: 'invoke_agent',
    [GEN_AI.provider]: 'anthropic',
    [GEN_AI.agentName]: agent.name,
    [GEN_AI.agentId]: agent.id,
    [GEN_AI.requestModel]: agent.model,
    [COHORT.depth]: agent.depth,
  };
  if (agent.mode !== undefined) attributes[COHORT.mode] = agent.mode;
  const span = tracer.startSpan(
    `invoke_agent ${agent.name}`,
    { kind: SpanKind.INTERNAL, attributes },
    parent,
  );
  let ended = false;
  return {
    context: trace.setSpan(parent, span),
    end(result: AgentResult): void {
      if (ended) return;
      ended = true;
      span.setAttributes(resultAttributes(result));
      if (result.outcome === 'failed') {
        span.setAttribute(GEN_AI.errorType, result.code ?? 'failed');
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}

function resultAttributes(result: AgentResult): TraceAttributes {
  const attributes: TraceAttributes = {
    ...usageAttributes(result.usage),
    [COHORT.outcome]: result.outcome,
  };
  if (result.usage.costUsd !== undefined) attributes[COHORT.costUsd] = result.usage.costUsd;
  if (result.usage.cacheSavedUsd !== undefined) {
    attributes[COHORT.cacheSavedUsd] = result.usage.cacheSavedUsd;
  }
  if (result.budgetExceeded !== undefined) {
    attributes[COHORT.budgetExceeded] = result.budgetExceeded;
  }
  // A cancel is the caller's decision, not a fault: the status stays unset, the reason is kept.
  if (result.outcome === 'cancelled') attributes[COHORT.cancelReason] = result.reason ?? 'user';
  return attributes;
}

/** The tracer cohort uses from a provider: name 'cohort', the package version. */
export function cohortTracer(provider: TracerProvider): Tracer {
  return provider.getTracer('cohort', packageVersion());
}

let version: string | undefined;

/**
 * cohort's version from its package.json, found by walking up from this module: the module sits
 * at `src/main/tracing/` under vitest and at `dist/src/main/tracing/` when built, so no fixed
 * relative path fits both.
 */
function packageVersion(): string {
  if (version !== undefined) return version;
  for (let url = new URL('./package.json', import.meta.url); ; ) {
    const parent = new URL('../package.json', url);
    try {
      const json = JSON.parse(readFileSync(url, 'utf8')) as { name?: unknown; version?: unknown };
      if (json.name === 'cohort-agents' && typeof json.version === 'string') {
        version = json.version;
        return version;
      }
    } catch {
      // No package.json at this level (or not ours): keep walking up.
    }
    if (parent.href === url.href) return 'unknown';
    url = parent;
  }
}

function isRecord(value: unknown): value is TraceAttributes {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
