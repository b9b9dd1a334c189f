import type { Redis } from 'ioredis';

/** What the producer does with the queue's events; only these four are read. */
export interface QueueEventHandlers {
  active(jobId: string): void;
  /** `returnvalue` as the stream holds it: the worker's answer, as JSON text. */
  completed(jobId: string, returnvalue: string | undefined): void;
  failed(jobId: string, failedReason: string): void;
  duplicated(jobId: string): void;
}

export interface EventsReaderOptions {
  /** After a read that found events, how long to let more gather before the next read. */
  gatherMs: number;
  /** How long one read blocks when nothing happens. */
  blockMs: number;
  /** Entries one read takes at most. */
  count: number;
}

type StreamReply = [key: string, entries: [id: string, fields: string[]][]][] | null;

/**
 * Reads BullMQ's events stream of one queue (the stream `QueueEvents` reads), a batch at a time:
 * after a read that found events it waits `gatherMs` before the next. `QueueEvents` reads again
 * at once, so it wakes its process for nearly every task; here a process wakes once per window
 * however many tasks finished in it, and only the four events the producer uses are decoded.
 *
 * Reads go on from the last entry seen, so a reconnect misses nothing the stream still holds; a
 * read that never answers (a connection cut mid-read) is given up after its block time plus a
 * margin and made again from the same entry, so nothing is skipped or read wrongly twice.
 */
export class EventsReader {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #handlers: QueueEventHandlers;
  readonly #options: EventsReaderOptions;
  #lastId = '0-0';
  #stopped = false;
  /** Callers of `readPast`, each waiting for the reader to pass an entry. */
  #waiters: { id: string; done: () => void }[] = [];
  /** Ends the wait the loop is in: a pause, or a read. */
  #wake: (() => void) | undefined;

  constructor(
    redis: Redis,
    key: string,
    handlers: QueueEventHandlers,
    options: EventsReaderOptions,
  ) {
    this.#redis = redis;
    this.#key = key;
    this.#handlers = handlers;
    this.#options = options;
  }

  /** Starts after the stream's last entry now: only what happens from here on is read. */
  async start(): Promise<void> {
    this.#lastId = (await lastEntryId(this.#redis, this.#key)) ?? '0-0';
    void this.#run();
  }

  /** Ends the reads, a read in flight too (its answer, if it ever comes, is ignored). */
  stop(): void {
    this.#stopped = true;
    this.#wake?.();
    this.#release(true);
  }

  /**
   * Resolves once every entry up to the stream's last one now has been read and handled (at
   * once when the stream is empty or the reader has stopped): whatever happened before this call
   * has reached the handlers by then. The stream's end is asked for on `client`, not on the
   * reader's own connection, which is mostly parked in a blocking read.
   */
  async readPast(client: Redis): Promise<void> {
    const id = await lastEntryId(client, this.#key);
    if (id === undefined || this.#stopped || compareIds(id, this.#lastId) <= 0) return;
    await new Promise<void>((done) => this.#waiters.push({ id, done }));
  }

  /** Lets go of the waiters the reader has passed; of all of them when `all`. */
  #release(all: boolean): void {
    if (this.#waiters.length === 0) return;
    this.#waiters = this.#waiters.filter((waiter) => {
      if (!all && compareIds(waiter.id, this.#lastId) > 0) return true;
      waiter.done();
      return false;
    });
  }

  async #run(): Promise<void> {
    const { blockMs, gatherMs, count } = this.#options;
    while (!this.#stopped) {
      let reply: StreamReply;
      try {
        reply = await this.#within(
          this.#redis.xread(
            'COUNT',
            count,
            'BLOCK',
            blockMs,
            'STREAMS',
            this.#key,
            this.#lastId,
          ) as Promise<StreamReply>,
          blockMs + READ_MARGIN_MS,
        );
      } catch {
        if (this.#stopped) return;
        // Redis away: the client reconnects on its own; the read is made again after a pause.
        await this.#pause(RETRY_MS);
        continue;
      }
      const entries = reply?.[0]?.[1];
      if (!entries || entries.length === 0) continue;
      for (const [id, fields] of entries) {
        this.#lastId = id;
        this.#dispatch(fields);
      }
      this.#release(false);
      // A full read means more is waiting: read on at once. Otherwise let the next ones gather.
      if (entries.length < count) await this.#pause(gatherMs);
    }
  }

  /** The entry's fields are `event, NAME, jobId, ID, …` pairs; only four events are decoded. */
  #dispatch(fields: string[]): void {
    const event = fields[0] === 'event' ? fields[1] : field(fields, 'event');
    if (
      event !== 'completed' &&
      event !== 'failed' &&
      event !== 'active' &&
      event !== 'duplicated'
    ) {
      return;
    }
    const jobId = field(fields, 'jobId');
    if (jobId === undefined) return;
    if (event === 'active') this.#handlers.active(jobId);
    else if (event === 'completed') this.#handlers.completed(jobId, field(fields, 'returnvalue'));
    else if (event === 'failed') this.#handlers.failed(jobId, field(fields, 'failedReason') ?? '');
    else this.#handlers.duplicated(jobId);
  }

  /** `read`, or a rejection once `ms` have passed without its answer, or the reader stops. */
  async #within<T>(read: Promise<T>, ms: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    // A read given up may still answer or fail later: nobody is listening then.
    read.catch(() => {});
    try {
      return await Promise.race([
        read,
        new Promise<never>((_, reject) => {
          const giveUp = () => reject(new Error('no answer to XREAD'));
          timer = setTimeout(giveUp, ms);
          // Nothing here keeps a process alive: a close must not wait for a read's answer.
          timer.unref();
          this.#wake = giveUp;
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits `ms`, or less when the reader is stopped meanwhile. */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }
}

/** How long past its block time a read may take before it is given up and made again. */
const READ_MARGIN_MS = 5000;
/** The pause before a read is made again after one failed. */
const RETRY_MS = 250;

/** The id of the stream's last entry, or undefined when it has none. */
async function lastEntryId(client: Redis, key: string): Promise<string | undefined> {
  const last = (await client.xrevrange(key, '+', '-', 'COUNT', 1)) as [string, string[]][];
  return last[0]?.[0];
}

/** Orders two stream entry ids (`MS-SEQ`). */
function compareIds(a: string, b: string): number {
  const [aMs = 0, aSeq = 0] = a.split('-').map(Number);
  const [bMs = 0, bSeq = 0] = b.split('-').map(Number);
  return aMs - bMs || aSeq - bSeq;
}

function field(fields: string[], name: string): string | undefined {
  for (let at = 0; at + 1 < fields.length; at += 2) {
    if (fields[at] === name) return fields[at + 1];
  }
  return undefined;
}

/** The worker's answer as the events stream holds it (JSON text), or what cannot be read. */
export function parseReturnValue(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
