/**
 * Adaptive concurrency of one key: how many requests it may have in flight. The default is
 * additive increase, multiplicative decrease with a slow start; docs/GOVERNOR.md has the figures
 * it was chosen by, against a latency gradient and a fixed window.
 */

/** The ways a window can adapt: `fixed` does not, and leaves pacing to the rate buckets. */
export type ConcurrencyControl = 'aimd' | 'gradient' | 'fixed';

export const CONCURRENCY_CONTROLS: readonly ConcurrencyControl[] = ['aimd', 'gradient', 'fixed'];

/** What the governor tells a window about one settled attempt. */
export interface WindowSample {
  /** Attempt sequence number, and the latest one handed out when it settled. */
  sequence: number;
  latest: number;
  /** The provider refused it: 429 or 529. */
  refused: boolean;
  /** The attempt succeeded. */
  ok: boolean;
  /** The window was full when it went out. */
  wasFull: boolean;
  /** From admission to settle, in ms. */
  latencyMs: number;
  /** Requests queued behind the window when it settled. */
  queued: number;
  /** Requests in flight when it settled, itself included. */
  inFlight: number;
  /** Its response head was counted for the round trip already (`answered`). */
  counted: boolean;
  /**
   * Other requests of this key whose responses had begun when it settled: for a refusal, how
   * many responses the provider was giving this key when it said it could give no more.
   */
  open: number;
}

/** A success's response head: it counts for the round trip then, not when the stream ends. */
export interface WindowAnswer {
  sequence: number;
  latest: number;
  inFlight: number;
}

export interface Window {
  /** Requests that may be in flight now: at least one, so a key always makes progress. */
  readonly limit: number;
  /** The window that still fills the account's known limits: no cut goes below it. */
  floor: number;
  /** The share of the last round trip's attempts the provider refused. */
  readonly refusalRate: number;
  /** The provider has pushed back: the window no longer opens on what the headers allow. */
  readonly congested: boolean;
  /**
   * Learns from one settled attempt. When it ends a round trip, says whether half or more of
   * that round trip was refused (the key then pauses); otherwise undefined.
   */
  sample(sample: WindowSample): boolean | undefined;
  /**
   * An attempt's response began (status 200): it counts for its round trip now, so a round trip
   * is judged within a time to first byte, not when its longest stream ends. Says, like
   * `sample`, whether it ended a round trip refused half or more.
   */
  answered(answer: WindowAnswer): boolean | undefined;
  /** Opens the window to at least `size`: the provider said that much may be sent. */
  open(size: number): void;
}

export function makeWindow(control: ConcurrencyControl, initial: number, ceiling: number): Window {
  switch (control) {
    case 'aimd':
      return new AimdWindow(initial, ceiling);
    case 'gradient':
      return new GradientWindow(initial, ceiling);
    case 'fixed':
      return {
        limit: Number.isFinite(ceiling) ? ceiling : Number.MAX_SAFE_INTEGER,
        floor: 1,
        refusalRate: 0,
        congested: true,
        sample: () => undefined,
        answered: () => undefined,
        open() {},
      };
  }
}

/** The least a cut keeps of the requests in flight, however many were refused. */
const LEAST_KEPT = 0.5;
/** A round trip of evidence holds at least this many attempts, however small the window. */
const MIN_ROUND_SAMPLES = 16;
/** A round trip with at least this share refused is past doubt: overload, whatever came before. */
const SEVERE = 0.5;
/** How far the background rate moves toward each round trip's rate once it has a history. */
const BACKGROUND_WEIGHT = 0.2;

/** A window whose size is a real number between 1 and its ceiling; the limit is its floor. */
abstract class AdaptiveWindow implements Window {
  protected size: number;
  protected readonly ceiling: number;
  /** The window that still fills the account's known limits: no cut goes below it. */
  floor = 1;

  constructor(initial: number, ceiling: number) {
    this.ceiling = ceiling;
    this.size = Math.min(initial, ceiling);
  }

  get limit(): number {
    return Math.max(1, Math.floor(Math.min(this.ceiling, Math.max(this.size, this.floor))));
  }

  get refusalRate(): number {
    return 0;
  }

  get congested(): boolean {
    return false;
  }

  open(size: number): void {
    this.size = Math.min(this.ceiling, Math.max(this.size, size));
  }

  abstract sample(sample: WindowSample): boolean | undefined;

  answered(_answer: WindowAnswer): boolean | undefined {
    return undefined;
  }
}

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
class AimdWindow extends AdaptiveWindow {
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

/** The fewest refusals whose counts of responses under way can tell a capacity. */
const CAPACITY_SAMPLES = 4;
/** How close together those counts must be: the lower quartile at least this share of the upper. */
const CAPACITY_SPREAD = 0.85;
/** How far below the window the capacity must be to be told from a window that was simply full. */
const CAPACITY_BELOW = 0.9;

/**
 * The capacity a round trip's refusals tell, or undefined: the responses this key had under way
 * at each refusal, when they agree (a key counts a response as under way a little after the
 * provider ended it, so the lower quartile) and are well below what it had in flight. Counts
 * that spread say the refusals came whatever the load; counts as high as the window say only
 * that the window was full.
 */
function capacityOf(openAtRefusals: number[], inFlight: number): number | undefined {
  if (openAtRefusals.length < CAPACITY_SAMPLES) return undefined;
  const sorted = openAtRefusals.slice().sort((a, b) => a - b);
  const lower = sorted[Math.floor((sorted.length - 1) / 4)]!;
  const upper = sorted[Math.ceil(((sorted.length - 1) * 3) / 4)]!;
  if (lower < CAPACITY_SPREAD * upper || lower >= CAPACITY_BELOW * inFlight) return undefined;
  return lower;
}

/**
 * A latency gradient in the manner of TCP Vegas and its descendants: the window scales by the
 * ratio of the long-run latency to the recent latency, plus a little headroom, so it shrinks as
 * requests queue up somewhere and grows while latency holds. Refusals do not steer it: a 429
 * answers fast, which reads as spare capacity. Kept for the comparison in docs/GOVERNOR.md.
 */
class GradientWindow extends AdaptiveWindow {
  #shortMs = 0;
  #longMs = 0;

  /** Its latency alone steers it: it never opens on what the headers allow. */
  override get congested(): boolean {
    return true;
  }

  sample(sample: WindowSample): undefined {
    if (sample.refused || !sample.ok) return undefined;
    const latency = Math.max(1, sample.latencyMs);
    this.#shortMs = this.#shortMs === 0 ? latency : this.#shortMs + 0.1 * (latency - this.#shortMs);
    this.#longMs = this.#longMs === 0 ? latency : this.#longMs + 0.01 * (latency - this.#longMs);
    // Only a window in use says anything about capacity.
    if (!sample.wasFull) return undefined;
    const gradient = Math.max(0.5, Math.min(1, this.#longMs / this.#shortMs));
    const target = this.size * gradient + Math.sqrt(this.size);
    this.size = Math.min(this.ceiling, Math.max(1, 0.8 * this.size + 0.2 * target));
    return undefined;
  }
}
