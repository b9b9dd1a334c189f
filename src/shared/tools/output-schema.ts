import { Ajv, type ValidateFunction } from 'ajv';
import { describeValue, expected, UsageError } from '../errors.js';

/**
 * Output schemas (typed replies) come from users and models, so they are compiled apart from the
 * tools' schemas: each with an Ajv of its own, so two schemas that share an `$id` never clash,
 * and kept in a bounded cache, so a model that writes a new schema for every spawn cannot grow a
 * thread's memory without end.
 */
const MAX_CACHED = 256;
const cache = new Map<string, ValidateFunction>();

/** A compiled output schema, cached by its JSON text. Throws when Ajv refuses it. */
export function outputValidator(schema: object): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = cache.get(key);
  if (validate) {
    // Most recently used goes last; the first key is the one to evict.
    cache.delete(key);
  } else {
    validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
    if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value as string);
  }
  cache.set(key, validate);
  return validate;
}

/**
 * What keeps `schema` from working as a reply's `result`, if anything. It is advertised nested
 * under the `reply` tool's `properties.result`, with its `definitions` and `$defs` lifted to the
 * top, so a `$ref` into those still resolves; any other document-relative `$ref` (`#`,
 * `#/properties/…`) would point into the wrapper instead. A schema with its own `$id` resolves
 * against itself.
 */
export function outputSchemaProblem(schema: Record<string, unknown>): string | undefined {
  if (typeof schema.$id === 'string') return undefined;
  const bad = relativeRefs(schema).find(
    (ref) => !ref.startsWith('#/definitions/') && !ref.startsWith('#/$defs/'),
  );
  return bad === undefined
    ? undefined
    : `its \`$ref\` \`${bad}\` points into the schema's own document, which is nested in the reply tool's input; refer only to \`#/definitions/…\` or \`#/$defs/…\`, or give the schema an \`$id\``;
}

function relativeRefs(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) {
    for (const item of value) relativeRefs(item, found);
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string' && item.startsWith('#')) found.push(item);
      else relativeRefs(item, found);
    }
  }
  return found;
}

/** A JSON Schema Ajv compiles (an object); its refusal is passed on in the message. */
export function checkOutputSchema(name: string, value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw expected(name, 'a JSON Schema (an object)', value);
  }
  try {
    outputValidator(value);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UsageError(
      `Expected \`${name}\` to be a JSON Schema, but it does not compile: ${why}; got ${describeValue(value, 200)}`,
    );
  }
  const unusable = outputSchemaProblem(value as Record<string, unknown>);
  if (unusable !== undefined) {
    throw new UsageError(`Expected \`${name}\` to be usable as a reply's schema, but ${unusable}`);
  }
}
