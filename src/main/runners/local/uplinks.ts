import { type MessagePort, receiveMessageOnPort } from 'node:worker_threads';
import type { Piscina } from 'piscina';
import {
  type DownlinkPost,
  forEachUplinkMessage,
  isUplinkHello,
  type MainMessage,
  type UplinkHello,
  type UplinkOpen,
  type WorkerMessage,
} from '../../../shared/protocol.js';

/** A child as its worker's uplink sees it: what comes up for it is handed to it, once. */
export interface UplinkChild {
  receive(threadId: number, message: WorkerMessage): void;
}

interface Held {
  port: MessagePort;
  /** Messages for this worker's children, posted together at the end of the turn. */
  queue: DownlinkPost;
  /** When a post from this worker was last read (performance.now()). */
  heardAt: number;
  /** A ping is in `queue`: thousands of cancels in one turn send one. */
  pinging: boolean;
}

/**
 * Main's ends of the workers' uplinks (protocol.ts), by thread id: one port per worker carries
 * the messages of every child on it. A worker sends its uplink when it starts and runs no child
 * before main has answered, so a worker's uplink is always held here before any of its children's
 * messages can be read, or found missing.
 */
export class Uplinks {
  readonly #held = new Map<number, Held>();
  /** The children on the workers, by id: a message for one that is not there is dropped. */
  readonly #children: ReadonlyMap<string, UplinkChild>;

  constructor(children: ReadonlyMap<string, UplinkChild>) {
    this.#children = children;
  }

  /** Takes the uplinks of `piscina`'s workers as they start. */
  attach(piscina: Piscina): void {
    piscina.on('message', (message: unknown) => {
      if (isUplinkHello(message)) this.#hold(message);
    });
  }

  #hold(hello: UplinkHello): void {
    const { port, threadId } = hello;
    const held: Held = { port, queue: [], heardAt: performance.now(), pinging: false };
    this.#held.set(threadId, held);
    port.on('message', (batch: unknown) => this.#read(held, threadId, batch));
    // A port emits `close` only after every message queued before it (a dead worker's last ones
    // included) has gone to the listener above. Never read the port from this handler: on Node
    // 20, `receiveMessageOnPort` inside a port's own `close` listener crashes the process.
    port.once('close', () => this.#held.delete(threadId));
    // Children keep the process alive through piscina while they run; the uplink does not.
    port.unref();
    port.postMessage({ type: 'uplink-open' } satisfies UplinkOpen);
  }

  #read(held: Held, threadId: number, batch: unknown): void {
    held.heardAt = performance.now();
    const children = this.#children;
    forEachUplinkMessage(batch, (child, message) =>
      children.get(child)?.receive(threadId, message),
    );
  }

  /** Asks `threadId`'s worker to answer (once per turn however often it is asked). */
  ping(threadId: number): void {
    const held = this.#held.get(threadId);
    if (!held || held.pinging) return;
    held.pinging = true;
    this.#queue(held, { type: 'ping' });
  }

  /**
   * Whether `threadId`'s worker has posted anything since `time` (performance.now()): its event
   * loop turns. Reads the uplink first: main's timers can run before the posts that arrived
   * while it was busy.
   */
  heardSince(threadId: number, time: number): boolean {
    this.readPending(threadId);
    const held = this.#held.get(threadId);
    return held !== undefined && held.heardAt >= time;
  }

  /** Queues a message for `child` on `threadId`; the turn's messages go down as one post. */
  send(threadId: number, child: string, message: MainMessage): void {
    const held = this.#held.get(threadId);
    if (held) this.#queue(held, { ...message, child });
  }

  #queue(held: Held, message: DownlinkPost[number]): void {
    if (held.queue.length === 0) setImmediate(() => this.#flush(held));
    held.queue.push(message);
  }

  #flush(held: Held): void {
    if (held.queue.length === 0) return;
    const batch = held.queue;
    held.queue = [];
    held.pinging = false;
    held.port.postMessage(batch);
  }

  /**
   * Handles every message already on `threadId`'s uplink, or on every uplink, synchronously: a
   * task's end (piscina's reply) and a worker's death travel apart from the uplink, so its last
   * messages may still sit there when they are known.
   */
  readPending(threadId?: number): void {
    const threads = threadId === undefined ? [...this.#held.keys()] : [threadId];
    for (const thread of threads) {
      const held = this.#held.get(thread);
      if (!held) continue;
      const port = held.port;
      for (let next = receiveMessageOnPort(port); next; next = receiveMessageOnPort(port)) {
        this.#read(held, thread, next.message);
      }
    }
  }
}
