import { AdaptiveWindow } from './adaptive-window.js';
import type { WindowSample } from './concurrency.js';

/**
 * A latency gradient in the manner of TCP Vegas and its descendants: the window scales by the
 * ratio of the long-run latency to the recent latency, plus a little headroom, so it shrinks as
 * requests queue up somewhere and grows while latency holds. Refusals do not steer it: a 429
 * answers fast, which reads as spare capacity. Kept for the comparison in docs/GOVERNOR.md.
 */
export class GradientWindow extends AdaptiveWindow {
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
