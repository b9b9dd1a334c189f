/**
 * The `ai-sdk` engine: the tool loop of the Vercel AI SDK as its documentation writes it. One
 * shared provider (`createAnthropic`) and model; per agent, one `generateText` with the tools
 * and `stopWhen`, which runs the steps itself: a request, the tool calls, their results, the next
 * request. `reply` is a tool with no `execute`, the SDK's documented way to end a loop on a
 * final-answer tool (`hasToolCall` says the same), and `stepCountIs` caps the steps as cohort's
 * `maxSteps` does. On the main thread, no logs, under the bench's limiter like every engine.
 *
 * `generateText` makes non-streaming requests (`stream: false`): the scripted model answers
 * them after the same ttft, in one JSON body. Retries are the SDK's own (`maxRetries`, the
 * bench's), and each step has the provider config's request timeout (`timeout.stepMs`).
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { generateText, hasToolCall, jsonSchema, stepCountIs, type ToolSet, tool } from 'ai';
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import type { AgentResult } from '../../src/shared/result.js';
import { AttemptLedger, failureOf } from './attempt-ledger.js';
import type { AgentRequest, BenchEngine, EngineSetup } from './engines.js';
import {
  agentSystem,
  type HandLoop,
  REPLY_TOOL,
  render,
  startAgentRun,
  startHandLoop,
} from './hand-loop.js';
import { LiveRuns } from './live-runs.js';

interface LoopContext {
  model: ReturnType<ReturnType<typeof createAnthropic>>;
  config: ProviderConfig;
  loop: HandLoop;
  ledger: AttemptLedger;
}

export async function aiSdkEngine(setup: EngineSetup): Promise<BenchEngine> {
  const loop = await startHandLoop(setup);
  const { config } = loop;
  const ledger = new AttemptLedger();
  const provider = createAnthropic({
    // The provider's base URL ends in /v1, the SDK's does not.
    ...(config.baseURL === undefined
      ? {}
      : { baseURL: `${config.baseURL.replace(/\/+$/, '')}/v1` }),
    apiKey: loop.apiKey,
    ...(config.headers === undefined ? {} : { headers: config.headers }),
    fetch: ledger.fetch,
  });
  const context: LoopContext = {
    model: provider(config.model),
    config,
    loop,
    ledger,
  };
  const runs = new LiveRuns<AgentResult>();
  return {
    name: 'ai-sdk',
    threads: 0,
    run: (request) => runs.start((signal) => runAgent(context, request, signal)),
    close: () => runs.close(),
  };
}

/**
 * The agent's tools, defined with its call as the SDK's examples do: each `execute` closes over
 * the agent's id and its abort signal.
 */
function agentTools(context: LoopContext, agentId: string, signal: AbortSignal): ToolSet {
  const { tools: advertised, reply, runTool } = context.loop;
  const tools: ToolSet = {};
  for (const { name, description, inputSchema } of advertised) {
    tools[name] = tool({
      description,
      inputSchema: jsonSchema(inputSchema as Parameters<typeof jsonSchema>[0]),
      execute: (input: unknown) => runTool(name, input, { signal, agentId }),
    });
  }
  // No execute: the SDK ends the loop after the step that calls it.
  tools[reply.name] = tool({
    description: reply.description,
    inputSchema: jsonSchema<{ result: unknown }>(
      reply.inputSchema as Parameters<typeof jsonSchema>[0],
    ),
  });
  return tools;
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
  try {
    const result = await generateText({
      model: context.model,
      system: agentSystem(request.system),
      prompt: request.prompt,
      tools: agentTools(context, id, signal),
      stopWhen: [stepCountIs(request.maxSteps), hasToolCall(REPLY_TOOL)],
      maxOutputTokens: context.config.maxTokens,
      maxRetries: context.config.maxRetries,
      timeout: { stepMs: context.config.requestTimeoutMs },
      headers,
      abortSignal: signal,
    });
    usage.steps = result.steps.length;
    usage.inputTokens = result.totalUsage.inputTokens ?? 0;
    usage.outputTokens = result.totalUsage.outputTokens ?? 0;
    const replies = result.toolCalls.filter((call) => call.toolName === REPLY_TOOL);
    if (replies.length > 0) {
      const input = replies[0]!.input as { result?: unknown };
      return settle({ outcome: 'complete', text: render(input.result) });
    }
    return settle({ outcome: result.toolCalls.length === 0 ? 'empty' : 'capped' });
  } catch (error) {
    if (signal.aborted) return settle({ outcome: 'cancelled', reason: String(signal.reason) });
    return settle({ outcome: 'failed', ...failureOf(error) });
  } finally {
    context.ledger.close(id);
  }
}
