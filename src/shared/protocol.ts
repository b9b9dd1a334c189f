import type { MessagePort } from 'node:worker_threads';
import type { ChildSpec } from './child-spec.js';
import type { AgentEvent } from './events.js';
import type { AgentResult, CancelReason } from './result.js';

/** The piscina task for one child: its spec and the port it talks over. */
export interface ChildTask {
  spec: ChildSpec;
  port: MessagePort;
  /** The host bridge's port (comlink), when the child has host tools or may spawn. */
  bridge?: MessagePort;
}

/** Worker → main, on the child's own port. */
export type WorkerMessage =
  | { type: 'started'; threadId: number }
  | { type: 'event'; event: AgentEvent }
  | { type: 'result'; result: AgentResult };

/** Main → worker, on the child's own port. */
export type MainMessage = { type: 'cancel'; reason: CancelReason };

/** Checks a message that arrived on a child's port; anything else is ignored, never trusted. */
export function isWorkerMessage(value: unknown): value is WorkerMessage {
  if (typeof value !== 'object' || value === null) return false;
  const message = value as Record<string, unknown>;
  switch (message.type) {
    case 'started':
      return typeof message.threadId === 'number';
    case 'event':
      return typeof message.event === 'object' && message.event !== null;
    case 'result': {
      const result = message.result as Record<string, unknown> | null;
      return (
        typeof result === 'object' &&
        result !== null &&
        typeof result.id === 'string' &&
        typeof result.outcome === 'string'
      );
    }
    default:
      return false;
  }
}

export function isMainMessage(value: unknown): value is MainMessage {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<string, unknown>).type === 'cancel' &&
    typeof (value as Record<string, unknown>).reason === 'string'
  );
}
