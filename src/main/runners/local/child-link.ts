import type { StepSpend } from '../../../shared/budget.js';
import type { AgentEvent } from '../../../shared/events.js';
import type { Governor } from '../../../shared/governor/governor.js';
import type { MainMessage, WorkerMessage } from '../../../shared/protocol.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import type { TraceOp } from '../../../shared/trace/types.js';
import { GovernorLink } from './governor-link.js';

/** What the pool does with what a child sends. */
export interface LinkListener {
  started(threadId: number): void;
  event(event: AgentEvent): void;
  result(result: AgentResult): void;
  /** A span operation of a traced child. */
  trace?(op: TraceOp): void;
  /** A step's spend of a child in a tree budget. */
  spend?(spend: StepSpend): void;
  /** A committed transcript write of a checkpointed child (`spec.checkpoint`). */
  checkpoint?(write: { replace: boolean; lines: string }): void;
}

/** How a link sends a message down to its child's worker. */
export type LinkSend = (threadId: number, message: MainMessage) => void;

/**
 * Main's side of one child's run on one worker (a resumed child gets a new link), over that
 * worker's uplink. It keeps what crash forensics needs: the thread the child runs on and the tools
 * it has open in that worker right now.
 */
export class ChildLink {
  /** Calls of tools that run in the worker, entered and not yet exited. */
  readonly openTools = new Set<string>();
  /** The child's worker, known from its `started`. */
  threadId: number | undefined;
  readonly #listener: LinkListener;
  readonly #send: LinkSend;
  /** The child's governor traffic; what it holds is given back when the link closes. */
  readonly #governor: GovernorLink | undefined;
  /** A cancel asked for before the child's worker was known: it goes with `started`. */
  #cancel: CancelReason | undefined;
  /** Other messages for the child before its worker was known, sent with `started`. */
  #early: MainMessage[] = [];
  #closed = false;

  constructor(listener: LinkListener, send: LinkSend, governor?: Governor) {
    this.#listener = listener;
    this.#send = send;
    if (governor) this.#governor = new GovernorLink(governor, (message) => this.#post(message));
  }

  /** A message from the child, sent from `threadId`. */
  handle(threadId: number, message: WorkerMessage): void {
    if (this.#closed) return;
    if (message.type === 'started') {
      if (this.threadId !== undefined) return;
      this.threadId = threadId;
      this.#listener.started(threadId);
      for (const early of this.#early.splice(0)) this.#post(early);
      if (this.#cancel !== undefined) this.#post({ type: 'cancel', reason: this.#cancel });
      return;
    }
    // Only this run's worker speaks for the child (a message of an earlier run is stale).
    if (threadId !== this.threadId) return;
    switch (message.type) {
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
      case 'trace':
        this.#listener.trace?.(message.op);
        return;
      case 'spend':
        this.#listener.spend?.(message.spend);
        return;
      case 'checkpoint':
        this.#listener.checkpoint?.({ replace: message.replace, lines: message.lines });
        return;
      default:
        this.#governor?.handle(message);
    }
  }

  cancel(reason: CancelReason): void {
    if (this.threadId === undefined) this.#cancel = reason;
    else this.#post({ type: 'cancel', reason });
  }

  /** Sends `message` to the child, once its worker is known. */
  tell(message: MainMessage): void {
    if (this.threadId === undefined) this.#early.push(message);
    else this.#post(message);
  }

  #post(message: MainMessage): void {
    if (this.threadId !== undefined && !this.#closed) this.#send(this.threadId, message);
  }

  close(): void {
    this.#closed = true;
    this.#governor?.close();
  }
}
