import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { glob } from 'tinyglobby';
import { UsageError } from '../errors.js';
import type { ToolContext, ToolDefinition } from './types.js';

/** Most entries `list_files` returns; the listing says when it stopped there. */
export const LIST_LIMIT = 2000;
/** Largest file `read_file` returns whole, in bytes; larger files need a line range. */
export const READ_LIMIT_BYTES = 1_000_000;

/**
 * Resolves `requested` inside `root` and refuses anything that leaves it, through `..`, an
 * absolute path or a symbolic link. Returns the real path.
 */
export async function resolveInside(root: string, requested: string): Promise<string> {
  const rootReal = await realpath(root);
  const candidate = path.resolve(rootReal, requested);
  if (!isWithin(rootReal, candidate)) {
    throw new UsageError(
      `Expected \`path\` inside the workspace, got \`${requested}\`, which leaves it`,
    );
  }
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    throw new UsageError(`Expected \`path\` to name an existing file, got \`${requested}\``);
  }
  if (!isWithin(rootReal, real)) {
    throw new UsageError(
      `Expected \`path\` inside the workspace, got \`${requested}\`, a link that leads out of it`,
    );
  }
  return real;
}

function isWithin(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

function requireWorkspace(context: ToolContext): string {
  if (!context.workspace) throw new UsageError('This agent has no workspace folder to read from');
  return context.workspace;
}

interface ReadFileInput {
  path: string;
  startLine?: number;
  endLine?: number;
}

export const readFileTool: ToolDefinition<ReadFileInput> = {
  name: 'read_file',
  description:
    'Read a text file of the workspace. `path` is relative to the workspace root. ' +
    'Optional `startLine` and `endLine` (1-based, inclusive) select a range.',
  inputSchema: {
    type: 'object',
    properties: {
      path: { type: 'string', minLength: 1 },
      startLine: { type: 'integer', minimum: 1 },
      endLine: { type: 'integer', minimum: 1 },
    },
    required: ['path'],
    additionalProperties: false,
  },
  async run(input, context) {
    const root = requireWorkspace(context);
    const real = await resolveInside(root, input.path);
    const info = await stat(real);
    if (!info.isFile()) throw new UsageError(`Expected \`path\` to name a file, got a folder`);
    const ranged = input.startLine !== undefined || input.endLine !== undefined;
    if (!ranged && info.size > READ_LIMIT_BYTES) {
      throw new UsageError(
        `Expected a file of at most ${READ_LIMIT_BYTES} bytes or a line range, got ${info.size} bytes`,
      );
    }
    const text = await readFile(real, { encoding: 'utf8', signal: context.signal });
    if (!ranged) return text;
    const lines = text.split('\n');
    const start = input.startLine ?? 1;
    const end = Math.min(input.endLine ?? lines.length, lines.length);
    if (end < start) {
      throw new UsageError(
        `Expected \`endLine\` ≥ \`startLine\` within the file's ${lines.length} lines, got ${start}..${input.endLine}`,
      );
    }
    return lines.slice(start - 1, end).join('\n');
  },
};

interface ListFilesInput {
  pattern?: string;
}

export const listFilesTool: ToolDefinition<ListFilesInput> = {
  name: 'list_files',
  description:
    'List files of the workspace matching a glob `pattern` (default `**/*`), one relative path ' +
    'per line. Dot-files, node_modules and symbolic links are left out.',
  inputSchema: {
    type: 'object',
    properties: { pattern: { type: 'string', minLength: 1 } },
    additionalProperties: false,
  },
  async run(input, context) {
    const root = await realpath(requireWorkspace(context));
    const pattern = input.pattern ?? '**/*';
    if (path.isAbsolute(pattern) || pattern.split('/').includes('..')) {
      throw new UsageError(
        `Expected \`pattern\` relative to the workspace, got \`${pattern}\`, which leaves it`,
      );
    }
    const found = await glob(pattern, {
      cwd: root,
      onlyFiles: true,
      dot: false,
      followSymbolicLinks: false,
      ignore: ['**/node_modules/**'],
    });
    found.sort();
    const shown = found.slice(0, LIST_LIMIT);
    const more = found.length - shown.length;
    return more > 0 ? `${shown.join('\n')}\n[… ${more} more not listed]` : shown.join('\n');
  },
};

export const WORKSPACE_TOOLS = [readFileTool, listFilesTool];
