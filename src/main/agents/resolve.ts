import path from 'node:path';
import { mergeBudgets } from '../../shared/budget-meter.js';
import { describeValue, UsageError } from '../../shared/errors.js';
import { defined } from '../../shared/option-schema.js';
import { REPLY_TOOL } from '../../shared/tools/types.js';
import type { AgentOptions, EngineOptions } from '../engine-options.js';
import { type AgentDefinition, AgentFileError } from './definition.js';
import { loadAgentDefinitions } from './load.js';

/**
 * What a spawn that names an agent file becomes: the file's fields fill in what the spawn left
 * unset (`budget` field by field), and the definition. A name no file defines is a UsageError.
 */
export function agentResolver(
  agents: readonly AgentDefinition[],
): (options: AgentOptions) => { options: AgentOptions; definition?: AgentDefinition } {
  const byName = new Map(agents.map((agent) => [agent.name, agent]));
  return (options: AgentOptions) => {
    if (options.agent === undefined) return { options };
    const definition = byName.get(options.agent);
    if (!definition) {
      const names = [...byName.keys()].map((name) => `\`${name}\``).join(', ') || 'none';
      throw new UsageError(
        `Expected \`agent\` to name an agent file (known: ${names}), got ${describeValue(options.agent, 60, { quoteStrings: true })}`,
      );
    }
    const { agent: _name, ...own } = options;
    // The spawn's fields that are set win; an explicit `undefined` leaves the file's in place.
    const merged: AgentOptions = defined({
      system: definition.system,
      model: definition.model,
      tools: definition.tools,
      maxSteps: definition.maxSteps,
      outputSchema: definition.outputSchema,
      patienceMs: definition.patienceMs,
      timeout: definition.timeout,
      cache: definition.cache,
      cacheTtl: definition.cacheTtl,
      ...defined(own),
    });
    // Merged only when either has one: a spawn's bad `budget` (null, a number) is left as it is
    // for the spawn's check to refuse.
    if (definition.budget || own.budget) {
      merged.budget = mergeBudgets(definition.budget, own.budget) ?? {};
    }
    return { options: merged, definition };
  };
}

/** An agent file may name only tools that exist; the message points at its `tools` line. */
export function checkAgentFileTools(
  agents: readonly AgentDefinition[],
  known: readonly string[],
): void {
  for (const agent of agents) {
    const unknown = (agent.tools ?? []).filter(
      (name) => name !== REPLY_TOOL && !known.includes(name),
    );
    if (unknown.length === 0) continue;
    const list = known.length === 0 ? 'none' : known.map((name) => `\`${name}\``).join(', ');
    throw new AgentFileError(
      `${agent.file}:${agent.lines.tools ?? 1}: Expected \`tools\` to name known tools (${list}), got ${unknown.map((name) => `\`${name}\``).join(', ')}`,
    );
  }
}

/**
 * The agent files an engine has: `agentsDir` (which must exist), or `.cohort/agents` under the
 * workspace when that exists. Throws the first malformed file's UsageError (`file:line: …`).
 */
export function engineAgents(options: EngineOptions): AgentDefinition[] {
  if (options.agentsDir !== undefined) {
    return loadAgentDefinitions(options.agentsDir, { required: true });
  }
  if (options.workspace === undefined) return [];
  const folder = path.join(options.workspace, '.cohort', 'agents');
  return loadAgentDefinitions(folder, { required: false });
}
