/**
 * What the bench watches on the measured process's main thread while an engine runs: the event
 * loop's delay and the resident set size.
 */
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';

/** Timer resolution of the delay histogram, in ms. Node records whole intervals, so it is subtracted. */
const RESOLUTION_MS = 1;
const RSS_EVERY_MS = 50;

export interface ProbeFigures {
  /** Main-thread event-loop delay, ms beyond the timer's own interval. */
  eventLoopDelay: { p50: number; p99: number; max: number; samples: number };
  /** Highest RSS sampled (every 50 ms), bytes. */
  peakRssBytes: number;
}

/** Samples event-loop delay and RSS between `start()` and `stop()`. */
export class MainThreadProbe {
  #histogram: IntervalHistogram | undefined;
  #timer: NodeJS.Timeout | undefined;
  #peakRss = 0;

  start(): void {
    this.#peakRss = process.memoryUsage.rss();
    this.#histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    this.#histogram.enable();
    this.#timer = setInterval(() => this.sampleRss(), RSS_EVERY_MS);
  }

  /** Takes one RSS sample now (also done every 50 ms). */
  sampleRss(): number {
    const rss = process.memoryUsage.rss();
    if (rss > this.#peakRss) this.#peakRss = rss;
    return rss;
  }

  stop(): ProbeFigures {
    this.sampleRss();
    if (this.#timer) clearInterval(this.#timer);
    const histogram = this.#histogram;
    histogram?.disable();
    const delay = (p: number): number =>
      histogram && histogram.count > 0
        ? Math.max(0, histogram.percentile(p) / 1e6 - RESOLUTION_MS)
        : 0;
    return {
      eventLoopDelay: {
        p50: delay(50),
        p99: delay(99),
        max:
          histogram && histogram.count > 0 ? Math.max(0, histogram.max / 1e6 - RESOLUTION_MS) : 0,
        samples: histogram?.count ?? 0,
      },
      peakRssBytes: this.#peakRss,
    };
  }
}
