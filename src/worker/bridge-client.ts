import type { MessagePort } from 'node:worker_threads';
import type { ChildSpec } from '../shared/child-spec.js';
import type { ChildInbox } from '../shared/loop/agent-loop.js';
import { defined } from '../shared/option-schema.js';
import {
  type BridgeRequest,
  type HostMethod,
  type HostMethods,
  isBridgeResponse,
  type SpawnRequest,
} from '../shared/protocol.js';
import { ToolContent } from '../shared/tools/content.js';
import { type AgentToolInput, spawnTools } from '../shared/tools/spawn-tools.js';
import { ToolTimeoutError, UNTIMED } from '../shared/tools/tool-timeout.js';
import type { AnyTool, ToolContext } from '../shared/tools/types.js';

/** A call into main that will not complete: the child was cancelled, or the bridge closed. */
export class BridgeCallError extends Error {
  readonly code: 'aborted' | 'bridge_closed';

  constructor(code: 'aborted' | 'bridge_closed', message: string) {
    super(message);
    this.name = 'BridgeCallError';
    this.code = code;
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/**
 * The worker end of a child's host bridge: typed calls into main, each raced with the child's
 * signal. An aborted call rejects at once and tells main to abort its side; when the port closes
 * (main shut the bridge, or is gone) every pending call rejects, so nothing waits forever.
 */
export class HostConnection {
  readonly #port: MessagePort;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed = false;

  constructor(port: MessagePort) {
    this.#port = port;
    port.on('message', (message: unknown) => {
      if (!isBridgeResponse(message)) return;
      const pending = this.#pending.get(message.id);
      if (!pending) return;
      this.#pending.delete(message.id);
      if (message.ok) pending.resolve(message.value);
      else pending.reject(new Error(message.failure.message));
    });
    port.once('close', () => this.#closeAll());
  }

  /** Calls `method` on main. Rejects with a BridgeCallError when `signal` aborts or the port closes. */
  call<M extends HostMethod>(
    method: M,
    input: HostMethods[M]['input'],
    signal: AbortSignal,
  ): Promise<HostMethods[M]['output']> {
    if (this.#closed) {
      return Promise.reject(new BridgeCallError('bridge_closed', 'the host bridge is closed'));
    }
    if (signal.aborted) {
      return Promise.reject(new BridgeCallError('aborted', 'the agent was cancelled'));
    }
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (!this.#pending.delete(id)) return;
        // Main stops its side too: a host tool's signal aborts, a sync grandchild is cancelled.
        this.#post({ type: 'abort', id });
        reject(new BridgeCallError('aborted', 'the agent was cancelled'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#pending.set(id, {
        resolve: (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value as HostMethods[M]['output']);
        },
        reject: (error) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
      this.#post({ type: 'call', id, method, input } as BridgeRequest);
    });
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Closes the port; pending calls reject. */
  close(): void {
    this.#port.close();
    this.#closeAll();
  }

  #post(message: BridgeRequest): void {
    if (!this.#closed) this.#port.postMessage(message);
  }

  #closeAll(): void {
    this.#closed = true;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const call of pending) {
      call.reject(new BridgeCallError('bridge_closed', 'the host bridge closed'));
    }
  }
}

export interface BridgeClient {
  /** Host tools and, when depth allows, the spawn family: all run on main. */
  tools: AnyTool[];
  inbox?: ChildInbox;
  release(): void;
}

/** The tools and inbox a child reaches through its host bridge. */
export function connectBridge(
  port: MessagePort,
  spec: ChildSpec,
  /**
   * Posts what the child has queued on its worker's uplink. Called before a spawn that names a
   * tool-call span, so main can read that span's `open` before it hangs the new child under it.
   */
  flushUplink: () => void = () => {},
): BridgeClient {
  const host = new HostConnection(port);
  const tools: AnyTool[] = (spec.hostTools ?? []).map((info) => ({
    name: info.name,
    description: info.description,
    inputSchema: info.inputSchema,
    ...defined({ parallel: info.parallel }),
    // Main times the host tool itself, so the tool's own signal says why it aborted.
    timeoutMs: UNTIMED,
    run: async (input: unknown, context) => {
      const outcome = await host.call('callTool', { name: info.name, input }, context.signal);
      if (!outcome.ok) {
        throw outcome.timedOut ? new ToolTimeoutError(outcome.error) : new Error(outcome.error);
      }
      return outcome.blocks ? new ToolContent(outcome.blocks) : outcome.text;
    },
  }));
  const spawns = spec.depth < spec.maxDepth;
  if (spawns) {
    tools.push(
      ...spawnTools(
        {
          runSync: (input, context) =>
            host.call('runSync', spawnRequest(input, context, flushUplink), context.signal),
          spawnAsync: (input, context) =>
            host.call('spawnAsync', spawnRequest(input, context, flushUplink), context.signal),
          list: (context) => host.call('list', null, context.signal),
          cancel: (id, context) => host.call('cancel', { id }, context.signal),
        },
        spec.agents,
      ),
    );
  }
  const inbox: ChildInbox = {
    // A cancelled child, or a closed bridge, has nothing more to take in.
    take: (signal) => host.call('takeInbox', null, signal).catch(() => []),
    waitForResult: (signal) => host.call('waitForResult', null, signal).catch(() => false),
  };
  return {
    tools,
    ...(spawns ? { inbox } : {}),
    release: () => host.close(),
  };
}

/**
 * A spawn as it crosses the bridge: the input, the calling tool call's id (the spawn's key), and
 * its span to hang the child under.
 */
function spawnRequest(
  input: AgentToolInput,
  context: ToolContext,
  flushUplink: () => void,
): SpawnRequest {
  const request: SpawnRequest = defined({ input, callId: context.callId });
  if (context.span === undefined) return request;
  flushUplink();
  return { ...request, span: context.span };
}
