/**
 * What the loops written on other libraries (sdk-loop, ai-sdk, langchain) share with each other
 * and with a cohort child: the tools they advertise and run (the bench's tool modules, then
 * `reply`), the system prompt, the step cap, and how an agent's result is built. So the
 * scripted model plays the same script for every engine and every request weighs the same.
 */
import { childSystemPrompt } from '../../src/shared/child.js';
import { newAgentId } from '../../src/shared/ids.js';
import type { AgentResult, AgentUsage } from '../../src/shared/result.js';
import { emptyUsage } from '../../src/shared/result.js';
import { loadToolModule } from '../../src/shared/tools/modules.js';
import type { AnyTool } from '../../src/shared/tools/types.js';

export { REPLY_DESCRIPTION, REPLY_SCHEMA } from '../../src/shared/tools/reply.js';
export { REPLY_TOOL } from '../../src/shared/tools/types.js';

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
export async function loadAgentTools(modules: readonly string[]): Promise<Map<string, AnyTool>> {
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
