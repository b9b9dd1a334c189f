/**
 * A `tools` selection (an agent file's, a task line's, a spawn's) names tools, and may name all
 * of one MCP server's tools at once: `mcp__NAME__*`.
 */
const SERVER_PATTERN = /^mcp__[a-zA-Z0-9_-]+__\*$/;

/** An MCP server's tool: `mcp__NAME__TOOL`, 1-128 of what a provider takes as a tool's name. */
const MCP_TOOL_NAME = /^mcp__[a-zA-Z0-9_-]{1,123}$/;

/** Whether `entry` may name an MCP server's tool, longer than the 64 characters of other tools. */
export function isMcpToolName(entry: string): boolean {
  return MCP_TOOL_NAME.test(entry);
}

/** Whether `entry` is `mcp__NAME__*`. */
export function isServerPattern(entry: string): boolean {
  return SERVER_PATTERN.test(entry) && !entry.slice(5, -3).includes('__');
}

/**
 * The server of an MCP tool's name, `mcp__NAME__TOOL`: what comes before the first `__` after
 * `mcp__`. A server's name has no `__` and neither starts nor ends with `_`, so this is exact
 * even when the tool's name starts with `_` (`mcp__a___x` is server `a`'s tool `_x`).
 */
function serverOf(name: string): string | undefined {
  if (!name.startsWith('mcp__')) return undefined;
  const end = name.indexOf('__', 5);
  return end > 5 ? name.slice(5, end) : undefined;
}

/** Whether a selection entry picks the tool `name`: the name itself, or its server's pattern. */
export function entryPicks(entry: string, name: string): boolean {
  return entry === name || (isServerPattern(entry) && serverOf(name) === entry.slice(5, -3));
}

/** Whether a selection picks the tool `name`. */
export function selectionPicks(selection: readonly string[], name: string): boolean {
  return selection.some((entry) => entryPicks(entry, name));
}

/** The entries of a selection that pick none of `known`. */
export function unknownEntries(selection: readonly string[], known: readonly string[]): string[] {
  return selection.filter((entry) => !known.some((name) => entryPicks(entry, name)));
}
