import { statSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Budget, PriceTable } from '../shared/budget.js';
import { mergeBudgets } from '../shared/budget-meter.js';
import { DEFAULT_MAX_DEPTH } from '../shared/child-spec.js';
import { expected, UsageError } from '../shared/errors.js';
import { checkOption, checkOptions } from '../shared/option-schema.js';
import { DEFAULT_PRICES, priceOf, priceTable } from '../shared/prices.js';
import type { ProbeMessage } from '../shared/protocol.js';
import { DEFAULT_PROVIDER_CONFIG } from '../shared/provider/config.js';
import { unknownEntries } from '../shared/tools/selection.js';
import { REPLY_TOOL, SPAWN_TOOLS } from '../shared/tools/types.js';
import { WORKSPACE_TOOLS } from '../shared/tools/workspace.js';
import {
  type AgentDefinition,
  type AgentFile,
  AgentFileError,
  AgentFolderError,
} from './agents/definition.js';
import { type AgentFolder, agentFileToolsProblem, agentResolver } from './agents/resolve.js';
import {
  AGENT_FIELDS,
  type AgentFileCheck,
  type AgentOptions,
  ENGINE_FIELDS,
  type EngineOptions,
  isHttpUrl,
} from './engine-options.js';
import { hasMcpServers } from './mcp/config.js';
import type { McpServers } from './mcp/servers.js';
import { builtFile } from './runners/local/piscina.js';

export { DEFAULT_IMPORT_TIMEOUT_MS } from './engine-options.js';

/** What `checkEngine` learned: the tools there are, and the check every spawn passes. */
export interface EngineCheck {
  /**
   * The tools a task (an agent at depth 1) may name in its `tools`, in the order agents see
   * them. `reply` is not listed: every sub-agent has it whatever `tools` says.
   */
  readonly toolNames: readonly string[];
  /**
   * Throws a UsageError when `Engine.spawn` would refuse `options` for an agent at `depth`
   * (default 1): an empty prompt, title or model, `maxSteps` out of bounds, an unknown tool, an
   * unknown agent name, an output schema Ajv refuses, a bad budget. An agent file's fields are
   * checked as the spawn would use them.
   */
  checkAgent(options: AgentOptions, depth?: number): void;
  /** The named agents (agent files) a spawn may use, by name order. */
  readonly agents: readonly AgentDefinition[];
  /**
   * Every file of the agent folder, by name order, as this engine checked it: its definition,
   * or its `FILE:LINE:` error (kept only under `agentFileCheck: 'spawn'`; under `'start'` a bad
   * file stops the check).
   */
  readonly agentFiles: readonly AgentFile[];
  /**
   * `options` with its agent file's fields filled in where the spawn left them unset, and that
   * definition. Throws a UsageError for a name no file defines, and the file's `AgentFileError`
   * for a name whose file is bad (under `agentFileCheck: 'spawn'`).
   */
  resolve(options: AgentOptions): { options: AgentOptions; definition?: AgentDefinition };
}

/** One tool the agents of an engine may get, and where it comes from (for messages). */
export interface ToolSource {
  name: string;
  from: string;
  /** Only for agents that may spawn (depth below `maxDepth`). */
  spawnOnly?: boolean;
}

/**
 * The paths an engine is given, checked on main: the workspace is an existing folder, the log
 * root is a folder or can be made one, and the provider's base URL is an http(s) URL. (The rest
 * of the options are checked where the engine validates them.)
 */
export function checkEnginePaths(options: EngineOptions): void {
  if (options.workspace !== undefined) checkFolder('workspace', options.workspace);
  if (options.logDir !== undefined) checkCanMakeFolder('logDir', options.logDir);
  (options.toolModules ?? []).forEach((modulePath, index) => {
    const kind = pathKind(modulePath);
    if (kind !== 'file') {
      throw new UsageError(
        `Expected \`toolModules[${index}]\` to be the path of an existing ES module, got \`${modulePath}\`, which ${kind === 'missing' ? 'does not exist' : kind === 'folder' ? 'is a folder' : 'is not a regular file'}`,
      );
    }
  });
  const baseURL = options.provider?.baseURL;
  if (baseURL !== undefined && !isHttpUrl(baseURL)) {
    throw expected('provider.baseURL', 'an http:// or https:// URL', baseURL);
  }
}

function pathKind(target: string): 'missing' | 'file' | 'folder' | 'other' {
  let info: ReturnType<typeof statSync>;
  try {
    info = statSync(target);
  } catch {
    return 'missing';
  }
  if (info.isDirectory()) return 'folder';
  return info.isFile() ? 'file' : 'other';
}

function checkFolder(name: string, folder: string): void {
  const kind = pathKind(folder);
  if (kind === 'folder') return;
  throw new UsageError(
    `Expected \`${name}\` to be an existing folder, got \`${folder}\`, which ${kind === 'missing' ? 'does not exist' : 'is not a folder'}`,
  );
}

/** A folder that exists, or can be made: its nearest existing ancestor is a folder. */
function checkCanMakeFolder(name: string, folder: string): void {
  let current = path.resolve(folder);
  for (;;) {
    const kind = pathKind(current);
    if (kind === 'folder') return;
    if (kind !== 'missing') {
      throw new UsageError(
        `Expected \`${name}\` to be a folder or a path where one can be made, got \`${folder}\`, but \`${current}\` is not a folder`,
      );
    }
    const parent = path.dirname(current);
    if (parent === current) return;
    current = parent;
  }
}

/**
 * Lists every tool an agent of this engine may get, with where it comes from. The tool modules
 * are imported in a throw-away worker (`probeToolModules`), never on main. Throws a UsageError
 * naming the module when one fails to import, exports something that is not a tool, or is still
 * importing when the time is up.
 */
export async function engineTools(
  options: EngineOptions,
  timeoutMs: number,
  /** The engine's MCP servers, started (`Engine.start`); unset, they are started and closed here. */
  mcp?: McpServers,
): Promise<ToolSource[]> {
  const sources: ToolSource[] = [];
  if (options.workspace !== undefined) {
    const from = 'the built-in workspace tools (`workspace` is set)';
    for (const tool of WORKSPACE_TOOLS) sources.push({ name: tool.name, from });
  }
  const modules = options.toolModules ?? [];
  const names = modules.length === 0 ? [] : await probeToolModules(modules, timeoutMs);
  names.forEach((moduleNames, index) => {
    const from = `\`toolModules[${index}]\` (\`${modules[index]}\`)`;
    for (const name of moduleNames) sources.push({ name, from });
  });
  (options.hostTools ?? []).forEach((tool, index) => {
    sources.push({ name: tool.name, from: `\`hostTools[${index}]\`` });
  });
  sources.push(...(mcp ? mcp.toolSources : await mcpToolSources(options)));
  if ((options.maxDepth ?? DEFAULT_MAX_DEPTH) >= 1) {
    const from = 'the built-in agent tools (`maxDepth` is 1 or more)';
    for (const name of SPAWN_TOOLS) sources.push({ name, from, spawnOnly: true });
  }
  checkToolNames(sources);
  return sources;
}

/**
 * The tools of the engine's MCP servers, learned by starting them, listing their tools and
 * closing them again: a check leaves no server running. A server that cannot start is refused.
 */
async function mcpToolSources(options: EngineOptions): Promise<ToolSource[]> {
  if (!hasMcpServers(options)) return [];
  const { startEngineServers } = await import('./mcp/engine-servers.js');
  const servers = await startEngineServers(options);
  try {
    return servers ? [...servers.toolSources] : [];
  } finally {
    await servers?.close();
  }
}

/**
 * Imports the modules one after another in a worker of their own and resolves with each one's
 * tool names. A module gets `timeoutMs` to finish importing. The worker is terminated at the
 * end, so nothing a module opened outlives the check.
 */
async function probeToolModules(modules: string[], timeoutMs: number): Promise<string[][]> {
  const worker = new Worker(builtFile('worker/tool-probe.js'), {
    workerData: { modules: modules.map((modulePath) => path.resolve(modulePath)) },
    // Loaders (`--import tsx`) carry over; `--input-type` is for an `-e` script only and a
    // worker refuses it.
    execArgv: process.execArgv.filter((flag) => !flag.startsWith('--input-type')),
  });
  const names: string[][] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<string[][]>((resolve, reject) => {
      const where = (index: number) => `\`toolModules[${index}]\` (\`${modules[index]}\`)`;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          reject(
            new UsageError(
              `Expected ${where(names.length)} to finish importing within ${timeoutMs} ms, but it was still importing (a top-level await that never settles?)`,
            ),
          );
        }, timeoutMs);
      };
      arm();
      worker.on('message', (message: ProbeMessage) => {
        if (message.type === 'module') {
          names[message.index] = message.names;
          arm();
        } else if (message.type === 'error') {
          reject(
            new UsageError(
              `Expected ${where(message.index)} to be an ES module exporting valid tools, but ${message.problem}`,
            ),
          );
        } else resolve(names);
      });
      worker.on('error', (error) =>
        reject(new UsageError(`Expected ${where(names.length)} to import, but ${error.message}`)),
      );
      // A worker with nothing left to run ends even while an import awaits forever (exit 13).
      worker.on('exit', () =>
        reject(
          new UsageError(
            `Expected ${where(names.length)} to finish importing, but its import can never finish (a top-level await that never settles?)`,
          ),
        ),
      );
    });
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}

/**
 * No tool is named `reply` (every sub-agent gets its own, and the provider refuses two tools of
 * one name), and no two tools share a name: the later one would silently replace the earlier.
 */
function checkToolNames(sources: readonly ToolSource[]): void {
  const seen = new Map<string, ToolSource>();
  for (const source of sources) {
    if (source.name === REPLY_TOOL) {
      throw new UsageError(
        `Expected no tool named \`${REPLY_TOOL}\` (it is reserved: every sub-agent gets its own), got one from ${source.from}`,
      );
    }
    const first = seen.get(source.name);
    if (first) {
      const where =
        first.from === source.from
          ? `twice from ${first.from}`
          : `from ${first.from} and from ${source.from}`;
      throw new UsageError(
        `Expected every tool to have its own name, got \`${source.name}\` ${where}`,
      );
    }
    seen.set(source.name, source);
  }
}

/** What `agentCheck` binds the check to, beside the tools. */
export interface AgentCheckOptions {
  maxDepth: number;
  /** The engine's agent files (`engineAgents`). */
  agents?: AgentFolder;
  /** When a bad agent file is refused (`EngineOptions.agentFileCheck`; default `start`). */
  agentFileCheck?: AgentFileCheck;
  /** The engine's model, default budget and prices, for the `usd` limits' prices. */
  model?: string;
  budget?: Budget;
  prices?: PriceTable;
  /** The engine runs its children on a queue: the batches lane is refused. */
  queued?: boolean;
}

/** The batches lane gathers steps on this process's main thread: a queue's workers are elsewhere. */
export function queueLaneRefusal(lane: string): UsageError {
  return new UsageError(
    `Expected \`lane\` to be \`realtime\` with \`queue\` (a queue's workers send their own requests), got \`${lane}\``,
  );
}

/**
 * The check each spawn passes, bound to the tools and the named agents an engine has. Each agent
 * file is checked whole here: its own fields (`load.ts`), the tools it names, and a `usd` limit
 * against its own `model`'s price. Under `agentFileCheck: 'start'` the first bad file throws an
 * `AgentFolderError` saying how to leave it out; under `'spawn'` only spawns naming it are refused.
 */
export function agentCheck(
  sources: readonly ToolSource[],
  options: AgentCheckOptions,
): EngineCheck {
  const { maxDepth, prices } = options;
  const known = (depth: number): string[] =>
    sources.filter((source) => !source.spawnOnly || depth < maxDepth).map((source) => source.name);
  const model = options.model ?? DEFAULT_PROVIDER_CONFIG.model;
  checkPricedBudget(options.budget, model, prices);
  const files = (options.agents?.files ?? []).map((entry) =>
    entry.error ? entry : fileAsThisEngineUsesIt(entry.definition, known(1), options),
  );
  const bad = files.find((entry) => entry.error !== undefined)?.error;
  if (bad && (options.agentFileCheck ?? 'start') === 'start') {
    throw new AgentFolderError(bad, options.agents?.folder ?? path.dirname(bad.file));
  }
  const agents = files.flatMap((entry) => (entry.definition ? [entry.definition] : []));
  const resolve = agentResolver(
    agents,
    files.flatMap((entry) => (entry.error ? [entry.error] : [])),
  );
  return {
    toolNames: known(1),
    agents,
    agentFiles: files,
    resolve,
    checkAgent: (agentOptions, depth = 1) => {
      if (typeof agentOptions === 'object' && agentOptions !== null) {
        checkOption('agent', AGENT_FIELDS.agent, agentOptions.agent);
        const { options: resolved, definition } = resolve(agentOptions);
        checkAgentOptions(resolved, known(depth));
        // Here, not at spawn: a task line or a group's queued spawn is refused before it waits.
        if (options.queued && resolved.lane !== undefined && resolved.lane !== 'realtime') {
          throw queueLaneRefusal(resolved.lane);
        }
        checkFileBudget(definition, agentOptions.budget, () =>
          checkPricedBudget(
            mergeBudgets(options.budget, resolved.budget),
            resolved.model ?? options.model ?? DEFAULT_PROVIDER_CONFIG.model,
            prices,
          ),
        );
      } else checkAgentOptions(agentOptions, known(depth));
    },
  };
}

/**
 * An agent file as this engine would use it: the tools it names exist, and when it names its
 * `model`, that model has a price for a `usd` limit (its own or the engine's). A file that names
 * no model runs on its spawn's or the engine's, so its `usd` limit is checked at the spawn that
 * names it, where the model is known (`checkAgent`), not against a model it may never run on.
 */
function fileAsThisEngineUsesIt(
  definition: AgentDefinition,
  knownTools: readonly string[],
  options: AgentCheckOptions,
): AgentFile {
  const entry = { name: definition.name, file: definition.file };
  const tools = agentFileToolsProblem(definition, knownTools);
  if (tools) return { ...entry, error: tools };
  if (definition.model !== undefined) {
    try {
      checkPricedBudget(
        mergeBudgets(options.budget, definition.budget),
        definition.model,
        options.prices,
      );
    } catch (error) {
      const line = definition.lines.budget ?? definition.lines.model ?? 1;
      return {
        ...entry,
        error: new AgentFileError(definition.file, line, (error as Error).message),
      };
    }
  }
  return { ...entry, definition };
}

/**
 * Runs a spawn's `usd` price check; when the limit is the agent file's (the spawn set no `usd` of
 * its own), its message is put at the file's `budget` line, so the reader knows where it came from.
 */
function checkFileBudget(
  definition: AgentDefinition | undefined,
  own: Budget | undefined,
  check: () => void,
): void {
  try {
    check();
  } catch (error) {
    const fromFile = definition?.budget?.usd !== undefined && own?.usd === undefined;
    if (!fromFile || !(error instanceof UsageError)) throw error;
    const line = definition.lines.budget ?? 1;
    throw new AgentFileError(definition.file, line, error.message, { cause: error });
  }
}

/**
 * A `usd` limit needs the model's price: without one every step costs nothing and the limit
 * would never stop the agent. Refused up front rather than left to silently not hold.
 */
export function checkPricedBudget(
  budget: Budget | undefined,
  model: string,
  prices: PriceTable | undefined,
): void {
  if (budget?.usd === undefined || priceOf(model, priceTable(prices)) !== undefined) return;
  throw new UsageError(
    `Expected a price for model \`${model}\` to hold a \`budget.usd\` limit, got none: add it to \`prices\` (the built-in table has ${Object.keys(DEFAULT_PRICES).join(', ')})`,
  );
}

/** Checks what one agent is asked to do; `known` are the tools it may name. */
function checkAgentOptions(options: AgentOptions, known: readonly string[]): void {
  if (typeof options !== 'object' || options === null) {
    throw expected('options', 'an object of agent options', options);
  }
  checkOptions(AGENT_FIELDS, options);
  const unknown = unknownEntries(
    (options.tools ?? []).filter((name) => name !== REPLY_TOOL),
    known,
  );
  if (unknown.length > 0) {
    const list = known.length === 0 ? 'none' : known.map((name) => `\`${name}\``).join(', ');
    throw new UsageError(
      `Expected \`tools\` to name known tools (${list}), got ${unknown.map((name) => `\`${name}\``).join(', ')}`,
    );
  }
}

/** Every engine option's type and bounds; the message names the option in backticks. */
export function validateEngineOptions(options: EngineOptions): void {
  checkOptions(ENGINE_FIELDS, options);
  checkEnginePaths(options);
}
