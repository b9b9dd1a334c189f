/**
 * Our own admission queue in front of piscina: at most `capacity` items run, the rest wait here
 * in order. A queued item can be taken out (cancelled) without touching any worker.
 */
export class Admission<Item> {
  readonly #capacity: number;
  readonly #start: (item: Item) => void;
  // A plain array with a moving head: shift() on a long queue is O(n) per admission.
  #queue: (Item | undefined)[] = [];
  #head = 0;
  #waiting = 0;
  #running = 0;

  constructor(capacity: number, start: (item: Item) => void) {
    this.#capacity = capacity;
    this.#start = start;
  }

  get queued(): number {
    return this.#waiting;
  }

  get running(): number {
    return this.#running;
  }

  /** Queues an item; it starts as soon as there is room. */
  push(item: Item): void {
    this.#queue.push(item);
    this.#waiting++;
    this.#admit();
  }

  /** Takes a still-queued item out; false when it was not queued. */
  remove(item: Item): boolean {
    const index = this.#queue.indexOf(item, this.#head);
    if (index < 0) return false;
    this.#queue[index] = undefined;
    this.#waiting--;
    return true;
  }

  /** Every item still waiting, in order. */
  waiting(): Item[] {
    return this.#queue.slice(this.#head).filter((item) => item !== undefined);
  }

  /** A running item ended: its room goes to the next in line. */
  done(): void {
    this.#running--;
    this.#admit();
  }

  #admit(): void {
    while (this.#waiting > 0 && this.#running < this.#capacity) {
      const item = this.#queue[this.#head];
      this.#queue[this.#head++] = undefined;
      if (item === undefined) continue;
      this.#waiting--;
      this.#running++;
      this.#start(item);
    }
    // Compact once the consumed head dominates, so the array does not grow without end.
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
  }
}
