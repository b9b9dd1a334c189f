import type { MessagePort } from 'node:worker_threads';
import type { ChildSpec } from '../../../shared/child-spec.js';
import type { AnyTool } from '../../../shared/tools/types.js';
import { HostBridge } from '../../host-bridge.js';
import { hasMcpServers } from '../../mcp/config.js';
import type { McpServers } from '../../mcp/servers.js';

/**
 * The MCP servers of one `cohort worker`, started from its own `mcpConfig` files: its jobs'
 * children reach them through host bridges made here, as an engine's children reach its servers.
 * A job whose producer listed tools this worker lacks gets an `is_error` result for each call.
 */
export class WorkerTools {
  readonly #servers: McpServers | undefined;
  readonly #tools: ReadonlyMap<string, AnyTool>;

  private constructor(servers: McpServers | undefined) {
    this.#servers = servers;
    this.#tools = new Map((servers?.tools ?? []).map((tool) => [tool.name, tool]));
  }

  /** Starts the servers of `mcpConfig` (none: nothing starts). Throws a UsageError naming one that cannot. */
  static async start(options: { mcpConfig?: string[] | undefined }): Promise<WorkerTools> {
    if (!hasMcpServers(options)) return new WorkerTools(undefined);
    const { startEngineServers } = await import('../../mcp/engine-servers.js');
    return new WorkerTools(await startEngineServers(options));
  }

  /**
   * A bridge maker for a job's child whose spec advertises host tools (its producer's MCP
   * tools), and the bridge's shutdown for when it settles; undefined when it needs none.
   */
  bridgeFor(
    spec: ChildSpec,
  ): { make: () => MessagePort; shutdown: () => Promise<void> } | undefined {
    if ((spec.hostTools ?? []).length === 0) return undefined;
    let bridge: HostBridge | undefined;
    return {
      make: () => {
        // A resumed child gets a fresh bridge: the old one went with its worker thread.
        bridge?.detach();
        bridge = new HostBridge({
          hostTools: this.#tools,
          agentId: spec.id,
          depth: spec.depth,
          toolTimeoutMs: spec.toolTimeoutMs,
        });
        return bridge.workerPort;
      },
      shutdown: async () => bridge?.shutdown(),
    };
  }

  close(): Promise<void> {
    return this.#servers?.close() ?? Promise.resolve();
  }
}
