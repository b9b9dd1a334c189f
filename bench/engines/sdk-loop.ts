/**
 * The `sdk-loop` engine: the agent loop people write first, by hand, on the official SDK. One
 * shared `Anthropic` client; per step `client.messages.stream(...).finalMessage()`; the tool
 * calls run, their results appended; until the model calls `reply`. On the main thread, no logs,
 * under the bench's limiter like every engine. It advertises what cohort's children see (the
 * tool modules' tools, then `reply`, and the same system prompt), so the scripted model plays
 * the same script and the requests weigh the same. A request's `system` goes as the plain string
 * a user would write, with no `cache_control`: the loop caches nothing.
 */
import Anthropic, { type Middleware } from '@anthropic-ai/sdk';
import type { AgentEvent } from '../../src/shared/events.js';
import { classify, publicEndpoint } from '../../src/shared/provider/classify.js';
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import type { ProviderErrorCode } from '../../src/shared/provider/types.js';
import type { AgentResult, AgentUsage } from '../../src/shared/result.js';
import type { AgentRequest, BenchEngine, EngineSetup } from './engines.js';
import {
  agentSystem,
  anthropicTool,
  type HandLoop,
  REPLY_RECORDED,
  REPLY_TOOL,
  render,
  startAgentRun,
  startHandLoop,
} from './hand-loop.js';
import { LiveRuns } from './live-runs.js';

/** What every request of the loop shares. */
interface LoopContext {
  client: Anthropic;
  config: ProviderConfig;
  endpoint: string;
  toolParams: Anthropic.Tool[];
  runTool: HandLoop['runTool'];
}

/** Starts the engine: one client for every agent, as a user would share it. */
export async function sdkLoopEngine(setup: EngineSetup): Promise<BenchEngine> {
  const { config, apiKey, tools, reply, runTool } = await startHandLoop(setup);
  const client = new Anthropic({
    apiKey,
    ...(config.baseURL === undefined ? {} : { baseURL: config.baseURL }),
    maxRetries: config.maxRetries,
    timeout: config.requestTimeoutMs,
    ...(config.headers === undefined ? {} : { defaultHeaders: config.headers }),
  });
  const context: LoopContext = {
    client,
    config,
    endpoint: publicEndpoint(client.baseURL),
    toolParams: [...tools, reply].map(anthropicTool),
    runTool,
  };
  const runs = new LiveRuns<AgentResult>();
  return {
    name: 'sdk-loop',
    threads: 0,
    run(request) {
      return runs.start((signal) => runAgent(context, request, signal));
    },
    close: () => runs.close(),
  };
}

/** One agent, start to reply. Never rejects: a failure is its result. */
async function runAgent(
  context: LoopContext,
  request: AgentRequest,
  signal: AbortSignal,
): Promise<AgentResult> {
  const { id, usage, settle } = startAgentRun(request.title);
  const system = agentSystem(request.system);
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: request.prompt }];
  const counter = attemptCounter(id, usage, context.config.maxRetries + 1, request.onEvent);
  try {
    for (let step = 1; step <= request.maxSteps; step++) {
      const message = await context.client.messages
        .stream(
          {
            model: context.config.model,
            max_tokens: context.config.maxTokens,
            system,
            messages,
            tools: context.toolParams,
          },
          { signal, middleware: [counter] },
        )
        .finalMessage();
      usage.steps++;
      usage.inputTokens += message.usage.input_tokens;
      usage.outputTokens += message.usage.output_tokens;
      // The loop sends no `cache_control`, so a server that caches like the API reports 0 here;
      // they are counted all the same, as a user's loop that reads the usage would see them.
      usage.cacheReadTokens += message.usage.cache_read_input_tokens ?? 0;
      usage.cacheWriteTokens += message.usage.cache_creation_input_tokens ?? 0;
      messages.push({ role: 'assistant', content: message.content });
      const uses = message.content.filter((block) => block.type === 'tool_use');
      if (uses.length === 0) return settle({ outcome: 'empty' });
      const { results, replies } = await runTools(context, uses, { signal, agentId: id });
      messages.push({ role: 'user', content: results });
      if (replies.length > 0) return settle({ outcome: 'complete', text: render(replies[0]) });
    }
    return settle({ outcome: 'capped' });
  } catch (error) {
    if (signal.aborted) return settle({ outcome: 'cancelled', reason: String(signal.reason) });
    const failure = classify(error, {
      endpoint: context.endpoint,
      requestTimeoutMs: context.config.requestTimeoutMs,
    }).error;
    const code = failure.code === 'aborted' ? 'connection' : failure.code;
    return settle({ outcome: 'failed', code, reason: `provider ${code}: ${failure.message}` });
  }
}

/**
 * A per-request SDK middleware that counts every HTTP attempt, the SDK's own retries included,
 * into the agent's usage. A 429 or 529 becomes a `provider-retry` event only once the next
 * attempt starts, as cohort's loop reports it: the last attempt's refusal is the agent's
 * failure, not a retry.
 */
function attemptCounter(
  agentId: string,
  usage: AgentUsage,
  maxAttempts: number,
  onEvent: ((event: AgentEvent) => void) | undefined,
): Middleware {
  let refused: { code: ProviderErrorCode; status: number } | undefined;
  return async (request, next) => {
    usage.providerCalls++;
    if (refused && onEvent) {
      onEvent({
        type: 'provider-retry',
        agentId,
        attempt: usage.providerCalls,
        maxAttempts,
        waitMs: 0,
        ...refused,
        message: `HTTP ${refused.status}`,
      });
    }
    refused = undefined;
    const response = await next(request);
    if (response.status === 429) refused = { code: 'rate_limited', status: 429 };
    if (response.status === 529) refused = { code: 'overloaded', status: 529 };
    return response;
  };
}

/** Runs a message's tool calls in order; `reply` records its result and ends the agent. */
async function runTools(
  context: LoopContext,
  uses: Anthropic.ToolUseBlock[],
  options: { signal: AbortSignal; agentId: string },
): Promise<{ results: Anthropic.ToolResultBlockParam[]; replies: unknown[] }> {
  const results: Anthropic.ToolResultBlockParam[] = [];
  const replies: unknown[] = [];
  for (const use of uses) {
    const input = (use.input ?? {}) as Record<string, unknown>;
    if (use.name === REPLY_TOOL) {
      replies.push(input.result);
      results.push({ type: 'tool_result', tool_use_id: use.id, content: REPLY_RECORDED });
      continue;
    }
    try {
      const content = await context.runTool(use.name, input, options);
      results.push({ type: 'tool_result', tool_use_id: use.id, content });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      results.push({ type: 'tool_result', tool_use_id: use.id, content: message, is_error: true });
    }
  }
  return { results, replies };
}
