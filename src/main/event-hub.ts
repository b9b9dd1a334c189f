import { expected } from '../shared/errors.js';
import { checkOption, wholeNumber } from '../shared/option-schema.js';

/** Events a subscriber may have waiting when no `maxQueued` is given. */
export const DEFAULT_MAX_QUEUED = 10_000;

export interface EventHubOptions<Event> {
  /** Events one subscriber may have waiting before its oldest are dropped (default 10,000). */
  maxQueued?: number;
  /**
   * Makes the event a subscriber receives in place of the `dropped` events it lost, just
   * before the next event it still has. Without it, dropped events leave no trace.
   */
  overflow?: (dropped: number) => Event;
}

/**
 * Fans events out to any number of async-iterator subscribers. A subscriber ends when it
 * returns (a `break` out of `for await`), when its signal aborts, or after the events already
 * queued once the hub closes; its abort listener is removed whichever way it ends.
 *
 * Each subscriber has its own queue, bounded by `maxQueued`: `emit` never waits for a reader,
 * so a subscriber that stops reading would otherwise hold every event from then on. When a
 * queue is full, its oldest event is dropped to make room for the newest; if an `overflow`
 * factory is given, the subscriber's next read returns `overflow(count)` first, so the gap is
 * explicit, and the count starts again from zero.
 */
export class EventHub<Event> {
  readonly #subscribers = new Set<Subscriber<Event>>();
  readonly #maxQueued: number;
  readonly #overflow: ((dropped: number) => Event) | undefined;
  #closed = false;

  constructor(options: EventHubOptions<Event> = {}) {
    this.#maxQueued =
      checkOption('maxQueued', wholeNumber(1), options.maxQueued) ?? DEFAULT_MAX_QUEUED;
    if (options.overflow !== undefined && typeof options.overflow !== 'function') {
      throw expected('overflow', 'a function', options.overflow);
    }
    this.#overflow = options.overflow;
  }

  emit(event: Event): void {
    for (const subscriber of this.#subscribers) subscriber.push(event);
  }

  subscribe(signal?: AbortSignal): AsyncIterableIterator<Event> {
    const onAbort = () => subscriber.end();
    const subscriber = new Subscriber<Event>(this.#maxQueued, this.#overflow, () => {
      this.#subscribers.delete(subscriber);
      // A long-lived signal (a session's, a server's) outlives many subscriptions; each would
      // otherwise leave a listener, and the subscriber it holds, on it for good.
      signal?.removeEventListener('abort', onAbort);
    });
    if (this.#closed || signal?.aborted) {
      subscriber.end();
      return subscriber;
    }
    this.#subscribers.add(subscriber);
    signal?.addEventListener('abort', onAbort, { once: true });
    return subscriber;
  }

  get subscriberCount(): number {
    return this.#subscribers.size;
  }

  /** Ends every subscription after the events already queued. */
  close(): void {
    this.#closed = true;
    for (const subscriber of this.#subscribers) subscriber.end();
  }
}

class Subscriber<Event> implements AsyncIterableIterator<Event> {
  readonly #queue: DroppingQueue<Event>;
  readonly #overflow: ((dropped: number) => Event) | undefined;
  /** Events dropped since the subscriber last read an overflow marker. */
  #dropped = 0;
  #waiting: ((result: IteratorResult<Event>) => void) | undefined;
  #ended = false;
  readonly #detach: () => void;

  constructor(
    maxQueued: number,
    overflow: ((dropped: number) => Event) | undefined,
    detach: () => void,
  ) {
    this.#queue = new DroppingQueue(maxQueued);
    this.#overflow = overflow;
    this.#detach = detach;
  }

  push(event: Event): void {
    if (this.#ended) return;
    if (this.#waiting) {
      // A reader is waiting only when the queue is empty and no drop is unreported.
      const resolve = this.#waiting;
      this.#waiting = undefined;
      resolve({ value: event, done: false });
    } else if (this.#queue.push(event) && this.#overflow) this.#dropped++;
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#detach();
    if (this.#waiting && this.#queue.length === 0) {
      const resolve = this.#waiting;
      this.#waiting = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<Event>> {
    // Drops only happen to a full queue, so a pending marker always has an event after it.
    if (this.#dropped > 0 && this.#overflow) {
      const dropped = this.#dropped;
      this.#dropped = 0;
      return Promise.resolve({ value: this.#overflow(dropped), done: false });
    }
    if (this.#queue.length > 0) return Promise.resolve({ value: this.#queue.shift(), done: false });
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }

  return(): Promise<IteratorResult<Event>> {
    this.#queue.clear();
    this.#dropped = 0;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Event> {
    return this;
  }
}

/**
 * A FIFO of at most `capacity` items that drops its oldest to take a new one. A full queue
 * under steady emits shifts once per push; `Array#shift` may copy the whole array each time,
 * so items are read from a moving head and the array is compacted once half of it is spent.
 */
class DroppingQueue<Item> {
  readonly #items: (Item | undefined)[] = [];
  readonly #capacity: number;
  #head = 0;

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  get length(): number {
    return this.#items.length - this.#head;
  }

  /** Appends `item`; returns whether the oldest item was dropped to make room for it. */
  push(item: Item): boolean {
    const full = this.length >= this.#capacity;
    if (full) this.shift();
    this.#items.push(item);
    return full;
  }

  /** Removes and returns the oldest item; the caller checks `length` first. */
  shift(): Item {
    const item = this.#items[this.#head] as Item;
    // Release the slot at once, so a dropped or read event can be collected.
    this.#items[this.#head] = undefined;
    this.#head++;
    if (this.#head * 2 >= this.#items.length) {
      this.#items.splice(0, this.#head);
      this.#head = 0;
    }
    return item;
  }

  clear(): void {
    this.#items.length = 0;
    this.#head = 0;
  }
}
