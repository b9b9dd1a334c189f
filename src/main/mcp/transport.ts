import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { redactSecrets } from '../../shared/redact.js';
import type { McpServerConfig } from './config.js';
import { StdioServerTransport } from './stdio-transport.js';

/** How much of a stdio server's stderr goes into the message when it fails to start. */
const STDERR_TAIL = 2_000;
/** How much of it is kept to take that from: whole lines, with room to redact before cutting. */
const STDERR_KEPT = 4 * STDERR_TAIL;

/** A transport to one server, and what its stderr said last (stdio only). */
export interface ServerTransport {
  transport: Transport;
  /** The last lines the server wrote on stderr, redacted; never printed as they come (they may hold its env). */
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
  let kept = '';
  let cut = false;
  // Read at once, so a chatty server never blocks on a full pipe.
  const transport = new StdioServerTransport({
    command: config.command,
    args: config.args,
    env: config.env,
    cwd: config.cwd,
    onStderr: (chunk) => {
      kept += chunk.toString('utf8');
      if (kept.length > STDERR_KEPT) {
        kept = kept.slice(-STDERR_KEPT);
        cut = true;
      }
    },
  });
  return {
    transport,
    stderrTail: () => stderrTail(kept, cut),
    pid: () => transport.pid,
  };
}

/**
 * The end of a server's stderr, its secrets redacted. Text cut anywhere may hold half a secret,
 * which redaction cannot know: what was kept starts at a whole line, and the tail is cut only
 * once redacted.
 */
function stderrTail(kept: string, cut: boolean): string {
  const whole = cut ? kept.slice(kept.indexOf('\n') + 1 || kept.length) : kept;
  const redacted = redactSecrets(whole).trim();
  if (redacted.length <= STDERR_TAIL) return redacted;
  const tail = redacted.slice(-STDERR_TAIL);
  const lineStart = tail.indexOf('\n');
  return lineStart >= 0 ? tail.slice(lineStart + 1) : tail;
}
