import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { McpServerConfig } from './config.js';
import { StdioServerTransport } from './stdio-transport.js';

/** How much of a stdio server's stderr is kept, for the message when it fails to start. */
const STDERR_TAIL = 2_000;

/** A transport to one server, and what its stderr said last (stdio only). */
export interface ServerTransport {
  transport: Transport;
  /** The last lines the server wrote on stderr; never printed as they come (they may hold its env). */
  stderrTail(): string;
  /** The server's process id (stdio), once started. */
  pid(): number | undefined;
}

/**
 * The transport for an entry: a child process over stdio in a process group of its own (its
 * stderr piped and kept, not inherited; `stdio-transport.ts`), or the official SDK's Streamable
 * HTTP with the entry's headers on every request.
 */
export function serverTransport(config: McpServerConfig): ServerTransport {
  if (config.type === 'http') {
    const transport = new StreamableHTTPClientTransport(new URL(config.url), {
      ...(config.headers ? { requestInit: { headers: config.headers } } : {}),
    });
    return { transport, stderrTail: () => '', pid: () => undefined };
  }
  let tail = '';
  // Read at once, so a chatty server never blocks on a full pipe.
  const transport = new StdioServerTransport({
    command: config.command,
    args: config.args,
    env: config.env,
    cwd: config.cwd,
    onStderr: (chunk) => {
      tail = (tail + chunk.toString('utf8')).slice(-STDERR_TAIL);
    },
  });
  return {
    transport,
    stderrTail: () => tail.trim(),
    pid: () => transport.pid,
  };
}
