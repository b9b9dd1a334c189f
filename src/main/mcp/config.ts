/** A server cohort starts as a child process and speaks to over its stdin and stdout. */
export interface McpStdioServer {
  type?: 'stdio';
  command: string;
  args?: string[];
  /** Set in its environment beside the few variables the SDK passes on (`PATH`, `HOME`, …). */
  env?: Record<string, string>;
  cwd?: string;
  /** Calls in flight on its connection at once (default 16); the others wait their turn. */
  maxConcurrency?: number;
  /** How long it may take to start and answer `initialize` and `tools/list`, in ms (default 30 s). */
  startTimeoutMs?: number;
  /** The time limit of each of its tools' calls, in ms (default: the engine's `toolTimeoutMs`). */
  toolTimeoutMs?: number;
}

/** A server cohort reaches over Streamable HTTP. */
export interface McpHttpServer {
  type: 'http';
  url: string;
  /** Sent with every request (an `Authorization` header, say). */
  headers?: Record<string, string>;
  maxConcurrency?: number;
  startTimeoutMs?: number;
  toolTimeoutMs?: number;
}

export type McpServerConfig = McpStdioServer | McpHttpServer;

/** MCP servers by name: the `mcpServers` object of a `.mcp.json` file. */
export type McpServerSet = Record<string, McpServerConfig>;

/** The MCP options of an engine (`EngineOptions`), already checked. */
export interface McpOptions {
  mcpServers?: McpServerSet | undefined;
  mcpConfig?: string[] | undefined;
}

/**
 * Whether an engine with these options has MCP servers to start. The SDK is loaded only then:
 * an engine without servers never imports it.
 */
export function hasMcpServers(options: McpOptions): boolean {
  return (options.mcpConfig ?? []).length > 0 || Object.keys(options.mcpServers ?? {}).length > 0;
}

export const DEFAULT_MCP_CONCURRENCY = 16;
export const DEFAULT_MCP_START_TIMEOUT_MS = 30_000;
