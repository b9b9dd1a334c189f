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
