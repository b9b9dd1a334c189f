import { hasMcpServers, type McpOptions, type McpServerSet } from './config.js';
import { checkMcpServers } from './config-check.js';
import { mergeServerSets, readMcpConfigFile, type ServerSources } from './config-file.js';
import { McpServers } from './servers.js';

/**
 * Every server of an engine: its `mcpServers`, then each `mcpConfig` file's, read and checked
 * now (`${VAR}` expanded from the environment of this moment). A name given twice is refused.
 */
export function engineServerSet(options: McpOptions): {
  servers: McpServerSet;
  sources: ServerSources;
} {
  const sets = [
    // Checked again to be normalised: each entry's `type` set, `${VAR}` expanded now.
    ...(options.mcpServers
      ? [{ servers: checkMcpServers(options.mcpServers, '`mcpServers`'), from: '`mcpServers`' }]
      : []),
    ...(options.mcpConfig ?? []).map((file) => ({
      servers: readMcpConfigFile(file),
      from: `\`${file}\``,
    })),
  ];
  return mergeServerSets(sets);
}

/** Starts an engine's MCP servers (`McpServers.start`), or resolves undefined when it has none. */
export async function startEngineServers(options: McpOptions): Promise<McpServers | undefined> {
  if (!hasMcpServers(options)) return undefined;
  const { servers, sources } = engineServerSet(options);
  return McpServers.start(servers, sources);
}
