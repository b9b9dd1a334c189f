import { describeValue } from '../shared/errors.js';
import { isRecord } from './is-record.js';

/** The outcome of a request check: the checked value, or the 400 message. */
export type Validation<T> = { ok: true; value: T } | { ok: false; message: string };

/**
 * Thrown by the request checks to unwind from deep inside a body; the request-validation
 * entry points turn it into `{ok: false}`, so it never leaves src/testing.
 */
export class RequestProblem extends Error {}

/** Throws "Expected `path` to be EXPECTED, got VALUE (type)". */
export function fail(path: string, expected: string, got: unknown): never {
  throw new RequestProblem(expectation(path, expected, got));
}

/**
 * Throws the real API's wording of a rule, then our "Expected …, got …" for the place that
 * broke it: "RULE. Expected `path` to be EXPECTED, got VALUE (type)".
 */
export function failRule(rule: string, path: string, expected: string, got: unknown): never {
  throw new RequestProblem(`${rule}. ${expectation(path, expected, got)}`);
}

function expectation(path: string, expected: string, got: unknown): string {
  return `Expected \`${path}\` to be ${expected}, got ${describeValue(got, 80, { quoteStrings: true })}`;
}

/** Throws the real API's message for a field it does not know. */
export function failExtra(path: string): never {
  const shown = path.length > 80 ? `${path.slice(0, 80)}…` : path;
  throw new RequestProblem(`${shown}: Extra inputs are not permitted`);
}

/** Runs `check`, turning a RequestProblem into `{ok: false}`. */
export function validation<T>(check: () => T): Validation<T> {
  try {
    return { ok: true, value: check() };
  } catch (error) {
    if (error instanceof RequestProblem) return { ok: false, message: error.message };
    throw error;
  }
}

/** Refuses every key of `value` not in `allowed`, as the real API refuses extra inputs. */
export function checkKeys(
  value: Record<string, unknown>,
  allowed: ReadonlySet<string>,
  path: string,
): void {
  for (const key in value) if (!allowed.has(key)) failExtra(`${path}.${key}`);
}

/** Checks an optional `cache_control`: `{type: "ephemeral", ttl?: "5m" | "1h"}` or null. */
export function checkCacheControl(value: unknown, path: string): void {
  if (value === undefined || value === null) return;
  if (!isRecord(value) || value.type !== 'ephemeral') {
    fail(path, '{"type": "ephemeral", "ttl"?: "5m" | "1h"}', value);
  }
  const { ttl } = value;
  if (ttl !== undefined && ttl !== '5m' && ttl !== '1h') fail(`${path}.ttl`, '"5m" or "1h"', ttl);
  for (const key in value) if (key !== 'type' && key !== 'ttl') failExtra(`${path}.${key}`);
}

/** Checks that `value` is a string (or null, when `nullable`) if present. */
export function checkOptionalString(value: unknown, path: string, nullable = false): void {
  if (value === undefined || typeof value === 'string' || (nullable && value === null)) return;
  fail(path, nullable ? 'a string or null' : 'a string', value);
}
