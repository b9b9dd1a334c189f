import type { MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import type { ChildSpec } from '../shared/child-spec.js';
import type { ChildInbox } from '../shared/loop/agent-loop.js';
import { spawnTools } from '../shared/tools/spawn-tools.js';
import type { AnyTool } from '../shared/tools/types.js';

/** The main-thread API as the worker sees it (mirrors HostApi in src/main/host-bridge.ts). */
interface RemoteHost {
  callTool(
    name: string,
    input: unknown,
  ): Promise<{ ok: true; text: string } | { ok: false; error: string }>;
  runSync(input: unknown): Promise<string>;
  spawnAsync(
    input: unknown,
  ): Promise<{ id: string; title: string; status: 'started'; logDir: string }>;
  list(): Promise<
    { id: string; title: string; status: 'queued' | 'running'; logDir: string; elapsedMs: number }[]
  >;
  cancel(id: string): Promise<{ id: string; wasLive: boolean }>;
  drain(): Promise<import('../shared/provider/types.js').ContentBlockParam[]>;
  waitForResult(): Promise<boolean>;
}

export interface BridgeClient {
  tools: AnyTool[];
  inbox?: ChildInbox;
  release(): void;
}

/** Rejects when the signal aborts, so a call into main never outlives a cancelled child. */
function raced<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error('cancelled'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** The worker end of a child's host bridge: host tools, the spawn family and the child inbox. */
export function connectBridge(port: MessagePort, spec: ChildSpec): BridgeClient {
  const remote = Comlink.wrap<RemoteHost>(port) as unknown as RemoteHost & {
    [Comlink.releaseProxy](): void;
  };
  const tools: AnyTool[] = (spec.hostTools ?? []).map((info) => ({
    name: info.name,
    description: info.description,
    inputSchema: info.inputSchema,
    ...(info.parallel === undefined ? {} : { parallel: info.parallel }),
    run: async (input: unknown, context) => {
      const outcome = await raced(remote.callTool(info.name, input), context.signal);
      if (!outcome.ok) throw new Error(outcome.error);
      return outcome.text;
    },
  }));
  const spawns = spec.depth < spec.maxDepth;
  if (spawns) {
    tools.push(
      ...spawnTools({
        runSync: (input, context) => raced(remote.runSync(input), context.signal),
        spawnAsync: (input) => remote.spawnAsync(input),
        list: () => remote.list(),
        cancel: (id) => remote.cancel(id),
      }),
    );
  }
  return {
    tools,
    ...(spawns
      ? {
          inbox: {
            drain: () => remote.drain(),
            waitForResult: (signal: AbortSignal) =>
              raced(remote.waitForResult(), signal).catch(() => false),
          },
        }
      : {}),
    release: () => {
      remote[Comlink.releaseProxy]();
      port.close();
    },
  };
}
