import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { internalFailure } from '../shared/failure.js';
import { defined } from '../shared/option-schema.js';
import {
  type BridgeRequest,
  type BridgeResponse,
  type HostMethod,
  type HostMethods,
  type HostToolOutcome,
  isBridgeRequest,
} from '../shared/protocol.js';
import { redactSecrets } from '../shared/redact.js';
import { renderValue } from '../shared/render.js';
import { ToolContent } from '../shared/tools/content.js';
import { runTimed, toolLimitMs, toolTimeoutText } from '../shared/tools/tool-timeout.js';
import type { AnyTool, ToolContext } from '../shared/tools/types.js';
import { renderInbox } from './inbox.js';
import type { AgentScope } from './scope.js';

/** The abort reason of a call whose bridge went with its worker: nothing of it is cancelled. */
export const DETACHED = 'detached';

type Handlers = {
  [M in HostMethod]: (
    input: HostMethods[M]['input'],
    signal: AbortSignal,
  ) => HostMethods[M]['output'] | Promise<HostMethods[M]['output']>;
};

/**
 * The main-thread end of one child's host bridge. Host tools run here, and a child that may
 * spawn owns an `AgentScope` one level down (the same rules as the root's).
 *
 * Every call gets its own AbortController: the worker aborts it when the child is cancelled
 * while waiting (a host tool's signal fires, a sync grandchild is cancelled `parent`).
 * `shutdown` ends the bridge after the child settled, or when its worker died (the port's
 * `close`): calls in flight are aborted, the child's own agents are cancelled, the port closes.
 */
export class HostBridge {
  /** The end to transfer to the worker. */
  readonly workerPort: MessagePort;
  readonly #port: MessagePort;
  readonly #scope: AgentScope | undefined;
  readonly #calls = new Map<number, AbortController>();
  #closed = false;

  constructor(options: {
    hostTools: ReadonlyMap<string, AnyTool>;
    /** The child's own agents; only for a child that may spawn. */
    scope?: AgentScope;
    agentId: string;
    depth: number;
    /** The time limit of a host tool that sets none (`toolTimeoutMs`); default ten minutes. */
    toolTimeoutMs?: number | undefined;
    /** The spawn's `context`, which its host tools get as `ToolContext.context`. */
    context?: unknown;
  }) {
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    this.workerPort = port2;
    this.#scope = options.scope;
    const toolContext = options.context;
    const context = (signal: AbortSignal): ToolContext =>
      toolContext === undefined
        ? { signal, agentId: options.agentId, depth: options.depth }
        : { signal, agentId: options.agentId, depth: options.depth, context: toolContext };
    const scope = (): AgentScope => {
      if (!this.#scope) throw new Error('this agent may not spawn agents');
      return this.#scope;
    };
    const handlers: Handlers = {
      callTool: ({ name, input }, signal) => {
        const tool = options.hostTools.get(name);
        if (!tool) return { ok: false, error: `no host tool named \`${name}\`` };
        return callHostTool(tool, input, context(signal), options.toolTimeoutMs);
      },
      runSync: ({ input, span, callId }, signal) =>
        scope().runSync(input, { ...context(signal), ...defined({ span, callId }) }),
      spawnAsync: ({ input, span, callId }, signal) =>
        scope().spawnAsync(input, { ...context(signal), ...defined({ span, callId }) }),
      list: () => scope().list(),
      cancel: ({ id }) => scope().cancel(id),
      takeInbox: () => {
        const pending = scope().takeInbox();
        return pending.length === 0 ? [] : renderInbox(pending);
      },
      waitForResult: (_input, signal) => scope().waitForResult(signal),
    };
    port1.on('message', (message: unknown) => {
      if (isBridgeRequest(message)) this.#onRequest(message, handlers);
    });
    // The worker died or closed its end: its calls in flight are aborted. The child's own
    // agents live on: the child resumes elsewhere and finds them again (`detach`).
    port1.once('close', () => this.detach());
  }

  #onRequest(request: BridgeRequest, handlers: Handlers): void {
    if (request.type === 'abort') {
      this.#calls.get(request.id)?.abort('parent');
      return;
    }
    const controller = new AbortController();
    if (this.#closed) controller.abort('parent');
    this.#calls.set(request.id, controller);
    const handler = handlers[request.method] as (
      input: unknown,
      signal: AbortSignal,
    ) => unknown | Promise<unknown>;
    Promise.resolve()
      .then(() => handler(request.input, controller.signal))
      .then(
        (value) => this.#reply({ type: 'return', id: request.id, ok: true, value }),
        (error: unknown) => {
          const failure = internalFailure(error);
          failure.message = redactSecrets(failure.message);
          this.#reply({ type: 'return', id: request.id, ok: false, failure });
        },
      )
      .finally(() => this.#calls.delete(request.id));
  }

  #reply(response: BridgeResponse): void {
    if (!this.#closed) this.#port.postMessage(response);
  }

  /**
   * Ends this bridge, for a child whose worker died: its calls in flight are aborted (with
   * `DETACHED`: a sync agent it waited on is not cancelled), and its scope stays open for the
   * bridge of its resumed run.
   */
  detach(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const controller of this.#calls.values()) controller.abort(DETACHED);
    this.#port.close();
  }

  /**
   * Ends the bridge of a child that settled. Calls in flight are aborted, the child's own agents
   * are cancelled with reason `parent`; resolves when each of them has its result.
   */
  async shutdown(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      for (const controller of this.#calls.values()) controller.abort('parent');
      this.#port.close();
    }
    await this.#scope?.close('parent');
  }
}

/**
 * Runs one host tool call for a child, within its time limit (its `timeoutMs`, else the engine's
 * `toolTimeoutMs`; `runTimed`). Past it the tool's signal aborts with a `TimeoutError` naming the
 * tool and the limit, and the child gets the timeout as its `is_error` result at once, whether or
 * not the tool stops: what it returns later is dropped. The child's cancel aborts the same signal.
 */
async function callHostTool(
  tool: AnyTool,
  input: unknown,
  context: ToolContext,
  fallbackMs: number | undefined,
): Promise<HostToolOutcome> {
  const limitMs = toolLimitMs(tool, fallbackMs);
  const callSignal = context.signal;
  const ended = await runTimed(tool, input, context, limitMs, [
    { signal: callSignal, reason: () => callSignal.reason },
  ]);
  switch (ended.kind) {
    case 'value':
      return ended.value instanceof ToolContent
        ? { ok: true, text: '', blocks: ended.value.blocks }
        : { ok: true, text: renderValue(ended.value) };
    case 'threw': {
      const error = ended.error;
      return {
        ok: false,
        error: redactSecrets(error instanceof Error ? error.message : String(error)),
      };
    }
    case 'timeout':
      return { ok: false, error: toolTimeoutText(tool.name, limitMs), timedOut: true };
    case 'stopped':
      return { ok: false, error: 'the call was aborted' };
  }
}
