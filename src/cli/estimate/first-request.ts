import type { EngineOptions } from '../../main/engine.js';
import type { EngineCheck } from '../../main/engine-check.js';
import { childSystemPrompt } from '../../shared/child.js';
import { DEFAULT_MAX_DEPTH } from '../../shared/child-spec.js';
import { firstMessage, replyToolParam, toolParam } from '../../shared/loop/step-request.js';
import {
  type CacheSettings,
  DEFAULT_CACHE_MODE,
  DEFAULT_CACHE_TTL,
  planCache,
  type SharedPrefix,
} from '../../shared/provider/cache.js';
import { estimateInputTokens } from '../../shared/provider/request-size.js';
import type { ProviderRequest } from '../../shared/provider/types.js';
import { loadToolModule } from '../../shared/tools/modules.js';
import { jsonOutputSchema } from '../../shared/tools/output-schema.js';
import { selectionPicks } from '../../shared/tools/selection.js';
import { spawnTools } from '../../shared/tools/spawn-tools.js';
import type { AnyTool } from '../../shared/tools/types.js';
import { WORKSPACE_TOOLS } from '../../shared/tools/workspace.js';
import { type BatchTask, taskAgentOptions } from '../task-lines.js';

/** A task's first request, as its agent would send it, and what the estimate needs of it. */
export interface TaskRequest {
  model: string;
  /** The body count_tokens takes: the Messages request without `max_tokens` and `stream`. */
  body: { model: string; system?: unknown; tools?: unknown[]; messages: unknown[] };
  /** Its input tokens as the client estimates them (characters / 4 of its JSON). */
  localTokens: number;
  cache: CacheSettings;
  /** The prefix it shares with its siblings, when it is long enough to be cached. */
  shared?: SharedPrefix;
}

/**
 * Builds the first request of each task the way a spawned child builds it (`src/shared/child.ts`,
 * `step-request.ts`, the provider's `planCache`): its agent file's fields under the task's own,
 * the system prompt with the reply rules, the tools it is offered (the workspace's, the tool
 * modules', the MCP servers', the spawn family below `--max-depth`, then `reply`, typed by its output schema), the
 * preamble before the prompt, and the prompt-cache breakpoints. Counting this body is counting
 * what the run's first step is charged.
 *
 * The tool modules are imported here, on the CLI's main thread, to read their definitions: the
 * engine's check has already imported each one in a worker of its own within its timeout.
 */
export async function requestBuilder(
  check: EngineCheck,
  options: EngineOptions,
  defaultModel: string,
  /** The MCP servers' tools (`mcp__NAME__TOOL`), started once for the check. */
  mcpTools: readonly AnyTool[] = [],
): Promise<(task: BatchTask) => TaskRequest> {
  const tools: AnyTool[] = [];
  if (options.workspace !== undefined) tools.push(...WORKSPACE_TOOLS);
  for (const modulePath of options.toolModules ?? [])
    tools.push(...(await loadToolModule(modulePath)));
  tools.push(...(options.hostTools ?? []), ...mcpTools);
  // A task is an agent at depth 1: it gets the spawn family only below the engine's depth.
  if (1 < (options.maxDepth ?? DEFAULT_MAX_DEPTH)) {
    const agents = check.agents.map(({ name, description }) => ({ name, description }));
    tools.push(...spawnTools(NO_SPAWNER, agents.length > 0 ? agents : undefined));
  }
  return (task) => {
    const { options: agent } = check.resolve(taskAgentOptions(task));
    const model = agent.model ?? defaultModel;
    // Chosen as the run chooses: by name, or all of a server's by `mcp__NAME__*`.
    const chosen = agent.tools;
    const selected = chosen ? tools.filter((tool) => selectionPicks(chosen, tool.name)) : tools;
    const schema = jsonOutputSchema(agent.outputSchema);
    const request: ProviderRequest = {
      system: childSystemPrompt(agent.system),
      messages: [firstMessage(agent.prompt, agent.preamble)],
      tools: [...selected.map(toolParam), replyToolParam(schema)],
    };
    const cache: CacheSettings = {
      mode: agent.cache ?? options.cache ?? DEFAULT_CACHE_MODE,
      ttl: agent.cacheTtl ?? options.cacheTtl ?? DEFAULT_CACHE_TTL,
    };
    const plan = cache.mode === 'auto' ? planCache(request, model, cache.ttl) : undefined;
    const parts = plan?.parts ?? request;
    return {
      model,
      body: {
        model,
        ...(parts.system === undefined ? {} : { system: parts.system }),
        ...(parts.tools.length === 0 ? {} : { tools: parts.tools }),
        messages: parts.messages,
      },
      localTokens: plan?.inputTokens ?? estimateInputTokens(request),
      cache,
      ...(plan?.shared ? { shared: plan.shared } : {}),
    };
  };
}

/** The spawn tools are only described here, never run. */
const NO_SPAWNER = {
  runSync: () => Promise.reject(new Error('not run in an estimate')),
  spawnAsync: () => Promise.reject(new Error('not run in an estimate')),
  list: () => [],
  cancel: (id: string) => ({ id, wasLive: false }),
};
