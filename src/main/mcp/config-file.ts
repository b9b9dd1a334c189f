import { readFileSync } from 'node:fs';
import { UsageError } from '../../shared/errors.js';
import type { McpServerSet } from './config.js';
import { checkMcpServers } from './config-check.js';
import { duplicateKey } from './duplicate-keys.js';

/** Where each server of a merged set came from, for messages. */
export type ServerSources = Record<string, string>;

/**
 * Reads a `.mcp.json` file (`{"mcpServers": {NAME: …}}`, as Claude Code writes it), checks every
 * entry and expands `${VAR}` from `env`. Every message names the file, and the entry when one is
 * at fault.
 */
export function readMcpConfigFile(
  file: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): McpServerSet {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(
      `Expected \`${file}\` to be a readable MCP config file, but ${code === 'ENOENT' ? 'it does not exist' : code === 'EISDIR' ? 'it is a folder' : (error as Error).message}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      `Expected \`${file}\` to be JSON of the shape {"mcpServers": {NAME: {...}}}, but it is not JSON: ${jsonProblem((error as Error).message, text)}`,
    );
  }
  const twice = duplicateKey(text);
  if (twice) {
    const inServers = twice.path.length === 1 && twice.path[0] === 'mcpServers';
    throw new UsageError(
      inServers
        ? `Expected every server in \`${file}\` to have its own name, got \`${twice.key}\` twice`
        : `Expected every key of an object in \`${file}\` once, got \`${twice.key}\` twice in \`${twice.path.join('.') || '(top)'}\``,
    );
  }
  if (typeof parsed !== 'object' || parsed === null || !('mcpServers' in parsed)) {
    throw new UsageError(
      `Expected \`${file}\` to be an object with an \`mcpServers\` object, got ${Array.isArray(parsed) ? 'an array' : typeof parsed === 'object' && parsed !== null ? 'no `mcpServers` key' : `a JSON ${parsed === null ? 'null' : typeof parsed}`}`,
    );
  }
  return checkMcpServers((parsed as { mcpServers: unknown }).mcpServers, `\`${file}\``, env);
}

/**
 * The servers of several sources as one set. A name in two sources is refused, naming both:
 * the later one would silently replace the earlier.
 */
export function mergeServerSets(sets: readonly { servers: McpServerSet; from: string }[]): {
  servers: McpServerSet;
  sources: ServerSources;
} {
  const servers: McpServerSet = {};
  const sources: ServerSources = {};
  for (const { servers: set, from } of sets) {
    for (const [name, config] of Object.entries(set)) {
      const first = sources[name];
      if (first !== undefined) {
        throw new UsageError(
          `Expected every MCP server to have its own name, got \`${name}\` in ${first} and in ${from}`,
        );
      }
      servers[name] = config;
      sources[name] = from;
    }
  }
  return { servers, sources };
}

/**
 * A JSON parse error without the file's text: V8 quotes a piece of it (`"{"token": "ab"... is not
 * valid JSON`), which may be a secret. A position is given as a line and column instead.
 */
function jsonProblem(message: string, text: string): string {
  const withoutText = message.replace(/, ".*" is not valid JSON$/s, '');
  return withoutText.replace(/ in JSON at position (\d+).*$/s, (_whole, position: string) => {
    const before = text.slice(0, Number(position)).split('\n');
    return ` at line ${before.length}, column ${(before.at(-1)?.length ?? 0) + 1}`;
  });
}
