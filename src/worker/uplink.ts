import { MessageChannel, type MessagePort, parentPort, threadId } from 'node:worker_threads';
import {
  forEachDownlinkMessage,
  type MainMessage,
  type UplinkHello,
  type UplinkPost,
  type WorkerMessage,
} from '../shared/protocol.js';

/** What a child on this worker does with a message main sent it. */
export type ChildInbound = (message: MainMessage) => void;

/**
 * This worker's end of its uplink (protocol.ts): one port to main for every child on the thread,
 * instead of a `MessageChannel` per child, and one post per tick instead of one per message
 * (docs/BENCHMARKS.md, "Messaging and spawn": both cost less CPU per child and per message).
 *
 * Messages are queued in order and posted together from `setImmediate`, so every child's
 * messages of one event-loop turn share a post. `flush` posts the queue at once. Crash forensics
 * on main reads only what was posted before a worker died, so the caller flushes before anything
 * that must be readable by then happens: before a tool's code runs (its `tool-enter`, and every
 * earlier `tool-exit`, must be on main if that code takes the worker down) and before a task ends
 * (its `result` must be on main before piscina's reply).
 */
export class Uplink {
  /** Resolves once main holds this uplink: no child runs before. */
  readonly ready: Promise<void>;
  readonly #port: MessagePort;
  readonly #children = new Map<string, ChildInbound>();
  #queue: UplinkPost = [];

  constructor(port: MessagePort) {
    this.#port = port;
    this.ready = new Promise((resolve) => {
      port.on('message', (batch: unknown) => {
        // The first post is main's `uplink-open`; every later one is a batch for the children.
        if (!Array.isArray(batch)) return resolve();
        forEachDownlinkMessage(
          batch,
          (child, message) => this.#children.get(child)?.(message),
          () => this.#queueMessage({ type: 'pong' }),
        );
      });
    });
    // The worker's life is piscina's to decide: this port does not keep it running.
    port.unref();
  }

  /** Routes main's messages about `child` to `inbound` until the returned function is called. */
  join(child: string, inbound: ChildInbound): () => void {
    this.#children.set(child, inbound);
    return () => {
      this.#children.delete(child);
    };
  }

  /** Queues a message about `child`; it goes out with the rest of this turn's. */
  send(child: string, message: WorkerMessage): void {
    this.#queueMessage({ ...message, child });
  }

  #queueMessage(message: UplinkPost[number]): void {
    if (this.#queue.length === 0) setImmediate(() => this.flush());
    this.#queue.push(message);
  }

  /** Posts every queued message now, in order, as one batch. */
  flush(): void {
    if (this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    this.#port.postMessage(batch);
  }
}

let uplink: Uplink | undefined;

/**
 * This thread's uplink, opened on first use: its main end goes to main over `parentPort` (piscina
 * passes it on as the pool's `message` event), and `ready` waits for main's `uplink-open`.
 */
export function threadUplink(): Uplink {
  if (!uplink) {
    const { port1, port2 } = new MessageChannel();
    uplink = new Uplink(port1);
    const hello: UplinkHello = { type: 'cohort-uplink', threadId, port: port2 };
    parentPort?.postMessage(hello, [port2]);
  }
  return uplink;
}
