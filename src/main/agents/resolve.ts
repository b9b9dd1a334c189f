import path from 'node:path';
import { mergeBudgets } from '../../shared/budget-meter.js';
import { describeValue, UsageError } from '../../shared/errors.js';
import { defined } from '../../shared/option-schema.js';
import { unknownEntries } from '../../shared/tools/selection.js';
import { REPLY_TOOL } from '../../shared/tools/types.js';
import type { AgentOptions, EngineOptions } from '../engine-options.js';
import { type AgentDefinition, type AgentFile, AgentFileError } from './definition.js';
import { loadAgentFolder } from './load.js';

/**
 * What a spawn that names an agent file becomes: the file's fields fill in what the spawn left
 * unset (`budget` field by field), and the definition. A name no file defines is a UsageError; a
 * name whose file is bad (`broken`, kept when the engine checks files only as spawns name them)
 * is that file's own `FILE:LINE:` error.
 */
export function agentResolver(
  agents: readonly AgentDefinition[],
  broken: readonly AgentFileError[] = [],
): (options: AgentOptions) => { options: AgentOptions; definition?: AgentDefinition } {
  const byName = new Map(agents.map((agent) => [agent.name, agent]));
  const brokenByName = new Map(
    broken.map((error) => [path.basename(error.file).replace(/\.md$/, ''), error]),
  );
  return (options: AgentOptions) => {
    if (options.agent === undefined) return { options };
    const definition = byName.get(options.agent);
    const bad = definition ? undefined : brokenByName.get(options.agent);
    if (bad) throw new AgentFileError(bad.file, bad.line, bad.problem, { cause: bad });
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

/**
 * Why an agent file may not be used by this engine, if it may not: it names a tool that does not
 * exist (`known`). The message points at its `tools` line.
 */
export function agentFileToolsProblem(
  agent: AgentDefinition,
  known: readonly string[],
): AgentFileError | undefined {
  const unknown = unknownEntries(
    (agent.tools ?? []).filter((name) => name !== REPLY_TOOL),
    known,
  );
  if (unknown.length === 0) return undefined;
  const list = known.length === 0 ? 'none' : known.map((name) => `\`${name}\``).join(', ');
  return new AgentFileError(
    agent.file,
    agent.lines.tools ?? 1,
    `Expected \`tools\` to name known tools (${list}), got ${unknown.map((name) => `\`${name}\``).join(', ')}`,
  );
}

/** The agent files of an engine, and the folder they are in (none when there is no folder). */
export interface AgentFolder {
  folder?: string;
  files: AgentFile[];
}

/**
 * The agent files an engine has: `agentsDir` (which must exist), or `.cohort/agents` under the
 * workspace when that exists. Each file's entry holds its definition or its `FILE:LINE:` error;
 * only the folder itself (a named one missing, a file, unreadable) throws a UsageError.
 */
export function engineAgents(options: EngineOptions): AgentFolder {
  if (options.agentsDir !== undefined) {
    const folder = path.resolve(options.agentsDir);
    return { folder, files: loadAgentFolder(folder, { required: true }) };
  }
  if (options.workspace === undefined) return { files: [] };
  const folder = defaultAgentsFolder(options.workspace);
  return { folder, files: loadAgentFolder(folder, { required: false }) };
}

/** Where a workspace keeps its agent files when `agentsDir` does not say: `.cohort/agents`. */
export function defaultAgentsFolder(workspace: string): string {
  return path.resolve(workspace, '.cohort', 'agents');
}
