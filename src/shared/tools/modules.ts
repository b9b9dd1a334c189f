import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeValue, UsageError } from '../errors.js';
import { accepts, durationMs } from '../option-schema.js';
import type { AnyTool } from './types.js';

const loaded = new Map<string, Promise<AnyTool[]>>();

/**
 * A tool module that cannot be used. `problem` says why, without naming the module, so a caller
 * that knows the module by another name (`toolModules[0]`, `--tools`) can say it its own way.
 */
export class ToolModuleError extends UsageError {
  readonly modulePath: string;
  readonly problem: string;

  constructor(modulePath: string, problem: string, options?: { cause?: unknown }) {
    super(
      `Expected \`${modulePath}\` to be an ES module exporting valid tools, but ${problem}`,
      options,
    );
    this.modulePath = modulePath;
    this.problem = problem;
  }
}

/**
 * Imports tool modules (ES module paths). A module exports `tools` (an array of tool definitions)
 * or a default export that is one definition or an array of them. Each module is imported once
 * per thread (the start-up check imports them in a throw-away worker of its own). Rejects
 * with a `ToolModuleError`.
 */
export function loadToolModule(modulePath: string): Promise<AnyTool[]> {
  const absolute = path.resolve(modulePath);
  let promise = loaded.get(absolute);
  if (!promise) {
    promise = importTools(absolute);
    loaded.set(absolute, promise);
  }
  return promise;
}

async function importTools(absolute: string): Promise<AnyTool[]> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(absolute).href)) as Record<string, unknown>;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ToolModuleError(absolute, `importing it failed: ${message}`, { cause: error });
  }
  const exported = module.tools ?? module.default;
  const list = Array.isArray(exported) ? exported : exported === undefined ? [] : [exported];
  if (list.length === 0) {
    throw new ToolModuleError(absolute, 'it exports neither `tools` (an array) nor a default tool');
  }
  list.forEach((tool, index) => {
    const problem = toolProblem(tool);
    if (problem) throw new ToolModuleError(absolute, `its tool #${index} ${problem}`);
  });
  return list as AnyTool[];
}

/** Throws a UsageError naming `where` unless `tool` has the shape of a tool definition. */
export function checkTool(tool: unknown, where: string): asserts tool is AnyTool {
  const problem = toolProblem(tool);
  if (problem) throw new UsageError(`Expected ${where} to be a tool definition, but it ${problem}`);
}

/** What keeps `tool` from being a tool definition ("lacks a `run` function"), if anything. */
function toolProblem(tool: unknown): string | undefined {
  const candidate = tool as Partial<AnyTool> | null;
  if (typeof candidate !== 'object' || candidate === null) {
    return `is not an object: ${describeValue(tool, 60)}`;
  }
  const problems: string[] = [];
  if (typeof candidate.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(candidate.name)) {
    problems.push('a `name` of 1-64 letters, digits, _ or -');
  }
  if (typeof candidate.description !== 'string') problems.push('a `description` string');
  if (
    typeof candidate.inputSchema !== 'object' ||
    candidate.inputSchema === null ||
    candidate.inputSchema.type !== 'object'
  ) {
    problems.push('an `inputSchema` with type "object"');
  }
  if (typeof candidate.run !== 'function') problems.push('a `run` function');
  if (problems.length > 0) return `lacks ${problems.join(', ')}`;
  const timeoutMs: unknown = candidate.timeoutMs;
  if (timeoutMs !== undefined && !accepts(TOOL_TIMEOUT_MS, timeoutMs)) {
    return `has a \`timeoutMs\` that is not ${TOOL_TIMEOUT_MS.expected}: got ${describeValue(timeoutMs, 60)}`;
  }
  return undefined;
}

/** A tool's own time limit (`timeoutMs`), and the engine's default one (`toolTimeoutMs`). */
export const TOOL_TIMEOUT_MS = durationMs(1);
