/**
 * What the loops written on other libraries (sdk-loop, ai-sdk, langchain) share with each other
 * and with a cohort child: the provider config and key they start from, the tools they advertise
 * and run (the bench's tool modules, then `reply`), the system prompt, the step cap, and how an
 * agent's result is built. So the scripted model plays the same script for every engine and
 * every request weighs the same.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { childSystemPrompt } from '../../src/shared/child.js';
import { newAgentId } from '../../src/shared/ids.js';
import {
  API_KEY_ENV,
  DEFAULT_PROVIDER_CONFIG,
  PLACEHOLDER_KEY,
  type ProviderConfig,
} from '../../src/shared/provider/config.js';
import type { AgentResult, AgentUsage } from '../../src/shared/result.js';
import { emptyUsage } from '../../src/shared/result.js';
import { loadToolModule } from '../../src/shared/tools/modules.js';
import { REPLY_DESCRIPTION, REPLY_SCHEMA } from '../../src/shared/tools/reply.js';
import { type AnyTool, type InputSchema, REPLY_TOOL } from '../../src/shared/tools/types.js';
import type { EngineSetup } from './engines.js';

export { REPLY_TOOL };

/** A tool as a request advertises it, before a library wraps it in its own tool type. */
export interface AdvertisedTool {
  name: string;
  description: string;
  inputSchema: InputSchema;
}

/** What a loop on another library starts from, the same for each of them. */
export interface HandLoop {
  /** The provider config: the bench's settings over the defaults. */
  config: ProviderConfig;
  /** The API key a user's loop would read: the environment's, else the placeholder. */
  apiKey: string;
  /** The tool modules' tools, in the order cohort advertises them: `reply` comes after them. */
  tools: readonly AdvertisedTool[];
  /** `reply`, advertised last; each loop ends an agent on it in its library's own way. */
  reply: AdvertisedTool;
  /**
   * Runs one of `tools` for an agent and renders its output as the text the model gets back.
   * Rejects with the tool's failure, or for a name that was not advertised.
   */
  runTool(
    name: string,
    input: unknown,
    call: { signal: AbortSignal; agentId: string },
  ): Promise<string>;
}

/** Reads the bench's setup as every loop on another library does, and loads its tools. */
export async function startHandLoop(setup: EngineSetup): Promise<HandLoop> {
  const byName = await loadAgentTools(setup.toolModules);
  return {
    config: { ...DEFAULT_PROVIDER_CONFIG, ...setup.provider },
    apiKey: process.env[API_KEY_ENV] || PLACEHOLDER_KEY,
    tools: [...byName.values()].map(({ name, description, inputSchema }) => ({
      name,
      description,
      inputSchema,
    })),
    reply: { name: REPLY_TOOL, description: REPLY_DESCRIPTION, inputSchema: REPLY_SCHEMA },
    async runTool(name, input, call) {
      const tool = byName.get(name);
      if (!tool) throw new Error(`Expected one of the advertised tools, got \`${name}\``);
      return render(await tool.run(input, { ...call, depth: 1 }));
    },
  };
}

/** A tool in the Messages API's format, as the official SDK and `bindTools` take it. */
export function anthropicTool(tool: AdvertisedTool): Anthropic.Tool {
  return {
    name: tool.name,
    description: tool.description,
    input_schema: tool.inputSchema as Anthropic.Tool.InputSchema,
  };
}

/**
 * A cohort child's system prompt for a spawn's `system` (the agent's own text, then the delivery
 * discipline); with none, the delivery discipline alone.
 */
export function agentSystem(system: string | undefined): string {
  return childSystemPrompt(system);
}

/** What a tool's result says to the model when the tool was `reply`. */
export const REPLY_RECORDED = 'Reply recorded.';

/** The tools of the bench's tool modules, by name, in the order cohort advertises them. */
async function loadAgentTools(modules: readonly string[]): Promise<Map<string, AnyTool>> {
  const tools = new Map<string, AnyTool>();
  for (const modulePath of modules) {
    for (const tool of await loadToolModule(modulePath)) tools.set(tool.name, tool);
  }
  return tools;
}

/** A tool's output as the text the model gets back. */
export function render(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
}

/** One agent of a hand-written loop: its id, its usage so far, and how it settles. */
export interface AgentRun {
  id: string;
  usage: AgentUsage;
  settle(fields: Pick<AgentResult, 'outcome'> & Partial<AgentResult>): AgentResult;
}

/** Starts the clock of one agent; `settle` builds its result as cohort's engine shapes one. */
export function startAgentRun(title: string): AgentRun {
  const id = newAgentId();
  const begin = performance.now();
  const usage = emptyUsage();
  return {
    id,
    usage,
    settle: (fields) => ({
      id,
      title,
      text: '',
      truncated: false,
      elapsedMs: performance.now() - begin,
      generation: 0,
      usage,
      ...fields,
    }),
  };
}
