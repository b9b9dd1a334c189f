/**
 * Fans events out to any number of async-iterator subscribers. Each subscriber has its own
 * unbounded queue; a subscriber that stops iterating is removed.
 */
export class EventHub<Event> {
  readonly #subscribers = new Set<Subscriber<Event>>();
  #closed = false;

  emit(event: Event): void {
    for (const subscriber of this.#subscribers) subscriber.push(event);
  }

  subscribe(signal?: AbortSignal): AsyncIterableIterator<Event> {
    const subscriber = new Subscriber<Event>(() => this.#subscribers.delete(subscriber));
    if (this.#closed) subscriber.end();
    else this.#subscribers.add(subscriber);
    if (signal) {
      if (signal.aborted) subscriber.end();
      else signal.addEventListener('abort', () => subscriber.end(), { once: true });
    }
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
  readonly #queue: Event[] = [];
  #waiting: ((result: IteratorResult<Event>) => void) | undefined;
  #ended = false;
  readonly #detach: () => void;

  constructor(detach: () => void) {
    this.#detach = detach;
  }

  push(event: Event): void {
    if (this.#ended) return;
    if (this.#waiting) {
      const resolve = this.#waiting;
      this.#waiting = undefined;
      resolve({ value: event, done: false });
    } else this.#queue.push(event);
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
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve({ value: queued, done: false });
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }

  return(): Promise<IteratorResult<Event>> {
    this.#queue.length = 0;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Event> {
    return this;
  }
}
