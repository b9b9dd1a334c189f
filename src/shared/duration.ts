import { UsageError } from './errors.js';

/**
 * The longest duration a Node timer honours: 2³¹−1 ms (about 24.8 days). A longer `setTimeout`
 * fires after 1 ms, so every duration cohort takes is refused above it.
 */
export const MAX_DURATION_MS = 2 ** 31 - 1;

const UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * Parses a duration: `500ms`, `2s`, `5m`, `1h`, `1.5s`, or a plain number of milliseconds.
 * Throws a UsageError naming `name`, what was expected and what arrived.
 */
export function parseDuration(value: string | number, name = 'duration'): number {
  const ms = durationMs(value);
  if (ms !== undefined && ms <= MAX_DURATION_MS) return ms;
  throw new UsageError(
    `Expected \`${name}\` to be a duration like 500ms, 2s, 5m, 1h or a number of milliseconds, at most ${MAX_DURATION_MS} ms (about 24.8 days), got \`${String(value)}\` (${typeof value})`,
  );
}

/**
 * Parses an age, which no timer waits for, so it has no ceiling: the units of `parseDuration`
 * plus `d` (days) and `w` (weeks), as in `--older-than 30d`.
 */
export function parseAge(value: string, name = 'age'): number {
  const ms = durationMs(value);
  if (ms !== undefined && Number.isSafeInteger(ms)) return ms;
  throw new UsageError(
    `Expected \`${name}\` to be an age like 90m, 36h, 30d, 2w or a number of milliseconds, got \`${value}\``,
  );
}

/** A duration as help shows a default: in the largest unit that divides it (`5s`, `2m`, `1h`). */
export function formatDuration(ms: number): string {
  for (const unit of ['h', 'm', 's'] as const) {
    const size = UNITS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** Whole seconds as a person reads a clock: `45s`, `3m07s`, `2h05m`. */
export function clockText(seconds: number): string {
  const whole = Math.max(0, Math.round(seconds));
  if (whole < 60) return `${whole}s`;
  if (whole < 3600) return `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s`;
  return `${Math.floor(whole / 3600)}h${String(Math.floor((whole % 3600) / 60)).padStart(2, '0')}m`;
}

function durationMs(value: string | number): number | undefined {
  if (typeof value === 'number') {
    return Number.isFinite(value) && value >= 0 ? Math.round(value) : undefined;
  }
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$/.exec(value);
  return match ? Math.round(Number(match[1]) * UNITS[match[2] ?? 'ms']!) : undefined;
}
