import { UsageError } from './errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a duration: `500ms`, `2s`, `5m`, `1h`, `1.5s`, or a plain number of milliseconds.
 * Throws a UsageError naming `name`, what was expected and what arrived.
 */
export function parseDuration(value: string | number, name = 'duration'): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return value;
  } else {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(value);
    if (match) return Math.round(Number(match[1]) * UNITS[match[2] ?? 'ms']!);
  }
  throw new UsageError(
    `Expected \`${name}\` to be a duration like 500ms, 2s, 5m, 1h or a number of milliseconds, got \`${String(value)}\` (${typeof value})`,
  );
}
