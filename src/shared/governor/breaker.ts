/**
 * One key's circuit breaker: connection failures in a row (or one refused API key) open it, and
 * every queued request fails at once with the cause instead of each grinding through its
 * retries. After a hold one request probes; an answer closes it, a failure reopens it for twice
 * as long. 429s and 529s never open it: those are pacing, not a dead provider.
 */
import { type Admission, type BreakerState, opensBreaker, type SettleReport } from './types.js';

/** Connection failures in a row, across every agent of the key, that open its breaker. */
export const BREAKER_FAILURES = 5;
/** How long an open breaker waits before one request probes; doubles per failed probe. */
export const BREAKER_FIRST_HOLD_MS = 5_000;
/** The longest hold a failed probe doubles to (or the first hold, when that is longer). */
export const BREAKER_MAX_HOLD_MS = 60_000;

/** What every request that asks while the breaker is open gets, instead of being sent. */
export type BreakerRefusal = Extract<Admission, { reason: 'breaker' }>;

/**
 * Closed, open or half-open; the key governor asks it before admitting and tells it how each
 * attempt ended. Time comes in as `now`: the breaker keeps no timer, the governor's pump does.
 */
export class Breaker {
  /** Names the key in the message (its label: never the API key). */
  readonly #label: string;
  /** The first hold; a failed probe doubles the last one. */
  readonly #holdMs: number;
  /** Connection failures in a row; any answer from the provider resets it. */
  #unreachable = 0;
  #open: (BreakerState & { hold: number }) | undefined;

  constructor(label: string, holdMs: number) {
    this.#label = label;
    this.#holdMs = holdMs;
  }

  /** Open or half-open: at most one request (the probe) may be in flight. */
  get probing(): boolean {
    return this.#open !== undefined;
  }

  /**
   * The refusal for every queued request while the breaker is open and its hold lasts. Once the
   * hold is over it turns half-open and refuses nothing: one request probes whether the
   * provider is back (`probing`), the rest wait for it.
   */
  refusal(now: number): BreakerRefusal | undefined {
    const breaker = this.#open;
    if (breaker?.state !== 'open') return undefined;
    if (now < breaker.probeAt!) {
      return { ok: false, reason: 'breaker', code: breaker.code, message: breaker.message };
    }
    breaker.state = 'half-open';
    delete breaker.probeAt;
    return undefined;
  }

  /** The provider answered: whatever it said, it is reachable, and an open breaker closes. */
  answered(): void {
    this.#unreachable = 0;
    this.#open = undefined;
  }

  /** An admitted attempt ended: a failure to connect or a refused key may open the breaker. */
  settled(report: SettleReport, now: number): void {
    const { outcome } = report;
    if (opensBreaker(outcome)) {
      // A refused key opens it at once; a refused probe reopens it for twice as long. Requests
      // sent before it opened and refused since change nothing.
      const breaker = this.#open;
      if (breaker?.state === 'open') return;
      this.#trip(report, now, breaker ? breaker.hold * 2 : this.#holdMs);
      return;
    }
    if (outcome === 'unreachable') {
      this.#unreachable++;
      const breaker = this.#open;
      // A half-open breaker's probe failed, or enough failures in a row to open it.
      if (breaker?.state === 'half-open') this.#trip(report, now, breaker.hold * 2);
      else if (!breaker && this.#unreachable >= BREAKER_FAILURES) {
        this.#trip(report, now, this.#holdMs);
      }
      return;
    }
    // Any status from the provider (a success, a refusal, a 500, a 400) says it is reachable.
    const answered = outcome !== 'aborted' && (outcome !== 'failed' || report.answered === true);
    if (answered) this.answered();
  }

  /** For the key's state: undefined while closed. */
  describe(): BreakerState | undefined {
    if (this.#open === undefined) return undefined;
    const { hold: _hold, ...breaker } = this.#open;
    return breaker;
  }

  #trip(report: SettleReport, now: number, hold: number): void {
    const code = report.outcome === 'auth' ? 'auth' : 'connection';
    const cause = report.message ?? (code === 'auth' ? 'the API key was refused' : 'no connection');
    const message =
      code === 'auth'
        ? `${cause}: stopped sending requests for ${this.#label}`
        : `the provider is unreachable (${this.#unreachable} connection failures in a row; the last: ${cause}): stopped sending requests for ${this.#label}. Check that it is up and that the base URL is right (--base-url, ANTHROPIC_BASE_URL)`;
    const capped = Math.min(Math.max(BREAKER_MAX_HOLD_MS, this.#holdMs), hold);
    this.#open = { state: 'open', code, message, probeAt: now + capped, hold: capped };
  }
}
