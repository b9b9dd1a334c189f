/**
 * Adaptive concurrency of one key: how many requests it may have in flight. The default is
 * additive increase, multiplicative decrease with a slow start; docs/GOVERNOR.md has the figures
 * it was chosen by, against a latency gradient and a fixed window.
 */
import { AimdWindow } from './aimd-window.js';
import { GradientWindow } from './gradient-window.js';

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
