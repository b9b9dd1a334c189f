/**
 * The error tree. Every class carries a stable `code`.
 *
 * `UsageError` is a mistake by the caller (a bad option, a bad input line): its message says what
 * was expected and what arrived. Faults of the system are never thrown at the caller: an agent
 * that fails settles `failed` with a `Failure` (`{ code, message }`, see failure.ts), the only
 * shape that crosses a thread boundary.
 */
export class CohortError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A mistake by the caller: bad option, bad input. */
export class UsageError extends CohortError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('usage', message, options);
  }
}

/** How `describeValue` shows a value. */
export interface DescribeValueOptions {
  /**
   * Show a string as JSON (`` `"user"` ``) instead of bare (`` `user` ``). For values read from a
   * JSON document, where the quotes set `"0"` apart from `0` and make an empty string visible; a
   * word from the command line reads better bare.
   */
  quoteStrings?: boolean;
}

/**
 * Shows a received value for an error message, in the shape p-queue uses:
 * `` `0` (number) ``, or `nothing` for `undefined`. Long values are shortened so a message stays
 * readable.
 */
export function describeValue(
  value: unknown,
  maxChars = 120,
  options: DescribeValueOptions = {},
): string {
  if (value === undefined) return 'nothing';
  let shown: string;
  let kind: string = typeof value;
  if (value === null) kind = 'null';
  else if (Array.isArray(value)) kind = 'array';
  try {
    shown =
      typeof value === 'string' && !options.quoteStrings
        ? value
        : typeof value === 'number'
          ? String(value) // JSON shows Infinity and NaN as `null`
          : (JSON.stringify(value) ?? String(value));
  } catch {
    // A cycle, a BigInt, or nesting too deep for JSON.stringify: String() of a deep array
    // would recurse as deep, so name only the kind.
    shown =
      Array.isArray(value) || (typeof value === 'object' && value !== null)
        ? `[${kind}]`
        : String(value);
  }
  if (shown.length > maxChars) shown = `${shown.slice(0, maxChars)}…`;
  return `\`${shown}\` (${kind})`;
}

/** Builds the standard message: Expected `name` to be WHAT, got `value` (type). */
export function expected(name: string, what: string, value: unknown): UsageError {
  return new UsageError(`Expected \`${name}\` to be ${what}, got ${describeValue(value)}`);
}
