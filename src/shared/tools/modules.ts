import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from '../errors.js';
import type { AnyTool } from './types.js';

const loaded = new Map<string, Promise<AnyTool[]>>();

/**
 * Imports tool modules (ES module paths). A module exports `tools` (an array of tool definitions)
 * or a default export that is one definition or an array of them. Each module is imported once
 * per thread.
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
    throw new UsageError(
      `Expected \`${absolute}\` to be an ES module exporting tools, but importing it failed: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const exported = module.tools ?? module.default;
  const list = Array.isArray(exported) ? exported : exported === undefined ? [] : [exported];
  if (list.length === 0) {
    throw new UsageError(
      `Expected \`${absolute}\` to export \`tools\` (an array) or a default tool, got neither`,
    );
  }
  list.forEach((tool, index) => {
    checkTool(tool, `${absolute} tool #${index}`);
  });
  return list as AnyTool[];
}

export function checkTool(tool: unknown, where: string): asserts tool is AnyTool {
  const candidate = tool as Partial<AnyTool> | null;
  const problems: string[] = [];
  if (typeof candidate !== 'object' || candidate === null) problems.push('an object');
  else {
    if (typeof candidate.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(candidate.name)) {
      problems.push('`name` of 1-64 letters, digits, _ or -');
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
  }
  if (problems.length > 0) {
    throw new UsageError(`Expected ${where} to have ${problems.join(', ')}`);
  }
}
