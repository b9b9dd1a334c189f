/**
 * A `tools` selection (an agent file's, a task line's, a spawn's) names tools, and may name all
 * of one MCP server's tools at once: `mcp__NAME__*`.
 */
const SERVER_PATTERN = /^mcp__[a-zA-Z0-9_-]+__\*$/;

/** Whether `entry` is `mcp__NAME__*`. */
export function isServerPattern(entry: string): boolean {
  return SERVER_PATTERN.test(entry) && !entry.slice(5, -3).includes('__');
}

/** Whether a selection entry picks the tool `name`: the name itself, or its server's pattern. */
export function entryPicks(entry: string, name: string): boolean {
  return entry === name || (isServerPattern(entry) && name.startsWith(entry.slice(0, -1)));
}

/** Whether a selection picks the tool `name`. */
export function selectionPicks(selection: readonly string[], name: string): boolean {
  return selection.some((entry) => entryPicks(entry, name));
}

/** The entries of a selection that pick none of `known`. */
export function unknownEntries(selection: readonly string[], known: readonly string[]): string[] {
  return selection.filter((entry) => !known.some((name) => entryPicks(entry, name)));
}
