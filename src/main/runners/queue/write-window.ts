/**
 * Collects items for a short window, then hands them over together. On these machines a round
 * trip to Redis costs a process far more for the wake-up than for the command itself (about
 * 130 µs of CPU for a lone command against about 12 µs for one of many in flight), so the queue's
 * per-task writes (adds, removals, checkpoints) go out as one round trip per window rather than
 * one per task (docs/BENCHMARKS.md).
 */
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';

/**
 * Runs `send` with the client's socket corked until the commands it starts are written, so they
 * leave in one write and their answers come back in one read: one wake-up for Redis and one for
 * this process, where a write each costs both a wake-up each. BullMQ's calls reach the socket a
 * few promise turns after they are made, and an immediate runs after those.
 */
export function inOneWrite<T>(redis: Redis, send: () => T): T {
  // No socket yet (still connecting): the commands wait in ioredis's queue instead.
  const socket = redis.stream as Socket | undefined;
  socket?.cork();
  try {
    return send();
  } finally {
    if (socket) setImmediate(() => socket.uncork());
  }
}

export class WriteWindow<Item> {
  readonly #send: (items: Item[]) => Promise<void>;
  readonly #windowMs: number;
  #items: Item[] = [];
  /** The open window: its timer, and what settles the promise its items were given. */
  #window:
    | { timer: NodeJS.Timeout | NodeJS.Immediate; sent: Promise<void>; done: () => void }
    | undefined;

  /**
   * `send` must not reject: what fails is its own to report, item by item. A window of 0 ms ends
   * with the event loop's turn: it gathers what one wake-up asked for, and adds no wake-up of
   * its own (a timer would).
   */
  constructor(send: (items: Item[]) => Promise<void>, windowMs: number) {
    this.#send = send;
    this.#windowMs = windowMs;
  }

  /** Adds an item; resolves once the window it joined has been sent. */
  push(item: Item): Promise<void> {
    this.#items.push(item);
    if (this.#window) return this.#window.sent;
    let done!: () => void;
    const sent = new Promise<void>((resolve) => {
      done = resolve;
    });
    const send = () => void this.flush();
    const timer = this.#windowMs > 0 ? setTimeout(send, this.#windowMs) : setImmediate(send);
    // What waits on the window keeps a process alive, not the timer.
    timer.unref();
    this.#window = { timer, sent, done };
    return sent;
  }

  /** Items waiting for their window. */
  get waiting(): number {
    return this.#items.length;
  }

  /** Sends what is waiting now, without waiting for its window. */
  async flush(): Promise<void> {
    const window = this.#window;
    if (!window) return;
    if (this.#windowMs > 0) clearTimeout(window.timer as NodeJS.Timeout);
    else clearImmediate(window.timer as NodeJS.Immediate);
    this.#window = undefined;
    const items = this.#items;
    this.#items = [];
    try {
      await this.#send(items);
    } finally {
      window.done();
    }
  }

  /** Takes out the waiting items that `drop` picks: they no longer need sending. */
  discard(drop: (item: Item) => boolean): void {
    this.#items = this.#items.filter((item) => !drop(item));
  }
}
