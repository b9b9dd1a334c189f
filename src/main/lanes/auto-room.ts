import { DEFAULT_BATCH_TURNAROUND_MS } from '../../shared/lane/lane.js';
import type { Account, Entry, EntryLedger } from './lane-entry.js';

/** How many of the last batches' turnarounds the `auto` lane goes by (the longest of them). */
const TURNAROUNDS_KEPT = 8;

export interface AutoRoomOptions {
  windowMs: number;
  /** What a batch is taken to need from create to end until one has ended. */
  turnaroundMs?: number;
  ledger: EntryLedger;
  /** The collector's accounts, whose pending lists the room sweeps. */
  accounts: Map<string, Account>;
  /** Aborts when the collector closes: a closing collector answers every step `aborted`. */
  closing: AbortSignal;
  /** Called after a sweep its timer ran: what is left waiting may go now. */
  consider(): void;
}

/**
 * The `auto` lane's room (docs/LANES.md): a step with a deadline waits for a batch while the
 * window and the batch turnaround fit before it, and goes to real time once they do not, when it
 * would wait or at the moment its room runs out while it waits. The turnaround is learned from
 * the batches seen ending; one timer is armed for the waiting step whose room runs out first.
 */
export class AutoRoom {
  readonly #options: AutoRoomOptions;
  /** When the next waiting step with a deadline runs out of room for a batch. */
  #timer: NodeJS.Timeout | undefined;
  /** When `#timer` fires. */
  #at = 0;
  /** How long the last batches took from create to end, most recent last. */
  readonly #turnarounds: number[] = [];

  constructor(options: AutoRoomOptions) {
    this.#options = options;
  }

  /** Steps of the `auto` lane that left it for a real-time request. */
  moved = 0;

  /**
   * What a batch is taken to need from its create to its end: the longest of the last
   * `TURNAROUNDS_KEPT` seen ending, else the assumption given.
   */
  get turnaroundMs(): number {
    if (this.#turnarounds.length === 0) {
      return this.#options.turnaroundMs ?? DEFAULT_BATCH_TURNAROUND_MS;
    }
    return Math.max(...this.#turnarounds);
  }

  /** A step goes to wait for the next batch, or, with no room left before its deadline, to real time. */
  enqueue(account: Account, entry: Entry): void {
    const now = Date.now();
    if (!this.#hasRoom(entry, now)) {
      this.#toRealtime(entry);
      return;
    }
    this.#options.ledger.pend(entry, account);
    const { deadline } = entry.step;
    if (deadline !== undefined) this.#arm(deadline - this.#need(), now);
  }

  /** A batch ended this long after its create began: what the `auto` lane expects next. */
  observe(ms: number): void {
    this.#turnarounds.push(ms);
    if (this.#turnarounds.length > TURNAROUNDS_KEPT) this.#turnarounds.shift();
    // A longer turnaround leaves less room: steps waiting with a deadline are judged again.
    this.sweep();
  }

  /**
   * Waiting steps whose room has run out go to real time; the timer is set for the next one's.
   * (Not at close: a closing collector answers every step `aborted`.)
   */
  sweep(): void {
    this.stop();
    if (this.#options.closing.aborted) return;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const account of this.#options.accounts.values()) {
      account.pending = account.pending.filter((entry) => {
        if (entry.step.deadline === undefined) return true;
        if (this.#hasRoom(entry, now)) {
          next = Math.min(next, entry.step.deadline - this.#need());
          return true;
        }
        this.#toRealtime(entry);
        return false;
      });
    }
    if (next < Number.POSITIVE_INFINITY) {
      this.#arm(next, now);
    }
  }

  /** Disarms the timer. */
  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Sweeps the waiting steps when the first of them runs out of room (earliest wins). */
  #arm(at: number, now: number): void {
    if (this.#timer !== undefined && this.#at <= at) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#at = at;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.sweep();
        this.#options.consider();
      },
      Math.max(0, at - now) + 1,
    );
  }

  /** Whether a batch still fits before the step's deadline: the window, then the turnaround. */
  #hasRoom(entry: Entry, now: number): boolean {
    const { deadline } = entry.step;
    return deadline === undefined || now + this.#need() <= deadline;
  }

  #need(): number {
    return this.#options.windowMs + this.turnaroundMs;
  }

  #toRealtime(entry: Entry): void {
    if (entry.done) return;
    this.#options.ledger.settle(entry);
    this.moved++;
    entry.step.realtime?.();
  }
}
