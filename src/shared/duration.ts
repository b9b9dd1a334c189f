import { UsageError } from './errors.js';

/**
 * The longest duration a Node timer honours: 2³¹−1 ms (about 24.8 days). A longer `setTimeout`
 * fires after 1 ms, so every duration cohort takes is refused above it.
 */
export const MAX_DURATION_MS = 2 ** 31 - 1;

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a duration: `500ms`, `2s`, `5m`, `1h`, `1.5s`, or a plain number of milliseconds.
 * Throws a UsageError naming `name`, what was expected and what arrived.
 */
export function parseDuration(value: string | number, name = 'duration'): number {
  let ms: number | undefined;
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) ms = Math.round(value);
  } else {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
    if (match) ms = Math.round(Number(match[1]) * UNITS[match[2] ?? 'ms']!);
  }
  if (ms !== undefined && ms <= MAX_DURATION_MS) return ms;
  throw new UsageError(
    `Expected \`${name}\` to be a duration like 500ms, 2s, 5m, 1h or a number of milliseconds, at most ${MAX_DURATION_MS} ms (about 24.8 days), got \`${String(value)}\` (${typeof value})`,
  );
}
