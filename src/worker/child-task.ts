import { setMaxListeners } from 'node:events';
import { threadId } from 'node:worker_threads';
import { BudgetMeter } from '../shared/budget-meter.js';
import { runChild } from '../shared/child.js';
import { RemoteGate } from '../shared/governor/remote-gate.js';
import { closeJournals } from '../shared/journal/writer.js';
import { RemoteLane } from '../shared/lane/remote-lane.js';
import type { BatchEnds, ChildBatch, ChildTask, WorkerMessage } from '../shared/protocol.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import { Provider } from '../shared/provider/provider.js';
import { registerSecret } from '../shared/redact.js';
import type { CancelReason } from '../shared/result.js';
import { TraceRecorder } from '../shared/trace/recorder.js';
import { connectBridge } from './bridge-client.js';
import { threadUplink } from './uplink.js';

/** Children running on this thread now. */
let live = 0;

// One client per provider config (and key) per thread: connections are pooled across the
// thread's children. The map's keys hold API keys given in code; they never leave this thread.
const providers = new Map<string, Provider>();

function providerFor(config: ProviderConfig, apiKey: string | undefined): Provider {
  const key =
    apiKey === undefined ? JSON.stringify(config) : `${JSON.stringify(config)}\n${apiKey}`;
  let provider = providers.get(key);
  if (!provider) {
    provider = new Provider(config, apiKey);
    providers.set(key, provider);
  }
  return provider;
}

/**
 * One piscina task = the children main handed this thread in one turn. Each runs on its own, as
 * if it were a task of its own; the task ends when the last one has, with how each ended.
 */
export default function runChildBatch(batch: ChildBatch): Promise<BatchEnds> {
  return Promise.all(
    batch.map((task) =>
      runChildTask(task).then(
        () => null,
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      ),
    ),
  );
}

/**
 * One child agent; many run at once on this thread. Everything the child says goes to main on
 * the thread's uplink, tagged with its id, and its result is posted there before its run ends
 * (main reads what is left there when the batch's task ends); cancel and governor admissions come
 * back the same way.
 */
async function runChildTask(task: ChildTask): Promise<'settled'> {
  const uplink = threadUplink();
  await uplink.ready;
  const { spec } = task;
  const apiKey = task.private?.apiKey;
  // Before anything of the child runs: its journal, events and result are redacted of its key.
  if (apiKey !== undefined) registerSecret(apiKey);
  const bridge = task.bridge ? connectBridge(task.bridge, spec, () => uplink.flush()) : undefined;
  const controller = new AbortController();
  // Each call of a batch in flight listens to it, and a batch of parallel tools (an MCP server's
  // are) may hold more than Node's default 10 at once: each listener goes when its call ends.
  setMaxListeners(0, controller.signal);
  const send = (message: WorkerMessage) => uplink.send(spec.id, message);
  const gate = spec.governed ? new RemoteGate(send, spec.governed.patienceMs) : undefined;
  const lane =
    spec.lane === undefined ? undefined : new RemoteLane(providerFor(spec.provider, apiKey), send);
  // A meter only for a child with a budget: its own limits, or a tree's that main watches.
  const budget =
    spec.budget || spec.inTree
      ? new BudgetMeter({
          ...(spec.budget ? { budget: spec.budget } : {}),
          ...(spec.inTree ? { onSpend: (spend) => send({ type: 'spend', spend }) } : {}),
        })
      : undefined;
  const trace = spec.traced ? new TraceRecorder((op) => send({ type: 'trace', op })) : undefined;
  const leave = uplink.join(spec.id, (message) => {
    if (message.type === 'gov-admission') gate?.receive(message.id, message.admission);
    else if (message.type === 'lane-answer') lane?.receive(message.id, message.result);
    else if (message.type === 'lane-realtime') lane?.realtime(message.id);
    else if (message.type === 'budget-spent') budget?.treeSpent(message.which);
    else if (!controller.signal.aborted) controller.abort(message.reason satisfies CancelReason);
  });
  send({ type: 'started', threadId });
  live++;
  try {
    const result = await runChild(spec, {
      provider: lane ?? providerFor(spec.provider, apiKey),
      gate,
      signal: controller.signal,
      emit: (event) => send({ type: 'event', event }),
      onLocalTool: (phase, call, limitMs) => {
        // A timed call's limit goes with its enter: main's watchdog ends this thread if the call
        // blocks it past that limit and the grace.
        send(
          phase === 'exit'
            ? { type: 'tool-exit', callId: call.id }
            : limitMs !== undefined && Number.isFinite(limitMs)
              ? { type: 'tool-enter', callId: call.id, tool: call.name, timeoutMs: limitMs }
              : { type: 'tool-enter', callId: call.id },
        );
        // Posted before the tool's code runs (or anything after its end): if that code takes
        // the worker down, main must be able to read who was in a tool.
        uplink.flush();
      },
      ...(bridge ? { extraTools: bridge.tools } : {}),
      ...(bridge?.inbox ? { inbox: bridge.inbox } : {}),
      budget,
      trace,
      ...(spec.checkpoint ? { checkpoint: (write) => send({ type: 'checkpoint', ...write }) } : {}),
      ...(task.private && 'context' in task.private ? { context: task.private.context } : {}),
    });
    send({ type: 'result', result });
  } finally {
    // The result is on main's side of the uplink before piscina's reply says the task ended.
    uplink.flush();
    leave();
    gate?.close();
    lane?.close();
    budget?.close();
    bridge?.release();
    // The thread's last child: its journal descriptors close before the task ends, so a thread
    // that piscina stops next holds none.
    if (--live === 0) await closeJournals();
  }
  return 'settled';
}

/** A no-op task: running one per thread proves the pool warm, its uplink held by main. */
export async function warm(): Promise<number> {
  await threadUplink().ready;
  return threadId;
}
