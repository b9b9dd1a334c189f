import type { Counters } from './agent-book.js';

/** How often a point is taken. */
export const SAMPLE_MS = 5_000;
/** How far back the chart reaches. */
const SPAN_MS = 15 * 60_000;
/** The window each rate is counted over. */
const RATE_WINDOW_MS = 60_000;

/** One point of the chart: the rates over the minute before `t` (or since the run began). */
export interface SeriesPoint {
  t: number;
  callsPerMinute: number;
  inputTokensPerMinute: number;
  outputTokensPerMinute: number;
}

interface Sample extends Counters {
  t: number;
}

/**
 * Calls and tokens per minute over the last 15 minutes, from cumulative counters sampled every
 * 5 s: each point is the change over the minute before it, so a burst shows as it happened and
 * the line can be held against per-minute limits.
 */
export class RateSeries {
  readonly #samples: Sample[] = [];
  #points: SeriesPoint[] = [];

  constructor(start: Counters, now: number) {
    this.#samples.push({ ...start, t: now });
  }

  /** Takes a point from the counters now. */
  sample(counters: Counters, now: number): void {
    this.#samples.push({ ...counters, t: now });
    while (this.#samples.length > 2 && this.#samples[0]!.t < now - SPAN_MS - RATE_WINDOW_MS) {
      this.#samples.shift();
    }
    const points: SeriesPoint[] = [];
    let from = 0;
    for (let index = 1; index < this.#samples.length; index++) {
      const at = this.#samples[index]!;
      if (at.t < now - SPAN_MS) continue;
      while (this.#samples[from]!.t < at.t - RATE_WINDOW_MS) from++;
      const base = this.#samples[from === index ? index - 1 : from]!;
      const perMinute = RATE_WINDOW_MS / Math.max(1, at.t - base.t);
      points.push({
        t: at.t,
        callsPerMinute: Math.round((at.calls - base.calls) * perMinute),
        inputTokensPerMinute: Math.round((at.inputTokens - base.inputTokens) * perMinute),
        outputTokensPerMinute: Math.round((at.outputTokens - base.outputTokens) * perMinute),
      });
    }
    this.#points = points;
  }

  points(): SeriesPoint[] {
    return this.#points;
  }
}
