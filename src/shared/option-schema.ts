import { MAX_DURATION_MS } from './duration.js';
import { expected } from './errors.js';

/**
 * Option schemas: each option set (an engine's options, a spawn's, a task line, …) is declared
 * once as a record of fields, and its TypeScript type, its check and its messages come from that
 * declaration. A field is JSON Schema (`type`, `minimum`, `maximum`, `enum`, `pattern`, `items`),
 * so it reads like one and can be handed to Ajv as it is, plus what a message needs:
 * `expected`, the words for what a value must be (``Expected `maxSteps` to be EXPECTED, got
 * …``), built from the same bounds the check uses, so a range is written once.
 *
 * Why not a schema library: typebox 1.x, @sinclair/typebox 0.34 and zod 4 cost 45 to 175 ms to
 * import here (docs/DEPENDENCIES.md), paid by every CLI start, and cohort's messages are its own
 * in any case; the kernel below is the part of such a library this needs.
 */

/** One option: JSON Schema keywords, what a message says it must be, and its type. */
export interface Field<T = unknown> {
  readonly type?: 'integer' | 'number' | 'string' | 'boolean' | 'array' | 'object';
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: number;
  /** A string must match it (`\S`: not empty or blank). */
  readonly pattern?: string;
  readonly enum?: readonly T[];
  readonly items?: Field;
  /** What a value must be, for messages: `a whole number from 1 to 10000`. */
  readonly expected: string;
  /** Whether a set must have it (its type is then not optional): see `required`. */
  readonly required?: boolean;
  /**
   * The value an unset option takes, for readers of the schema (as a `@defaultValue`): give the
   * same constant the code falls back on, so it is written once.
   */
  readonly default?: T;
  /**
   * A test no keyword can state (an AbortSignal, a function), run after the keywords; a test
   * with a message of its own (an output schema that does not compile) throws it instead.
   * `holder` is the options object the value is a field of, for a rule across fields.
   */
  readonly test?: (
    value: unknown,
    name: string,
    holder: Readonly<Record<string, unknown>>,
  ) => boolean;
  /** A nested option set (`provider`): its fields are checked as `NAME.FIELD`. */
  readonly properties?: Fields;
  /**
   * The CLI flag that sets it (`--max-steps`): messages shown to CLI users name it, and the CLI
   * parses and lists it from here.
   */
  readonly flag?: string;
  /** The flag's value as help shows it (`N`, `DURATION`, `on|off`); a flag without one is a switch. */
  readonly arg?: string;
  /** What the CLI's help says of the flag, after its name; each `\n` starts a line of its own. */
  readonly help?: string;
  /** Carries the field's TypeScript type; never set at run time. */
  readonly '~value'?: T;
}

/** An option set: its fields in the order they are checked. */
export type Fields = Readonly<Record<string, Field>>;

/** The type of one field's values. */
export type ValueOf<F> = F extends Field<infer T> ? T : never;

type RequiredKeys<S extends Fields> = {
  [K in keyof S]: S[K] extends { readonly required: true } ? K : never;
}[keyof S];

/**
 * The type of an option set. An optional option may be given as `undefined`, which every check
 * takes as unset, so a caller can pass on a value it may not have without a conditional spread.
 */
export type OptionsOf<S extends Fields> = {
  -readonly [K in keyof S as K extends RequiredKeys<S> ? K : never]: ValueOf<S[K]>;
} & {
  -readonly [K in keyof S as K extends RequiredKeys<S> ? never : K]?: ValueOf<S[K]> | undefined;
};

/** Whether `value` meets the field's keywords and its test. */
export function accepts(
  field: Field,
  value: unknown,
  name = '',
  holder: Readonly<Record<string, unknown>> = {},
): boolean {
  switch (field.type) {
    case 'integer':
      if (!Number.isInteger(value)) return false;
      break;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) return false;
      break;
    case 'string':
      if (typeof value !== 'string') return false;
      break;
    case 'boolean':
      if (typeof value !== 'boolean') return false;
      break;
    case 'array':
      if (!Array.isArray(value)) return false;
      if (field.items && !value.every((item) => accepts(field.items!, item))) return false;
      break;
    case 'object':
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
      break;
  }
  if (typeof value === 'number') {
    if (field.minimum !== undefined && value < field.minimum) return false;
    if (field.maximum !== undefined && value > field.maximum) return false;
    if (field.exclusiveMinimum !== undefined && value <= field.exclusiveMinimum) return false;
  }
  if (typeof value === 'string' && field.pattern !== undefined) {
    if (!patternOf(field.pattern).test(value)) return false;
  }
  if (field.enum !== undefined && !field.enum.includes(value as never)) return false;
  if (field.properties !== undefined && typeof value === 'object' && value !== null) {
    checkOptions(field.properties, value as Record<string, unknown>, `${name}.`);
  }
  return field.test === undefined || field.test(value, name, holder);
}

/** Each field's `pattern`, compiled once: a spawn checks its fields on every call. */
const PATTERNS = new Map<string, RegExp>();

function patternOf(source: string): RegExp {
  let pattern = PATTERNS.get(source);
  if (pattern === undefined) {
    pattern = new RegExp(source);
    PATTERNS.set(source, pattern);
  }
  return pattern;
}

/**
 * Checks one option; unset (`undefined`) passes unless the field is required. Throws the house
 * UsageError: ``Expected `NAME` to be EXPECTED, got `VALUE` (type)``.
 */
export function checkOption<F extends Field>(
  name: string,
  field: F,
  value: unknown,
  holder: Readonly<Record<string, unknown>> = {},
): ValueOf<F> | undefined {
  if (value === undefined && !field.required) return undefined;
  if (!accepts(field, value, name, holder)) throw expected(name, field.expected, value);
  return value as ValueOf<F>;
}

/**
 * Checks each field of `fields` in `options`, in the order declared, and throws at the first
 * refusal. `prefix` names a nested set in messages (`provider.` gives `provider.maxTokens`).
 * Keys the set does not declare are left alone.
 */
export function checkOptions<S extends Fields>(
  fields: S,
  options: Readonly<Record<string, unknown>>,
  prefix = '',
): OptionsOf<S> {
  for (const [key, field] of entriesOf(fields)) {
    const value = options[key];
    // Unset and optional: nothing to check, and no name to build (a spawn checks every field).
    if (value === undefined && !field.required) continue;
    checkOption(`${prefix}${key}`, field, value, options);
  }
  return options as OptionsOf<S>;
}

/** Each option set's fields as entries, listed once: a spawn checks its set on every call. */
const ENTRIES = new WeakMap<Fields, readonly (readonly [string, Field])[]>();

function entriesOf(fields: Fields): readonly (readonly [string, Field])[] {
  let entries = ENTRIES.get(fields);
  if (entries === undefined) {
    entries = Object.entries(fields);
    ENTRIES.set(fields, entries);
  }
  return entries;
}

/** What every field builder takes beside its own bounds. */
interface Common<T> {
  default?: T;
  flag?: string;
  arg?: string;
  help?: string;
}

/** The field, which a set must have: unset, it is refused like a wrong value. */
export function required<F extends Field>(field: F): F & { readonly required: true } {
  return { ...field, required: true };
}

/** `value` without its keys set to `undefined`: for a type whose optional keys are exact. */
export type Defined<T> = {
  [K in keyof T as undefined extends T[K] ? never : K]: T[K];
} & {
  [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
};

/**
 * Drops the keys of `value` that are `undefined`. Option sets take an unset option as
 * `undefined` (no conditional spread at the caller); the types inside, which cross threads as
 * they are, have exact optional keys (`exactOptionalPropertyTypes`), and this is the one bridge.
 */
export function defined<T extends object>(value: T): Defined<T> {
  const out: Record<string, unknown> = {};
  // A plain loop over own keys: a spawn builds its spec through here, and `Object.entries`
  // allocated an array per key.
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    if (item !== undefined) out[key] = item;
  }
  return out as Defined<T>;
}

/**
 * Bounds of a whole number; without `max` it is any safe integer from `min` up (`Infinity`: any
 * integer at all).
 */
export function wholeNumber(
  min: number,
  max = Number.MAX_SAFE_INTEGER,
  common: Common<number> = {},
): Field<number> {
  const upTo = max === Number.MAX_SAFE_INTEGER || max === Number.POSITIVE_INFINITY;
  const range = upTo ? `from ${min} and up` : `from ${min} to ${max}`;
  return {
    type: 'integer',
    minimum: min,
    maximum: max,
    expected: `a whole number ${range}`,
    ...common,
  };
}

/**
 * A duration in whole milliseconds. Node fires a timer longer than 2³¹−1 ms after 1 ms, so
 * anything above that (about 24.8 days) is refused rather than silently becoming "now".
 */
export function durationMs(min: number, common: Common<number> = {}): Field<number> {
  return {
    type: 'integer',
    minimum: min,
    maximum: MAX_DURATION_MS,
    expected: `a whole number of milliseconds from ${min} to ${MAX_DURATION_MS} (about 24.8 days)`,
    ...common,
  };
}

/** A string that is not empty or blank. */
export function nonEmptyString(common: Common<string> = {}): Field<string> {
  return { type: 'string', pattern: '\\S', expected: 'a non-empty string', ...common };
}

/** Any string, the empty one included. */
export function anyString(common: Common<string> = {}): Field<string> {
  return { type: 'string', expected: 'a string', ...common };
}

/** An array of strings (of type `T`, when they are names of a kind). */
export function stringArray<T extends string = string>(common: Common<T[]> = {}): Field<T[]> {
  return {
    type: 'array',
    items: { type: 'string', expected: 'a string' },
    expected: 'an array of strings',
    ...common,
  };
}

export function boolean(common: Common<boolean> & { expected?: string } = {}): Field<boolean> {
  return { type: 'boolean', expected: 'a boolean', ...common };
}

/** One of a few words; the message lists them (`one of all, failed, none`, or `a or b`). */
export function oneOf<const T extends string>(
  values: readonly T[],
  expectedText: string,
  common: Common<T> = {},
): Field<T> {
  return { enum: values, expected: expectedText, ...common };
}

/** A value no keyword describes (an AbortSignal, a function, a tool): `test` says yes or no. */
export function custom<T>(
  expectedText: string,
  test: NonNullable<Field['test']>,
  common: Common<T> = {},
): Field<T> {
  return { expected: expectedText, test, ...common };
}

/** A `test` made of a check that throws a message of its own (`checkQueueUrl(name, value)`). */
export function checkedBy(
  check: (name: string, value: unknown) => unknown,
): NonNullable<Field['test']> {
  return (value, name) => {
    check(name, value);
    return true;
  };
}

/**
 * A nested option set given as an object (`provider`): each of its fields is checked as
 * `NAME.FIELD`. Like before there was a schema, a value that is not an object is not refused
 * here (its fields all read as unset).
 */
export function nested<T>(properties: Fields, common: Common<T> = {}): Field<T> {
  return { properties, expected: 'an object', ...common };
}
