import { type ConcurrencyControl, makeWindow, type Window } from './concurrency.js';
import { retryAfterMsOf } from './headers.js';
import { type Charge, KeyBuckets } from './key-buckets.js';
import { type SharedBucketStore, SharedLeases } from './shared-leases.js';
import type {
  Admission,
  AdmitRequest,
  GovernorLimits,
  GovernorMemory,
  GovernorState,
  SettleReport,
} from './types.js';

/** Settings every key of one governor shares. */
export interface KeySettings extends GovernorLimits {
  /** The longest pause a `retry-after` may impose (the requests' patience). */
  patienceMs: number;
  initialConcurrency: number;
  maxConcurrency: number;
  concurrencyControl: ConcurrencyControl;
  /** Buckets shared with every other process of a fleet (queue mode), to lease from. */
  store?: SharedBucketStore | undefined;
  /** What keys learned in earlier processes, and where to keep what they learn now. */
  memory?: GovernorMemory | undefined;
}

/** How long a key stays shut after the provider said retrying is pointless, before it probes. */
export const EXHAUSTED_HOLD_MS = 60_000;
/** The pause after a 429 or 529 that named no `retry-after`: doubles per answer in a row. */
const FIRST_PAUSE_MS = 500;
const MAX_PAUSE_MS = 30_000;
/** The longest timer Node honours, in ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;
interface Waiter {
  request: AdmitRequest;
  resolve(admission: Admission): void;
  signal: AbortSignal;
  onAbort(): void;
}

/** What an admitted attempt holds until it settles. */
interface Held {
  sequence: number;
  sentAt: number;
  charge: Charge;
  /** The window held others back when it went: a success may grow it. */
  wasFull: boolean;
}

/**
 * One key's admission: a FIFO queue (retries and later steps of running agents first), the
 * buckets, the adaptive window, the shared pause and the shut state after a spend limit. All
 * state is here and only `pump` admits.
 */
export class KeyGovernor {
  readonly key: string;
  readonly label: string;
  readonly #priority = new Set<Waiter>();
  readonly #normal = new Set<Waiter>();
  readonly #held = new Map<number, Held>();
  readonly #buckets: KeyBuckets;
  readonly #window: Window;
  readonly #onChange: () => void;
  readonly #allocate: () => number;
  readonly #patienceMs: number;
  #timer: NodeJS.Timeout | undefined;
  #sequence = 0;
  #pausedUntil = 0;
  #pauseStreak = 0;
  /** Attempt sequence number when the streak last grew. */
  #streakAfter = -1;
  #exhausted: { message: string; until: number } | undefined;
  /** After a shut key reopens, one request at a time until one succeeds. */
  #probing = false;
  #admitted = 0;
  #rateLimited = 0;
  #overloaded = 0;

  constructor(
    key: string,
    label: string,
    settings: KeySettings,
    hooks: { onChange: () => void; allocate: () => number },
  ) {
    this.key = key;
    this.#allocate = hooks.allocate;
    this.#patienceMs = settings.patienceMs;
    this.label = label;
    this.#onChange = hooks.onChange;
    this.#window = makeWindow(
      settings.concurrencyControl,
      settings.initialConcurrency,
      settings.maxConcurrency,
    );
    this.#buckets = new KeyBuckets(
      settings,
      settings.store ? new SharedLeases(settings.store, key, () => this.pump()) : undefined,
    );
  }

  admit(request: AdmitRequest, signal: AbortSignal, resolve: (a: Admission) => void): void {
    if (signal.aborted) {
      resolve({ ok: false, reason: 'aborted' });
      return;
    }
    const queue = request.priority ? this.#priority : this.#normal;
    const waiter: Waiter = {
      request,
      signal,
      resolve,
      onAbort: () => {
        // A cancelled request leaves the queue at once; it held nothing yet.
        if (queue.delete(waiter)) {
          resolve({ ok: false, reason: 'aborted' });
          // A wake-up armed for nobody would keep the process alive until it fired.
          if (this.#head() === undefined) this.#disarm();
          this.#onChange();
        }
      },
    };
    signal.addEventListener('abort', waiter.onAbort, { once: true });
    queue.add(waiter);
    this.pump();
  }

  /** Admits from the head of the queue while the window, the pause and the buckets allow. */
  pump(): void {
    this.#disarm();
    const now = Date.now();
    if (this.#exhausted !== undefined) {
      if (now < this.#exhausted.until) {
        this.#refuseAll(this.#exhausted.message);
        return;
      }
      // Long enough: one request probes whether the limit was raised, the rest wait for it.
      this.#exhausted = undefined;
      this.#probing = true;
    }
    for (let head = this.#head(); head !== undefined; head = this.#head()) {
      // Paused, the window full (a settle pumps again), or a bucket short (a timer does).
      if (now < this.#pausedUntil) {
        this.#wake(this.#pausedUntil - now);
        return;
      }
      if (this.#held.size >= (this.#probing ? 1 : this.#window.limit)) return;
      const wait = this.#buckets.waitFor(head.request, now);
      if (wait > 0) {
        this.#wake(wait);
        return;
      }
      this.#let(head, now);
    }
  }

  #head(): Waiter | undefined {
    const first = this.#priority.values().next();
    if (!first.done) return first.value;
    const next = this.#normal.values().next();
    return next.done ? undefined : next.value;
  }

  #disarm(): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #wake(ms: number): void {
    // Armed only while someone waits, so it keeps the process alive exactly as long as needed.
    // Node fires a longer timer at once, and then every millisecond: never ask for one.
    this.#timer = setTimeout(() => this.pump(), Math.min(MAX_TIMER_MS, Math.max(1, ms)));
  }

  #let(waiter: Waiter, now: number): void {
    (waiter.request.priority ? this.#priority : this.#normal).delete(waiter);
    waiter.signal.removeEventListener('abort', waiter.onAbort);
    // Permits are numbered by the governor, across keys; the sequence is this key's own.
    const permit = this.#allocate();
    const sequence = ++this.#sequence;
    // The window limited someone: it is full with this one, and others still wait. A window
    // that merely matches the demand has learned nothing about a larger one.
    const wasFull = this.#held.size + 1 >= this.#window.limit && this.#head() !== undefined;
    this.#held.set(permit, {
      sequence,
      sentAt: now,
      charge: this.#buckets.charge(waiter.request),
      wasFull,
    });
    this.#admitted++;
    waiter.resolve({ ok: true, permit });
    this.#onChange();
  }

  /** An admitted attempt ended: what it cost, and what the provider said about the limits. */
  settle(permit: number, report: SettleReport): void {
    const held = this.#held.get(permit);
    if (!held) return;
    this.#held.delete(permit);
    const now = Date.now();
    const refused = report.outcome === 'rate_limited' || report.outcome === 'overloaded';
    this.#buckets.settle(held.charge, report, refused);
    if (report.headers) this.#buckets.learn(held.charge, held.sentAt, report.headers);
    this.#window.sample({
      sequence: held.sequence,
      latest: this.#sequence,
      refused,
      ok: report.outcome === 'ok',
      wasFull: held.wasFull,
      latencyMs: now - held.sentAt,
      queued: this.#priority.size + this.#normal.size,
    });
    if (refused) this.#refused(held, report, now);
    else if (report.outcome === 'ok') {
      this.#pauseStreak = 0;
      this.#probing = false;
    } else if (report.outcome === 'exhausted') {
      this.#exhausted = {
        message: report.message ?? 'the provider said retrying is pointless',
        until: now + EXHAUSTED_HOLD_MS,
      };
    }
    this.pump();
    this.#onChange();
  }

  #refused(held: Held, report: SettleReport, now: number): void {
    if (report.outcome === 'rate_limited') this.#rateLimited++;
    else this.#overloaded++;
    // A pause longer than a request's patience would hold it past the moment it should fail.
    const told = retryAfterMsOf(report.headers);
    const unprompted = Math.min(MAX_PAUSE_MS, FIRST_PAUSE_MS * 2 ** this.#pauseStreak);
    const pause = Math.min(told ?? unprompted, this.#patienceMs);
    // Attempts already in flight at the last refusal report the same moment: the unprompted
    // pause doubles once per round trip, not once per refused attempt.
    if (held.sequence > this.#streakAfter) {
      this.#pauseStreak++;
      this.#streakAfter = this.#sequence;
    }
    // Shared: every queued request of the key waits until that instant, not only this one.
    this.#pausedUntil = Math.max(this.#pausedUntil, now + pause);
  }

  #refuseAll(message: string): void {
    for (const queue of [this.#priority, this.#normal]) {
      for (const waiter of queue) {
        waiter.signal.removeEventListener('abort', waiter.onAbort);
        waiter.resolve({ ok: false, reason: 'exhausted', message });
      }
      queue.clear();
    }
  }

  state(): GovernorState {
    const now = Date.now();
    const state: GovernorState = {
      key: this.key,
      label: this.label,
      limit: this.#window.limit,
      inFlight: this.#held.size,
      queued: this.#priority.size + this.#normal.size,
      admitted: this.#admitted,
      rateLimited: this.#rateLimited,
      overloaded: this.#overloaded,
      refusalRate: 0,
    };
    if (this.#pausedUntil > now) state.pausedUntil = this.#pausedUntil;
    if (this.#exhausted) state.exhausted = this.#exhausted.message;
    this.#buckets.describe(state, now);
    return state;
  }
}
