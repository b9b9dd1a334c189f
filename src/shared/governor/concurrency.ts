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
}

export interface Window {
  /** Requests that may be in flight now: at least one, so a key always makes progress. */
  readonly limit: number;
  sample(sample: WindowSample): void;
}

export function makeWindow(control: ConcurrencyControl, initial: number, ceiling: number): Window {
  switch (control) {
    case 'aimd':
      return new AimdWindow(initial, ceiling);
    case 'gradient':
      return new GradientWindow(initial, ceiling);
    case 'fixed':
      return { limit: Number.isFinite(ceiling) ? ceiling : Number.MAX_SAFE_INTEGER, sample() {} };
  }
}

/** The cut on a 429 or 529: gentle enough that rate pacing, not this, sets the pace. */
const DECREASE = 0.7;

/** A window whose size is a real number between 1 and its ceiling; the limit is its floor. */
abstract class AdaptiveWindow implements Window {
  protected size: number;
  protected readonly ceiling: number;

  constructor(initial: number, ceiling: number) {
    this.ceiling = ceiling;
    this.size = Math.min(initial, ceiling);
  }

  get limit(): number {
    return Math.max(1, Math.floor(this.size));
  }

  abstract sample(sample: WindowSample): void;
}

class AimdWindow extends AdaptiveWindow {
  /** Below this, each success adds one (doubling per round trip); above, one per round trip. */
  #threshold = Number.POSITIVE_INFINITY;
  /** Attempt sequence number at the last cut: one cut per round trip, not one per 429. */
  #cutAfter = -1;

  sample(sample: WindowSample): void {
    if (sample.refused) this.#cut(sample.sequence, sample.latest);
    // The window grows only if it was in use: otherwise a quiet key would earn a large window
    // it never tested, and spend it at once in a burst.
    else if (sample.ok && sample.wasFull) {
      const step = this.size < this.#threshold ? 1 : 1 / this.size;
      this.size = Math.min(this.ceiling, this.size + step);
    }
  }

  /** Attempts already in flight at the last cut report the same congestion: no second cut. */
  #cut(sequence: number, latest: number): void {
    if (sequence <= this.#cutAfter) return;
    this.#cutAfter = latest;
    this.size = Math.max(1, this.size * DECREASE);
    this.#threshold = this.size;
  }
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

  sample(sample: WindowSample): void {
    if (sample.refused || !sample.ok) return;
    const latency = Math.max(1, sample.latencyMs);
    this.#shortMs = this.#shortMs === 0 ? latency : this.#shortMs + 0.1 * (latency - this.#shortMs);
    this.#longMs = this.#longMs === 0 ? latency : this.#longMs + 0.01 * (latency - this.#longMs);
    // Only a window in use says anything about capacity.
    if (!sample.wasFull) return;
    const gradient = Math.max(0.5, Math.min(1, this.#longMs / this.#shortMs));
    const target = this.size * gradient + Math.sqrt(this.size);
    this.size = Math.min(this.ceiling, Math.max(1, 0.8 * this.size + 0.2 * target));
  }
}
