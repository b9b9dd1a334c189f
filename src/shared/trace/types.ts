/**
 * Traces without a tracing dependency in the agent loop. The loop, the provider and the tool
 * dispatcher open and close spans through a `TraceSink`: on the main thread it is backed by the
 * user's OpenTelemetry tracer (`src/main/tracing/`); in a worker it records each operation and
 * posts it to main over the worker's uplink, where it is replayed into that same tracer. So every
 * span is made on main, by the user's provider, and a child's spans hang under the span of the
 * tool call that spawned it however deep it runs.
 */

/** An attribute value as OpenTelemetry takes it (plain data: it crosses threads). */
export type TraceValue = string | number | boolean | string[];
export type TraceAttributes = Record<string, TraceValue>;

/** OpenTelemetry's span kinds that cohort uses. */
export type TraceSpanKind = 'internal' | 'client';

/** A span's id within one sink: the sink's own number, never an OpenTelemetry span id. */
export type TraceSpanId = number;

export interface TraceSink {
  /**
   * Opens a span now. `parent` is a span of this sink that is still open; without one the span
   * hangs under the sink's own parent (the agent's `invoke_agent` span).
   */
  open(
    name: string,
    kind: TraceSpanKind,
    attributes: TraceAttributes,
    parent?: TraceSpanId,
  ): TraceSpanId;
  /**
   * Closes a span now, adding `attributes`. With `error` (a stable code, such as a failure code
   * or `tool_error`) the span's status is ERROR and `error.type` is set to it.
   */
  close(id: TraceSpanId, attributes?: TraceAttributes, error?: string): void;
}

/** One sink operation as data, for the uplink: a worker's recorder posts these. */
export type TraceOp =
  | {
      op: 'open';
      id: TraceSpanId;
      name: string;
      kind: TraceSpanKind;
      attributes: TraceAttributes;
      parent?: TraceSpanId;
      /** Epoch time in ms (fractional): the span's start, as the worker saw it. */
      time: number;
    }
  | { op: 'close'; id: TraceSpanId; attributes?: TraceAttributes; error?: string; time: number };

/**
 * GenAI semantic-convention attribute names cohort sets (development status), spelled as
 * `@opentelemetry/semantic-conventions/incubating` exports them (`ATTR_GEN_AI_…`).
 */
export const GEN_AI = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  agentName: 'gen_ai.agent.name',
  agentId: 'gen_ai.agent.id',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  /** Every input token, cached or not (the convention's note: it includes the two below). */
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  /** Input read from the provider's prompt cache. */
  cacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  /** Input written to the provider's prompt cache. */
  cacheCreationInputTokens: 'gen_ai.usage.cache_creation.input_tokens',
  finishReasons: 'gen_ai.response.finish_reasons',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  errorType: 'error.type',
} as const;

/** What a span says of a usage: every input token, and the cache's share when it had one. */
export function usageAttributes(usage: {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number | undefined;
  cacheWriteTokens?: number | undefined;
}): TraceAttributes {
  const read = usage.cacheReadTokens ?? 0;
  const write = usage.cacheWriteTokens ?? 0;
  const attributes: TraceAttributes = {
    [GEN_AI.inputTokens]: usage.inputTokens + read + write,
    [GEN_AI.outputTokens]: usage.outputTokens,
  };
  if (read > 0) attributes[GEN_AI.cacheReadInputTokens] = read;
  if (write > 0) attributes[GEN_AI.cacheCreationInputTokens] = write;
  return attributes;
}
