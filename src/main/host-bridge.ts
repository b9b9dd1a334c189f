import { MessageChannel, type MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import type { ContentBlockParam } from '../shared/provider/types.js';
import { redactSecrets } from '../shared/redact.js';
import { renderValue } from '../shared/render.js';
import type { AgentResult, CancelReason } from '../shared/result.js';
import { outcomeTag } from '../shared/result.js';
import type { AgentInfo, AgentReceipt, AgentToolInput } from '../shared/tools/spawn-tools.js';
import type { AnyTool } from '../shared/tools/types.js';
import { renderInbox } from './inbox.js';
import type { ChildHandle } from './pool.js';
import { AgentRegistry } from './registry.js';

/** The result of a host tool call as it crosses back to the worker: data, never an Error. */
export type BridgeToolResult = { ok: true; text: string } | { ok: false; error: string };

/** What a child in a worker may call on the main thread, through comlink. */
export interface HostApi {
  callTool(name: string, input: unknown): Promise<BridgeToolResult>;
  runSync(input: AgentToolInput): Promise<string>;
  spawnAsync(input: AgentToolInput): AgentReceipt;
  list(): AgentInfo[];
  cancel(id: string): { id: string; wasLive: boolean };
  drain(): ContentBlockParam[];
  waitForResult(): Promise<boolean>;
}

/** How the bridge spawns: the engine's spawn, bound to this child's place in the tree. */
export type BridgeSpawn = (input: AgentToolInput, mode: 'sync' | 'async') => ChildHandle;

/**
 * The main-thread end of one child's host bridge: host tools run here, and a child that may
 * spawn gets its own registry and inbox one level down (the same rules as the session's).
 * `shutdown` ends it: host work in flight is aborted, grandchildren are cancelled with reason
 * `parent`, proxies are released and the port is closed. It also happens if the worker dies.
 */
export class HostBridge {
  /** The end to transfer to the worker. */
  readonly workerPort: MessagePort;
  readonly #port: MessagePort;
  readonly #work = new AbortController();
  readonly #children = new Map<string, ChildHandle>();
  readonly #live = new AgentRegistry();
  readonly #inbox: AgentResult[] = [];
  #wakers: ((pending: boolean) => void)[] = [];
  #closed = false;

  constructor(options: {
    hostTools: ReadonlyMap<string, AnyTool>;
    spawn: BridgeSpawn;
    agentId: string;
    depth: number;
    /** Lifetime ceiling of this child's async agents, in ms. */
    ceilingMs: number;
    logDirOf: (id: string) => string;
  }) {
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    this.workerPort = port2;
    const api: HostApi = {
      callTool: async (name, input) => {
        const tool = options.hostTools.get(name);
        if (!tool) return { ok: false, error: `no host tool named \`${name}\`` };
        try {
          const value = await tool.run(input, {
            signal: this.#work.signal,
            agentId: options.agentId,
            depth: options.depth,
          });
          return { ok: true, text: renderValue(value) };
        } catch (error) {
          return {
            ok: false,
            error: redactSecrets(error instanceof Error ? error.message : String(error)),
          };
        }
      },
      runSync: async (input) => {
        const handle = this.#track(options.spawn(input, 'sync'));
        const result = await handle.result;
        return result.text !== '' ? result.text : outcomeTag(result);
      },
      spawnAsync: (input) => {
        const handle = this.#track(options.spawn(input, 'async'));
        const logDir = options.logDirOf(handle.id);
        this.#live.add(handle, {
          logDir,
          ceilingMs: options.ceilingMs,
          onSettle: (result) => {
            if (this.#closed) return;
            this.#inbox.push(result);
            this.#wake();
          },
        });
        return { id: handle.id, title: handle.title, status: 'started', logDir };
      },
      list: () => this.#live.list(),
      cancel: (id) => this.#live.cancel(id),
      drain: () => {
        const pending = this.#inbox.splice(0);
        return pending.length === 0 ? [] : renderInbox(pending);
      },
      waitForResult: () => {
        if (this.#inbox.length > 0) return Promise.resolve(true);
        if (this.#live.size === 0 || this.#closed) return Promise.resolve(false);
        return new Promise((resolve) => this.#wakers.push(resolve));
      },
    };
    Comlink.expose(api, port1);
    // The worker died or closed its end: nothing may keep running on its behalf.
    port1.once('close', () => this.shutdown('parent'));
  }

  #track(handle: ChildHandle): ChildHandle {
    this.#children.set(handle.id, handle);
    void handle.result.then(() => this.#children.delete(handle.id));
    if (this.#closed) handle.cancel('parent');
    return handle;
  }

  #wake(): void {
    const wakers = this.#wakers.splice(0);
    for (const wake of wakers) wake(this.#inbox.length > 0);
  }

  /** Ends the bridge; its grandchildren are cancelled with `reason` (default `parent`). */
  shutdown(reason: CancelReason = 'parent'): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#work.abort(reason);
    for (const handle of this.#children.values()) handle.cancel(reason);
    this.#wake();
    this.#port.close();
  }
}
