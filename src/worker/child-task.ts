import { threadId } from 'node:worker_threads';
import { runChild } from '../shared/child.js';
import { RemoteGate } from '../shared/governor/remote-gate.js';
import { type ChildTask, isMainMessage, type WorkerMessage } from '../shared/protocol.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import { Provider } from '../shared/provider/provider.js';
import type { CancelReason } from '../shared/result.js';
import { connectBridge } from './bridge-client.js';

// One client per provider config per thread: connections are pooled across the thread's children.
const providers = new Map<string, Provider>();

function providerFor(config: ProviderConfig): Provider {
  const key = JSON.stringify(config);
  let provider = providers.get(key);
  if (!provider) {
    provider = new Provider(config);
    providers.set(key, provider);
  }
  return provider;
}

/**
 * One piscina task = one child agent. Many run at once on this thread. The result goes back on
 * the child's port before the task resolves; cancel arrives on the same port.
 */
export default async function runChildTask(task: ChildTask): Promise<'settled'> {
  const { spec, port } = task;
  const bridge = task.bridge ? connectBridge(task.bridge, spec) : undefined;
  const controller = new AbortController();
  const post = (message: WorkerMessage) => port.postMessage(message);
  const gate = spec.governed ? new RemoteGate(post, spec.governed.patienceMs) : undefined;
  port.on('message', (message: unknown) => {
    if (!isMainMessage(message)) return;
    if (message.type === 'gov-admission') gate?.receive(message.id, message.admission);
    else if (!controller.signal.aborted) controller.abort(message.reason satisfies CancelReason);
  });
  post({ type: 'started', threadId });
  try {
    const result = await runChild(spec, {
      provider: providerFor(spec.provider),
      gate,
      signal: controller.signal,
      emit: (event) => post({ type: 'event', event }),
      onLocalTool: (phase, callId) =>
        post({ type: phase === 'enter' ? 'tool-enter' : 'tool-exit', callId }),
      ...(bridge ? { extraTools: bridge.tools } : {}),
      ...(bridge?.inbox ? { inbox: bridge.inbox } : {}),
    });
    post({ type: 'result', result });
  } finally {
    gate?.close();
    bridge?.release();
    port.close();
  }
  return 'settled';
}

/** A no-op task: running one per thread proves the pool warm. */
export function warm(): number {
  return threadId;
}
