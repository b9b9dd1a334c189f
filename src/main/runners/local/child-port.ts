import { MessageChannel, type MessagePort, receiveMessageOnPort } from 'node:worker_threads';
import type { AgentEvent } from '../../../shared/events.js';
import type { Governor } from '../../../shared/governor/governor.js';
import { isWorkerMessage, type MainMessage } from '../../../shared/protocol.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { GovernorLink } from './governor-link.js';

/** What the pool does with what arrives on a child's port. */
export interface PortListener {
  started(threadId: number): void;
  event(event: AgentEvent): void;
  result(result: AgentResult): void;
}

/**
 * Main's end of one child's own port, for one run on one worker (a resumed child gets a new
 * one). It keeps what crash forensics needs: the thread the child runs on and the tools it has
 * open in that worker right now.
 */
export class ChildPort {
  /** The end to transfer to the worker. */
  readonly workerEnd: MessagePort;
  /** Calls of tools that run in the worker, entered and not yet exited. */
  readonly openTools = new Set<string>();
  threadId: number | undefined;
  readonly #port: MessagePort;
  readonly #listener: PortListener;
  /** The child's governor traffic; what it holds is given back when the port closes. */
  readonly #governor: GovernorLink | undefined;

  constructor(listener: PortListener, governor?: Governor) {
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    this.workerEnd = port2;
    this.#listener = listener;
    if (governor) {
      this.#governor = new GovernorLink(governor, (message) => this.#port.postMessage(message));
    }
    port1.on('message', (message: unknown) => this.#handle(message));
  }

  #handle(message: unknown): void {
    if (!isWorkerMessage(message)) return;
    switch (message.type) {
      case 'started':
        this.threadId = message.threadId;
        this.#listener.started(message.threadId);
        return;
      case 'event':
        this.#listener.event(message.event);
        return;
      case 'tool-enter':
        this.openTools.add(message.callId);
        return;
      case 'tool-exit':
        this.openTools.delete(message.callId);
        return;
      case 'result':
        this.#listener.result(message.result);
        return;
      default:
        this.#governor?.handle(message);
    }
  }

  /**
   * Handles every message already on the port, synchronously. Messages on this port and
   * piscina's reply travel on different channels, so when a task ends (or its worker dies) its
   * last messages may still sit here: read them before deciding anything is lost.
   */
  drain(): void {
    for (
      let next = receiveMessageOnPort(this.#port);
      next;
      next = receiveMessageOnPort(this.#port)
    ) {
      this.#handle(next.message);
    }
  }

  cancel(reason: CancelReason): void {
    this.#port.postMessage({ type: 'cancel', reason } satisfies MainMessage);
  }

  close(): void {
    this.#port.close();
    this.#governor?.close();
  }
}
