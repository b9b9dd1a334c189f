import { MAX_DURATION_MS } from '../shared/duration.js';
import { expected } from '../shared/errors.js';

/** Checks an optional whole number within bounds; the message says what arrived. */
export function checkInteger(
  name: string,
  value: unknown,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `from ${min} and up` : `from ${min} to ${max}`;
    throw expected(name, `a whole number ${range}`, value);
  }
  return value;
}

export function checkString(name: string, value: unknown, allowEmpty = false): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || (!allowEmpty && value.trim() === '')) {
    throw expected(name, allowEmpty ? 'a string' : 'a non-empty string', value);
  }
  return value;
}

export function checkStringArray(name: string, value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
    throw expected(name, 'an array of strings', value);
  }
  return value as string[];
}

/**
 * Checks an optional duration in whole milliseconds. Node fires a timer longer than 2³¹−1 ms
 * after 1 ms, so anything above that (about 24.8 days) is refused rather than silently becoming
 * "now".
 */
export function checkDurationMs(name: string, value: unknown, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < min ||
    value > MAX_DURATION_MS
  ) {
    throw expected(
      name,
      `a whole number of milliseconds from ${min} to ${MAX_DURATION_MS} (about 24.8 days)`,
      value,
    );
  }
  return value;
}
