import { describeValue, UsageError } from '../../shared/errors.js';
import type { McpServerConfig, McpServerSet } from './config.js';
import { expandVariables } from './expand.js';

/** A server's name: it becomes part of its tools' names, `mcp__NAME__TOOL`. */
const SERVER_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const STDIO_KEYS = [
  'type',
  'command',
  'args',
  'env',
  'cwd',
  'maxConcurrency',
  'startTimeoutMs',
  'toolTimeoutMs',
];
const HTTP_KEYS = ['type', 'url', 'headers', 'maxConcurrency', 'startTimeoutMs', 'toolTimeoutMs'];

/**
 * Checks a set of servers and expands `${VAR}` in their strings from `env`. `where` names their
 * source in messages (`` `mcpServers` ``, or a file), and each message names the entry too.
 * Returns a copy with each entry's `type` set.
 */
export function checkMcpServers(
  value: unknown,
  where: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): McpServerSet {
  if (!isRecord(value)) {
    throw new UsageError(
      `Expected ${where} to be an object of servers by name, got ${kindOf(value)}`,
    );
  }
  const servers: McpServerSet = {};
  for (const [name, entry] of Object.entries(value)) {
    const at = `\`${name}\` in ${where}`;
    if (
      !SERVER_NAME.test(name) ||
      name.includes('__') ||
      name.startsWith('_') ||
      name.endsWith('_')
    ) {
      // Its tools are `mcp__NAME__TOOL`: a name `a_` would make server `a`'s `mcp__a__*` pick its
      // tools too (`mcp__a___x`), and `mcp__a___x` could be either server's.
      throw new UsageError(
        `Expected each server's name to be 1-64 of [a-zA-Z0-9_-], neither starting nor ending with \`_\` and without \`__\` (its tools are named \`mcp__NAME__TOOL\`), got \`${name}\` in ${where}`,
      );
    }
    servers[name] = checkEntry(entry, at, env);
  }
  return servers;
}

function checkEntry(
  entry: unknown,
  at: string,
  env: Readonly<Record<string, string | undefined>>,
): McpServerConfig {
  if (!isRecord(entry))
    throw new UsageError(`Expected server ${at} to be an object, got ${kindOf(entry)}`);
  const type = entry.type;
  if (type !== undefined && type !== 'stdio' && type !== 'http') {
    throw new UsageError(
      `Expected \`type\` of server ${at} to be \`stdio\` or \`http\` (Streamable HTTP), got ${describeValue(type, 120, { quoteStrings: true })}`,
    );
  }
  const hasCommand = entry.command !== undefined;
  const hasUrl = entry.url !== undefined;
  if (hasCommand === hasUrl) {
    throw new UsageError(
      `Expected server ${at} to have either \`command\` (a stdio server) or \`url\` (an HTTP server), got ${hasCommand ? 'both' : 'neither'}`,
    );
  }
  const http = type === 'http' || (type === undefined && hasUrl);
  if (http !== hasUrl) {
    throw new UsageError(
      `Expected server ${at} of \`type\` \`${String(type)}\` to have \`${http ? 'url' : 'command'}\``,
    );
  }
  const unknown = Object.keys(entry).filter(
    (key) => !(http ? HTTP_KEYS : STDIO_KEYS).includes(key),
  );
  if (unknown.length > 0) {
    throw new UsageError(
      `Expected server ${at} to have only ${(http ? HTTP_KEYS : STDIO_KEYS).map((key) => `\`${key}\``).join(', ')}, got ${unknown.map((key) => `\`${key}\``).join(', ')}`,
    );
  }
  const expand = (text: string, field: string) =>
    expandVariables(text, `\`${field}\` of server ${at}`, env);
  const common = {
    ...whole(entry, 'maxConcurrency', at, 1, 10_000),
    ...whole(entry, 'startTimeoutMs', at, 1, 2 ** 31 - 1),
    ...whole(entry, 'toolTimeoutMs', at, 1, 2 ** 31 - 1),
  };
  if (http) {
    const url = expand(text(entry.url, 'url', at), 'url');
    if (!/^https?:\/\//.test(url))
      throw new UsageError(
        `Expected \`url\` of server ${at} to be an http:// or https:// URL once \`\${VAR}\` is expanded, got one that starts with neither (not shown: it may hold a secret)`,
      );
    const headers = strings(entry.headers, 'headers', at, expand);
    return { type: 'http', url, ...(headers ? { headers } : {}), ...common };
  }
  const command = expand(text(entry.command, 'command', at), 'command');
  const args =
    entry.args === undefined
      ? undefined
      : checkArgs(entry.args, at).map((arg) => expand(arg, 'args'));
  const environment = strings(entry.env, 'env', at, expand);
  const cwd = entry.cwd === undefined ? undefined : expand(text(entry.cwd, 'cwd', at), 'cwd');
  return {
    type: 'stdio',
    command,
    ...(args ? { args } : {}),
    ...(environment ? { env: environment } : {}),
    ...(cwd === undefined ? {} : { cwd }),
    ...common,
  };
}

function text(value: unknown, field: string, at: string): string {
  if (typeof value === 'string' && value.trim() !== '') return value;
  throw new UsageError(
    `Expected \`${field}\` of server ${at} to be a non-empty string, got ${typeof value === 'string' ? 'an empty one' : kindOf(value)}`,
  );
}

function checkArgs(value: unknown, at: string): string[] {
  if (Array.isArray(value) && value.every((arg) => typeof arg === 'string')) return value;
  throw new UsageError(
    Array.isArray(value)
      ? `Expected \`args\` of server ${at} to be an array of strings, got ${kindOf(value.find((arg) => typeof arg !== 'string'))} at \`args[${value.findIndex((arg) => typeof arg !== 'string')}]\``
      : `Expected \`args\` of server ${at} to be an array of strings, got ${kindOf(value)}`,
  );
}

/** An object of strings (`env`, `headers`), expanded. Its values are never shown. */
function strings(
  value: unknown,
  field: string,
  at: string,
  expand: (text: string, field: string) => string,
): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value))
    throw new UsageError(
      `Expected \`${field}\` of server ${at} to be an object of strings, got ${kindOf(value)}`,
    );
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== 'string') {
      throw new UsageError(
        `Expected \`${field}.${key}\` of server ${at} to be a string, got a ${item === null ? 'null' : typeof item}`,
      );
    }
    out[key] = expand(item, `${field}.${key}`);
  }
  return out;
}

function whole(
  entry: Record<string, unknown>,
  field: string,
  at: string,
  min: number,
  max: number,
): Record<string, number> {
  const value = entry[field];
  if (value === undefined) return {};
  if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max)
    return { [field]: value };
  throw new UsageError(
    `Expected \`${field}\` of server ${at} to be a whole number from ${min} to ${max}, got ${kindOf(value)}`,
  );
}

/**
 * What a value is, never what it holds: an entry's values may be secrets (an `env` or `headers`
 * value, an argument, a token in a URL), so messages name the entry and the field instead.
 */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return 'a string';
  if (typeof value === 'number' || typeof value === 'boolean')
    return `${typeof value} \`${value}\``;
  return `a ${typeof value}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
