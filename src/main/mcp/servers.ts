import { UsageError } from '../../shared/errors.js';
import { registerSecret } from '../../shared/redact.js';
import type { AnyTool } from '../../shared/tools/types.js';
import type { McpServerConfig, McpServerSet } from './config.js';
import type { ServerSources } from './config-file.js';
import { McpConnection } from './connection.js';
import { mcpTools } from './tools.js';

/**
 * The MCP servers of one engine, started once on the main thread: one connection each, their
 * tools as host tools. Agents on every thread share the connections through their host bridges.
 */
export class McpServers {
  readonly #connections: McpConnection[];
  /** Every server's tools, `mcp__NAME__TOOL`, in the order of the servers. */
  readonly tools: readonly AnyTool[];
  /** Where each tool came from, for the engine's messages about tool names. */
  readonly toolSources: readonly { name: string; from: string }[];
  #closing: Promise<void> | undefined;

  private constructor(
    connections: McpConnection[],
    tools: AnyTool[],
    sources: { name: string; from: string }[],
  ) {
    this.#connections = connections;
    this.tools = tools;
    this.toolSources = sources;
  }

  /**
   * Starts every server side by side, initialises it and lists its tools. When one cannot, all
   * are closed and a UsageError names it and its source: nothing runs on a partial set.
   */
  static async start(servers: McpServerSet, sources: ServerSources = {}): Promise<McpServers> {
    const entries = Object.entries(servers);
    for (const [, config] of entries) registerSecrets(config);
    const connections = entries.map(([name, config]) => new McpConnection(name, config));
    const where = (name: string) => `\`${name}\`${sources[name] ? ` (in ${sources[name]})` : ''}`;
    const started = await Promise.allSettled(connections.map((connection) => connection.start()));
    const failedAt = started.findIndex((outcome) => outcome.status === 'rejected');
    try {
      if (failedAt >= 0) {
        const name = connections[failedAt]?.name ?? '';
        const reason = (started[failedAt] as PromiseRejectedResult).reason as Error;
        throw new UsageError(
          `Expected MCP server ${where(name)} to start and list its tools, but ${reason.message}`,
        );
      }
      const tools: AnyTool[] = [];
      const toolSources: { name: string; from: string }[] = [];
      connections.forEach((connection, index) => {
        const listed = (
          started[index] as PromiseFulfilledResult<Awaited<ReturnType<McpConnection['start']>>>
        ).value;
        for (const tool of mcpTools(
          connection,
          listed,
          where(connection.name),
          servers[connection.name]?.toolTimeoutMs,
        )) {
          tools.push(tool);
          toolSources.push({ name: tool.name, from: `MCP server ${where(connection.name)}` });
        }
      });
      return new McpServers(connections, tools, toolSources);
    } catch (error) {
      await Promise.all(connections.map((connection) => connection.close()));
      throw error;
    }
  }

  /** The connection to one server, by name. */
  connection(name: string): McpConnection | undefined {
    return this.#connections.find((connection) => connection.name === name);
  }

  /** Closes every server; a stdio server's process is ended (stdin closed, then signals). */
  close(): Promise<void> {
    this.#closing ??= Promise.all(this.#connections.map((connection) => connection.close())).then(
      () => {},
    );
    return this.#closing;
  }
}

/** A server's `env` and `headers` values are removed from every text main sends anywhere. */
function registerSecrets(config: McpServerConfig): void {
  const values =
    config.type === 'http' ? Object.values(config.headers ?? {}) : Object.values(config.env ?? {});
  for (const value of values) {
    registerSecret(value);
    // `Bearer TOKEN`: the token alone may show up too.
    const token = value.split(/\s+/).at(-1);
    if (token !== undefined && token !== value) registerSecret(token);
  }
}
