import { defined } from '../option-schema.js';
import { Breaker } from './breaker.js';
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
  KeyMemory,
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
  /** How long an open breaker waits before its first probe; doubles per failed probe. */
  breakerHoldMs: number;
}

/** How long a key stays shut after the provider said retrying is pointless, before it probes. */
export const EXHAUSTED_HOLD_MS = 60_000;
/**
 * The key-wide pause when half or more of a round trip's attempts were refused with no
 * `retry-after`: doubles per such round trip in a row. A lone refusal pauses nothing: its request
 * backs off alone (provider.ts).
 */
const FIRST_PAUSE_MS = 500;
const MAX_PAUSE_MS = 30_000;
/** The largest window a state file may start a key with, whatever it says. */
const MAX_RECALLED_WINDOW = 10_000;
/** Weight of the newest success in the running average of latency, for the floor. */
const LATENCY_SMOOTHING = 0.2;
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
  /** Its response began, and what its headers said was learned then. */
  opened: boolean;
}

/**
 * One key's admission: a FIFO queue (retries and later steps of running agents first), the
 * buckets, the adaptive window, the shared pause, the shut state after a spend limit and the
 * circuit breaker (breaker.ts). Only `pump` admits.
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
  readonly #breaker: Breaker;
  #timer: NodeJS.Timeout | undefined;
  #sequence = 0;
  /** Admitted attempts whose response has begun and not yet ended. */
  #open = 0;
  #pausedUntil = 0;
  #pauseStreak = 0;
  #exhausted: { message: string; until: number } | undefined;
  /** After a shut key reopens, one request at a time until one succeeds. */
  #probing = false;
  #admitted = 0;
  #rateLimited = 0;
  #overloaded = 0;
  /** The provider's responses carry no rate-limit headers: it has no limits to respect. */
  #unlimited = false;
  /** Running average of a successful attempt's time, for the floor that fills the limits. */
  #latencyMs = 0;
  readonly #memory: GovernorMemory | undefined;
  readonly #control: KeySettings['concurrencyControl'];
  /** What was last given to `memory`, so an unchanged state is not handed over again. */
  #remembered = '';

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
    this.#breaker = new Breaker(label, settings.breakerHoldMs);
    this.#onChange = hooks.onChange;
    this.#window = makeWindow(
      settings.concurrencyControl,
      settings.initialConcurrency,
      settings.maxConcurrency,
    );
    this.#memory = settings.memory;
    this.#control = settings.concurrencyControl;
    const recalled =
      settings.concurrencyControl === 'aimd'
        ? safely(() => settings.memory?.recall(key))
        : undefined;
    // What an earlier process learned starts this one: its limits pace from the first request
    // (configured ones win), and its window replaces the slow start.
    this.#buckets = new KeyBuckets(
      {
        ...defined({ rpm: recalled?.rpm, itpm: recalled?.itpm, otpm: recalled?.otpm }),
        ...defined({ rpm: settings.rpm, itpm: settings.itpm, otpm: settings.otpm }),
      },
      settings.store ? new SharedLeases(settings.store, key, () => this.pump()) : undefined,
    );
    if (recalled !== undefined) {
      this.#unlimited = recalled.unlimited === true;
      this.#window.open(Math.min(settings.maxConcurrency, MAX_RECALLED_WINDOW, recalled.window));
    }
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
    const refusal = this.#breaker.refusal(now);
    if (refusal !== undefined) {
      this.#refuseAll(refusal);
      return;
    }
    if (this.#exhausted !== undefined) {
      if (now < this.#exhausted.until) {
        this.#refuseAll({ ok: false, reason: 'exhausted', message: this.#exhausted.message });
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
      if (this.#unlimited && !this.#probing && !this.#window.congested) {
        // No limits to respect: the window follows the demand until the provider pushes back.
        this.#window.open(this.#held.size + this.#priority.size + this.#normal.size);
      }
      const probing = this.#probing || this.#breaker.probing;
      if (this.#held.size >= (probing ? 1 : this.#window.limit)) return;
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
      opened: false,
    });
    this.#admitted++;
    waiter.resolve({ ok: true, permit });
    this.#onChange();
  }

  /**
   * An admitted attempt's response began (its status was 200): what its headers say about the
   * limits is learned now, not when it ends, so a cold key opens its window within one time to
   * first byte. Headers with what remains open the window to that many requests; a response
   * with no rate-limit headers says the provider has no limits to respect.
   */
  opened(permit: number, headers: Record<string, string>): void {
    const held = this.#held.get(permit);
    if (!held || held.opened) return;
    held.opened = true;
    this.#open++;
    this.#breaker.answered();
    this.#buckets.learn(held.charge, held.sentAt, headers);
    const severe = this.#window.answered({
      sequence: held.sequence,
      latest: this.#sequence,
      inFlight: this.#held.size,
    });
    this.#roundEnded(severe, Date.now());
    if (!this.#window.congested) {
      const headroom = this.#buckets.headroom(Date.now());
      if (headroom === undefined) this.#unlimited = true;
      else {
        // As far as what remains allows, and no further than the demand: a window is a size
        // that was tried, and a later process starts from it.
        this.#unlimited = false;
        this.#window.open(
          Math.min(headroom, this.#held.size + this.#priority.size + this.#normal.size),
        );
      }
    }
    this.pump();
  }

  /** An admitted attempt ended: what it cost, and what the provider said about the limits. */
  settle(permit: number, report: SettleReport): void {
    const held = this.#held.get(permit);
    if (!held) return;
    this.#held.delete(permit);
    if (held.opened) this.#open--;
    const now = Date.now();
    const refused = report.outcome === 'rate_limited' || report.outcome === 'overloaded';
    this.#buckets.settle(held.charge, report, refused);
    if (report.headers && !held.opened)
      this.#buckets.learn(held.charge, held.sentAt, report.headers);
    const latencyMs = now - held.sentAt;
    if (report.outcome === 'ok') {
      this.#latencyMs =
        this.#latencyMs === 0
          ? latencyMs
          : this.#latencyMs + LATENCY_SMOOTHING * (latencyMs - this.#latencyMs);
      this.#window.floor = this.#buckets.fillingWindow(this.#latencyMs);
    }
    const severe = this.#window.sample({
      sequence: held.sequence,
      latest: this.#sequence,
      refused,
      ok: report.outcome === 'ok',
      wasFull: held.wasFull,
      latencyMs,
      queued: this.#priority.size + this.#normal.size,
      inFlight: this.#held.size + 1,
      counted: held.opened,
      open: this.#open,
    });
    if (refused) this.#refused(report, now);
    this.#roundEnded(severe, now);
    this.#breaker.settled(report, now);
    if (report.outcome === 'ok') this.#probing = false;
    else if (report.outcome === 'exhausted') {
      this.#exhausted = {
        message: report.message ?? 'the provider said retrying is pointless',
        until: now + EXHAUSTED_HOLD_MS,
      };
    }
    this.pump();
    this.#onChange();
    this.#remember();
  }

  /**
   * A `retry-after` pauses the whole key until that instant: the provider said when. Without
   * one, a refusal pauses nothing: its request backs off alone (provider.ts).
   */
  #refused(report: SettleReport, now: number): void {
    if (report.outcome === 'rate_limited') this.#rateLimited++;
    else this.#overloaded++;
    const told = retryAfterMsOf(report.headers);
    if (told !== undefined && told > 0) this.#pause(told, now);
  }

  /**
   * A round trip refused half or more pauses the key, 0.5 s doubling per such round trip in a
   * row; one that was not ends the streak.
   */
  #roundEnded(severe: boolean | undefined, now: number): void {
    if (severe === false) this.#pauseStreak = 0;
    if (severe !== true) return;
    this.#pause(Math.min(MAX_PAUSE_MS, FIRST_PAUSE_MS * 2 ** this.#pauseStreak), now);
    this.#pauseStreak++;
  }

  #pause(ms: number, now: number): void {
    // A pause longer than a request's patience would hold it past the moment it should fail.
    this.#pausedUntil = Math.max(this.#pausedUntil, now + Math.min(ms, this.#patienceMs));
  }

  /** Hands what the key learned to the memory, when it changed. */
  #remember(): void {
    const memory = this.#memory;
    // Only the default window is worth starting from: a fixed one is a setting, not a lesson.
    if (memory === undefined || this.#control !== 'aimd') return;
    const learned = this.#buckets.learnedLimits();
    const remembered: KeyMemory = {
      window: this.#window.limit,
      ...learned,
      ...(this.#unlimited ? { unlimited: true } : {}),
    };
    const text = JSON.stringify(remembered);
    if (text === this.#remembered) return;
    this.#remembered = text;
    safely(() => memory.remember(this.key, remembered));
  }

  #refuseAll(admission: Admission): void {
    for (const queue of [this.#priority, this.#normal]) {
      for (const waiter of queue) {
        waiter.signal.removeEventListener('abort', waiter.onAbort);
        waiter.resolve(admission);
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
      refusalRate: this.#window.refusalRate,
    };
    if (this.#pausedUntil > now) state.pausedUntil = this.#pausedUntil;
    if (this.#exhausted) state.exhausted = this.#exhausted.message;
    const breaker = this.#breaker.describe();
    if (breaker) state.breaker = breaker;
    this.#buckets.describe(state, now);
    return state;
  }
}

/** A memory's fault is its own: the governor goes on without it. */
function safely<T>(run: () => T): T | undefined {
  try {
    return run();
  } catch {
    return undefined;
  }
}
