/**
 * The `langchain` engine: LangChain's `ChatAnthropic` with bound tools, in the tool-calling loop
 * its documentation writes: one shared model, `bindTools` once; per agent, `invoke` the bound
 * model on the messages, append the `AIMessage`, run each of its `tool_calls` through the tool
 * (`tool.invoke(toolCall)` answers with a `ToolMessage`), append those, and again, until the
 * model calls `reply` or the step cap. On the main thread, no logs, under the bench's limiter
 * like every engine.
 *
 * `invoke` makes non-streaming requests (`streaming` is off by default): the scripted model
 * answers them after the same ttft, in one JSON body. Retries are LangChain's own (`maxRetries`,
 * the bench's; it builds its Anthropic client with `maxRetries: 0` and retries around it), and
 * each attempt has the provider config's request timeout (the client's `timeout`).
 */
import { ChatAnthropic } from '@langchain/anthropic';
import {
  type BaseMessage,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  type UsageMetadata,
} from '@langchain/core/messages';
import type { ToolCall } from '@langchain/core/messages/tool';
import { type ToolRunnableConfig, tool } from '@langchain/core/tools';
import type { JSONSchema } from '@langchain/core/utils/json_schema';
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import type { AgentResult } from '../../src/shared/result.js';
import { AttemptLedger, failureOf } from './attempt-ledger.js';
import type { AgentRequest, BenchEngine, EngineSetup } from './engines.js';
import {
  agentSystem,
  anthropicTool,
  REPLY_RECORDED,
  REPLY_TOOL,
  render,
  startAgentRun,
  startHandLoop,
} from './hand-loop.js';
import { LiveRuns } from './live-runs.js';

type BoundModel = ReturnType<ChatAnthropic['bindTools']>;

/** What the loop asks of a LangChain tool: `invoke` with a tool call answers a `ToolMessage`. */
interface LoopTool {
  invoke(call: ToolCall, config: ToolRunnableConfig): Promise<unknown>;
}

interface LoopContext {
  bound: BoundModel;
  config: ProviderConfig;
  toolsByName: ReadonlyMap<string, LoopTool>;
  ledger: AttemptLedger;
}

export async function langchainEngine(setup: EngineSetup): Promise<BenchEngine> {
  const { config, apiKey, tools, reply, runTool } = await startHandLoop(setup);
  const ledger = new AttemptLedger();
  const model = new ChatAnthropic({
    model: config.model,
    apiKey,
    ...(config.baseURL === undefined ? {} : { anthropicApiUrl: config.baseURL }),
    maxTokens: config.maxTokens,
    maxRetries: config.maxRetries,
    clientOptions: {
      timeout: config.requestTimeoutMs,
      fetch: ledger.fetch,
      ...(config.headers === undefined ? {} : { defaultHeaders: config.headers }),
    },
  });
  const toolsByName = new Map<string, LoopTool>();
  for (const { name, description, inputSchema } of tools) {
    toolsByName.set(
      name,
      tool(
        (input: Record<string, unknown>, config) =>
          runTool(name, input, {
            // The loop always passes the agent's signal; a call without one has no canceller.
            signal: config?.signal ?? new AbortController().signal,
            agentId: String(config?.configurable?.agentId ?? ''),
          }),
        { name, description, schema: inputSchema as JSONSchema },
      ),
    );
  }
  // `reply` is advertised in the Anthropic tool format `bindTools` takes; the loop answers it.
  const context: LoopContext = {
    bound: model.bindTools([...toolsByName.values(), anthropicTool(reply)]),
    config,
    toolsByName,
    ledger,
  };
  const runs = new LiveRuns<AgentResult>();
  return {
    name: 'langchain',
    threads: 0,
    run: (request) => runs.start((signal) => runAgent(context, request, signal)),
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
  const headers = context.ledger.open(id, {
    usage,
    maxAttempts: context.config.maxRetries + 1,
    onEvent: request.onEvent,
  });
  const messages: BaseMessage[] = [
    new SystemMessage(agentSystem(request.system)),
    new HumanMessage(request.prompt),
  ];
  try {
    for (let step = 1; step <= request.maxSteps; step++) {
      const message = await context.bound.invoke(messages, { signal, headers });
      usage.steps++;
      const counted = (message as { usage_metadata?: UsageMetadata | undefined }).usage_metadata;
      usage.inputTokens += counted?.input_tokens ?? 0;
      usage.outputTokens += counted?.output_tokens ?? 0;
      messages.push(message);
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) return settle({ outcome: 'empty' });
      const replies: unknown[] = [];
      for (const call of calls) {
        if (call.name === REPLY_TOOL) {
          replies.push(call.args.result);
          messages.push(new ToolMessage({ tool_call_id: call.id ?? '', content: REPLY_RECORDED }));
          continue;
        }
        messages.push(await runTool(context, call, { signal, agentId: id }));
      }
      if (replies.length > 0) return settle({ outcome: 'complete', text: render(replies[0]) });
    }
    return settle({ outcome: 'capped' });
  } catch (error) {
    if (signal.aborted) return settle({ outcome: 'cancelled', reason: String(signal.reason) });
    return settle({ outcome: 'failed', ...failureOf(error) });
  } finally {
    context.ledger.close(id);
  }
}

/** A tool call through its LangChain tool; a failure is an error `ToolMessage` the model sees. */
async function runTool(
  context: LoopContext,
  call: ToolCall,
  options: { signal: AbortSignal; agentId: string },
): Promise<ToolMessage> {
  const found = context.toolsByName.get(call.name);
  try {
    if (found === undefined) {
      throw new Error(`Expected one of the advertised tools, got \`${call.name}\``);
    }
    return (await found.invoke(call, {
      signal: options.signal,
      configurable: { agentId: options.agentId },
    })) as ToolMessage;
  } catch (error) {
    if (options.signal.aborted) throw error;
    const message = error instanceof Error ? error.message : String(error);
    return new ToolMessage({ tool_call_id: call.id ?? '', content: message, status: 'error' });
  }
}
