import { batchPrice } from '../lane/lane.js';
import { defined } from '../option-schema.js';
import { costUsd, uncachedCostUsd } from '../prices.js';
import type { MessageParam, ProviderResult, ProviderUsage, ToolParam } from '../provider/types.js';
import { StreamRedactor } from '../redact.js';
import type { AgentUsage } from '../result.js';
import {
  REPLY_DESCRIPTION,
  REPLY_SCHEMA,
  TYPED_REPLY_DESCRIPTION,
  typedReplySchema,
} from '../tools/reply.js';
import { type AnyTool, REPLY_TOOL } from '../tools/types.js';
import type { LoopOptions, LoopSink } from './agent-loop.js';

// One step's provider request: the tools it offers, what it spent, and its streamed text.

/** The tools the model is offered: the agent's own, and `reply` below the root. */
export function advertised(options: LoopOptions): ToolParam[] {
  return [...[...options.tools.values()].map(toolParam), ...lastTurnTools(options)];
}

/** What an agent's last turn offers, after its budget: `reply` alone (nothing at the root). */
export function lastTurnTools(options: LoopOptions): ToolParam[] {
  return options.depth < 1 ? [] : [replyToolParam(options.outputSchema)];
}

/** A tool as the request offers it. */
export function toolParam(tool: AnyTool): ToolParam {
  return { name: tool.name, description: tool.description, input_schema: tool.inputSchema };
}

/** The `reply` tool as offered: typed by the output schema when there is one. */
export function replyToolParam(schema: Record<string, unknown> | undefined): ToolParam {
  return schema
    ? {
        name: REPLY_TOOL,
        description: TYPED_REPLY_DESCRIPTION,
        input_schema: typedReplySchema(schema),
      }
    : { name: REPLY_TOOL, description: REPLY_DESCRIPTION, input_schema: REPLY_SCHEMA };
}

/**
 * An agent's first message: its prompt, after its `preamble` when it has one (a block of its
 * own, so the request builder can cache the text its siblings share apart from the question).
 */
export function firstMessage(prompt: string, preamble: string | undefined): MessageParam {
  if (preamble === undefined) return { role: 'user', content: prompt };
  return {
    role: 'user',
    content: [
      { type: 'text', text: preamble },
      { type: 'text', text: prompt },
    ],
  };
}

/**
 * Adds one step's spend to the usage and the budget (a failed request spends too). A step a
 * Message Batch answered (`batched`) is priced at the batch price (docs/LANES.md).
 */
export function spend(
  options: LoopOptions,
  usage: AgentUsage,
  step: ProviderUsage,
  batched = false,
): void {
  usage.inputTokens += step.inputTokens;
  usage.outputTokens += step.outputTokens;
  usage.cacheReadTokens += step.cacheReadTokens;
  usage.cacheWriteTokens += step.cacheWriteTokens;
  const price = batched && options.price ? batchPrice(options.price) : options.price;
  const cost = price ? costUsd(step, price) : 0;
  if (price) {
    usage.costUsd = (usage.costUsd ?? 0) + cost;
    if (batched && options.price) {
      usage.batchSavedUsd = (usage.batchSavedUsd ?? 0) + costUsd(step, options.price) - cost;
    }
    if (step.cacheReadTokens > 0 || step.cacheWriteTokens > 0) {
      usage.cacheSavedUsd = (usage.cacheSavedUsd ?? 0) + uncachedCostUsd(step, price) - cost;
    }
  }
  // A budget's input tokens are every token the model read, cached or not: caching makes a step
  // cheaper (`usd`), not smaller.
  const input = step.inputTokens + step.cacheReadTokens + step.cacheWriteTokens;
  options.budget?.spend({ inputTokens: input, outputTokens: step.outputTokens, costUsd: cost });
}

export async function request(
  options: LoopOptions,
  tools: ToolParam[],
  step: number,
): Promise<ProviderResult> {
  const { sink } = options;
  const text = redactedText(sink);
  try {
    const result = await options.provider.complete(
      defined({
        messages: options.messages,
        tools,
        system: options.system,
        model: options.model,
        cache: options.cache,
      }),
      {
        signal: options.signal,
        step,
        // A later step of a running agent goes before new agents: it finishes work under way.
        ...(options.gate ? { gate: options.gate, priority: step > 1 } : {}),
        ...(options.patienceMs === undefined ? {} : { patienceMs: options.patienceMs }),
        ...(options.trace ? { trace: options.trace } : {}),
        ...(text ? { onTextDelta: text.push } : {}),
        onRetry: (info) => {
          // A failed attempt's text is not continued by the next one, which starts afresh.
          text?.discard();
          sink.providerRetry?.(
            defined({
              attempt: info.attempt,
              maxAttempts: info.maxAttempts,
              waitMs: info.waitMs,
              code: info.error.code,
              message: info.error.message,
              status: info.error.status,
              requestId: info.error.requestId,
              paced: info.paced ? true : undefined,
            }),
          );
        },
      },
    );
    if (result.ok) text?.flush();
    return result;
  } finally {
    text?.discard();
  }
}

/**
 * The sink's text deltas through one StreamRedactor per request, so a key the model streams back
 * in pieces never reaches an event, the live view or a log: every consumer sees these deltas.
 */
function redactedText(
  sink: LoopSink,
): { push(delta: string): void; flush(): void; discard(): void } | undefined {
  const textDelta = sink.textDelta;
  if (!textDelta) return undefined;
  const redactor = new StreamRedactor();
  const emit = (text: string) => {
    if (text !== '') textDelta(text);
  };
  return {
    push: (delta) => emit(redactor.push(delta)),
    flush: () => emit(redactor.flush()),
    discard: () => redactor.discard(),
  };
}
