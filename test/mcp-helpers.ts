import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { McpStdioServer } from '../src/main/mcp/config.js';
import type { MessageParam, ToolResultBlock } from '../src/shared/provider/types.js';
import { contentBlocks, tempDir } from './helpers.js';

/**
 * How long a test waits for a state it polls (a process started, a call cancelled, a server back):
 * long enough for a loaded machine, and no test's figure depends on it.
 */
export const PATIENCE = { timeout: 20_000, interval: 50 };

/** The MCP server of the tests, written with the official SDK (test/fixtures/mcp-server.mjs). */
export const MCP_FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

/** A stdio entry for the fixture server, with its own log file of starts and cancels. */
export function fixtureEntry(extra: Partial<McpStdioServer> = {}): {
  entry: McpStdioServer;
  log: string;
} {
  const log = path.join(tempDir('cohort-mcp-log-'), 'server.jsonl');
  return {
    entry: {
      type: 'stdio',
      command: process.execPath,
      args: [MCP_FIXTURE],
      ...extra,
      env: { MCP_FIXTURE_LOG: log, ...extra.env },
    },
    log,
  };
}

/** The records the fixture appended to its log: `{pid, event}`. */
export function fixtureLog(log: string): { pid: number; event: string }[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { pid: number; event: string });
}

/** The tool results of a transcript, in order. */
export function toolResults(transcript: MessageParam[]): ToolResultBlock[] {
  return transcript.flatMap((message) =>
    message.role !== 'user'
      ? []
      : contentBlocks(message).flatMap((block) => (block.type === 'tool_result' ? [block] : [])),
  );
}

/** A tool result's text: its string, or its text blocks joined. */
export function resultText(result: ToolResultBlock): string {
  const content = result.content;
  if (typeof content === 'string' || content === undefined) return content ?? '';
  return content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('\n');
}

/**
 * Whether a process still runs. A zombie does not: one whose parent exited is handed to pid 1,
 * which in a container may never reap it.
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // `PID (NAME) STATE …`: the state follows the name's closing parenthesis.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** Every file under a folder, read as text: for a secret that must be in none of them. */
export function allText(folder: string): string {
  return readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => readFileSync(path.join(entry.parentPath, entry.name), 'utf8'))
    .join('\n');
}
