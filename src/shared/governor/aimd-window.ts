import { AdaptiveWindow } from './adaptive-window.js';
import type { WindowAnswer, WindowSample } from './concurrency.js';
import { capacityOf } from './refusal-capacity.js';

/** The least a cut keeps of the requests in flight, however many were refused. */
const LEAST_KEPT = 0.5;
/** A round trip of evidence holds at least this many attempts, however small the window. */
const MIN_ROUND_SAMPLES = 16;
/** A round trip with at least this share refused is past doubt: overload, whatever came before. */
const SEVERE = 0.5;
/** How far the background rate moves toward each round trip's rate once it has a history. */
const BACKGROUND_WEIGHT = 0.2;

/**
 * Additive increase, multiplicative decrease, told apart from random refusals. A provider may
 * refuse a share of requests whatever one client does (the real API answers 529 at random under
 * its own load): cutting on every refusal would shrink the window to about √(1/(0.3·p)) under a
 * random refusal rate p, as TCP does under random loss. So the window judges refusals by round
 * trip (at least the requests that were in flight, and at least 16 attempts): it learns the
 * background rate, the share refused whatever the window, and cuts only when a round trip's
 * refusals stand out from it. A cut keeps the requests that got through (1 − the excess rate, at
 * least half), or the capacity the refusals tell (see `#cut`).
 * A cut whose next round trip is refused as often (not less than chance explains) is
 * undone, and that rate becomes the background: so the first refusals are taken as congestion
 * on trial, never as the background outright (a cold burst past a hard capacity would
 * otherwise teach that as normal).
 */
export class AimdWindow extends AdaptiveWindow {
  /** Below this, each success adds one (doubling per round trip); above, one per round trip. */
  #threshold = Number.POSITIVE_INFINITY;
  /** The share of attempts refused whatever the window: learned per round trip. */
  #background = 0;
  #rounds = 0;
  /**
   * This round trip: the attempts numbered after `#roundAfter`, `#roundTarget` of them, judged
   * once all have settled. Counting a fixed set of attempts, not the next N to settle, matters:
   * a refusal comes back long before a success sent with it, so the first N to settle after any
   * instant hold more than their share of refusals.
   */
  #roundAfter = 0;
  #roundTarget = MIN_ROUND_SAMPLES;
  #settled = 0;
  /** Of those settled, the ones the provider answered (a success or a refusal). */
  #answered = 0;
  #refused = 0;
  /** The most requests in flight this round trip saw: what a cut keeps a share of. */
  #flight = 0;
  /** How many responses of this key were under way when each of this round trip's refusals came back. */
  readonly #openAtRefusals: number[] = [];
  /** The last round trip's refusal rate, for the state the governor reports. */
  #lastRate = 0;
  /** The window before the last cut, and the rate that made it: undone if the rate holds. */
  #beforeCut: { size: number; threshold: number; rate: number } | undefined;

  override get refusalRate(): number {
    return this.#lastRate;
  }

  override get congested(): boolean {
    return Number.isFinite(this.#threshold);
  }

  sample(sample: WindowSample): boolean | undefined {
    // The window grows only if it was in use: otherwise a quiet key would earn a large window
    // it never tested, and spend it at once in a burst.
    if (sample.ok && sample.wasFull) {
      const step = this.size < this.#threshold ? 1 : 1 / this.size;
      this.size = Math.min(this.ceiling, this.size + step);
    }
    if (sample.counted) return undefined;
    const answer = sample.ok ? 'ok' : sample.refused ? 'refused' : 'none';
    return this.#count(sample, answer);
  }

  override answered(answer: WindowAnswer): boolean | undefined {
    return this.#count(answer, 'ok');
  }

  /** One attempt of the round trip is decided: it got through, it was refused, or neither. */
  #count(
    attempt: WindowAnswer & { open?: number },
    answer: 'ok' | 'refused' | 'none',
  ): boolean | undefined {
    const after = this.#roundAfter;
    if (attempt.sequence <= after || attempt.sequence > after + this.#roundTarget) return undefined;
    this.#settled++;
    if (answer !== 'none') this.#answered++;
    if (answer === 'refused') {
      this.#refused++;
      // Refused while this key had nothing under way says nothing of what it can have.
      if (attempt.open) this.#openAtRefusals.push(attempt.open);
    }
    this.#flight = Math.max(this.#flight, attempt.inFlight);
    // Half the round trip refused is decided at once, whatever the rest does.
    const severe = this.#refused >= SEVERE * this.#roundTarget;
    return this.#settled >= this.#roundTarget || severe ? this.#endRound(attempt) : undefined;
  }

  /**
   * How far below `rate` a round trip of `sent` attempts may fall by chance alone (two standard
   * deviations): a cut is undone only when the next round trip was not refused less than that,
   * since past a hard capacity a smaller window is refused less, if not yet zero.
   */
  #chance(rate: number, sent: number): number {
    return 2 * Math.sqrt((rate * (1 - rate)) / Math.max(1, sent));
  }

  /** Refusals in `sent` attempts beyond which chance at the background rate is no explanation. */
  #expected(sent: number): number {
    const background = this.#background;
    const spread = 2 * Math.sqrt(Math.max(1, sent * background * (1 - background)));
    return sent * background + spread + 1;
  }

  /** Judges a whole round trip; says whether half or more of it was refused. */
  #endRound(attempt: WindowAnswer): boolean {
    // A round trip decided early counts the attempts it expected: its rate errs low.
    const complete = this.#settled >= this.#roundTarget;
    const sent = Math.max(1, complete ? this.#answered : this.#roundTarget);
    const rate = this.#refused / sent;
    this.#lastRate = rate;
    this.#rounds++;
    const background = this.#background;
    const standsOut = this.#refused > this.#expected(sent);
    const weight = Math.max(BACKGROUND_WEIGHT, 1 / this.#rounds);
    const cut = this.#beforeCut;
    this.#beforeCut = undefined;
    if (cut !== undefined && rate < SEVERE && rate >= cut.rate - this.#chance(cut.rate, sent)) {
      // The smaller window was refused as often: the refusals do not depend on the window.
      // Undo the cut, and take that rate as what the provider refuses whatever one client does.
      // The window stays congested: a provider that pushed back is no longer followed to the
      // demand, and the window grows from here by one per round trip.
      this.size = cut.size;
      this.#threshold = Math.min(cut.threshold, cut.size);
      this.#background = Math.max(background, (rate + cut.rate) / 2);
    } else if (rate >= SEVERE || standsOut) {
      this.#beforeCut = { size: this.size, threshold: this.#threshold, rate };
      this.#cut(this.#flight, rate - background, this.#openAtRefusals);
    } else {
      // A round trip like the others: it is what the provider refuses whatever one client does.
      this.#background = background + weight * (rate - background);
    }
    this.#roundAfter = attempt.latest;
    this.#roundTarget = Math.max(MIN_ROUND_SAMPLES, this.#flight);
    this.#settled = 0;
    this.#answered = 0;
    this.#refused = 0;
    this.#flight = 0;
    this.#openAtRefusals.length = 0;
    return rate >= SEVERE;
  }

  /**
   * Keeps the share that got through of what was in flight, or, when the refusals tell a
   * capacity, that capacity: one cut per round trip. Refused requests back off before they try
   * again, so a round trip past a hard capacity is refused less than its excess, and a cut by the
   * share alone can stay past it (then refused as often, and undone). A refusal that depends on
   * load comes when the provider is full: a key alone on a capacity C has about C responses under
   * way at each, however many it has in flight. A refusal that does not depend on load comes
   * whatever is under way, so their counts spread.
   */
  #cut(inFlight: number, excess: number, openAtRefusals: number[]): void {
    const kept = Math.max(LEAST_KEPT, 1 - excess);
    const base = Math.min(this.size, Math.max(1, inFlight));
    const target = capacityOf(openAtRefusals, base) ?? base * kept;
    this.size = Math.max(1, this.floor, target);
    this.#threshold = this.size;
  }
}
