import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Ajv as AjvClass, ValidateFunction } from 'ajv';
import { describeValue, expected, UsageError } from '../errors.js';
import {
  isStandardSchema,
  type JsonSchemaConversion,
  type StandardSchema,
} from '../standard-schema.js';

/**
 * What `outputSchema` may be: a JSON Schema, or a Standard Schema (zod 4, valibot, arktype) that
 * converts to one, whose output type `T` a typed result carries.
 */
export type OutputSchema<T = unknown> =
  | Record<string, unknown>
  | (StandardSchema<unknown, T> & JsonSchemaConvertible);

/** How a Standard Schema gives its JSON Schema: the Standard JSON Schema member, or a method. */
export type JsonSchemaConvertible =
  | { readonly '~standard': { readonly jsonSchema: object } }
  | { toJSONSchema(...args: never[]): unknown }
  | { toJsonSchema(...args: never[]): unknown };

/**
 * Output schemas (typed replies) come from users and models, so they are compiled apart from the
 * tools' schemas: each with an Ajv of its own, so two schemas that share an `$id` never clash,
 * and kept in a bounded cache, so a model that writes a new schema for every spawn cannot grow a
 * thread's memory without end.
 */
const MAX_CACHED = 256;
const cache = new Map<string, ValidateFunction>();

/**
 * The Ajv every schema of cohort's is compiled with (tool inputs, output schemas, agent files).
 * `format` is not checked (no format library is loaded), and without `validateFormats: false`
 * Ajv would print a warning to the console for each schema that names one.
 */
export function schemaAjv(): AjvClass {
  AjvConstructor ??= (createRequire(import.meta.url)('ajv') as typeof import('ajv')).Ajv;
  return new AjvConstructor({ allErrors: true, strict: false, validateFormats: false });
}

/**
 * Ajv's class, loaded on the first schema compiled: a command whose main thread compiles none
 * (no output schema, no agent file) starts without importing it, about 40 ms of CPU.
 */
let AjvConstructor: typeof AjvClass | undefined;

/** A compiled output schema, cached by its JSON text. Throws when Ajv refuses it. */
export function outputValidator(schema: object): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = cache.get(key);
  if (validate) {
    // Most recently used goes last; the first key is the one to evict.
    cache.delete(key);
  } else {
    validate = schemaAjv().compile(schema);
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

/**
 * A JSON Schema Ajv compiles (an object), or a Standard Schema that converts to one
 * (`standardJsonSchema`); a refusal is passed on in the message.
 */
export function checkOutputSchema(name: string, value: unknown): void {
  if (value === undefined) return;
  if (isStandardSchema(value)) {
    standardJsonSchema(name, value);
    return;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw expected(
      name,
      'a JSON Schema (an object) or a Standard Schema (zod, valibot, arktype) with a JSON Schema conversion',
      value,
    );
  }
  checkJsonSchema(name, value as Record<string, unknown>, 'a JSON Schema');
}

/**
 * JSON Schema objects that passed `checkJsonSchema`, by identity: a service passing one schema
 * object to a thousand spawns pays for its check once, not its stringify and walk per spawn
 * (docs/BENCHMARKS.md, "Spawn burst"). A schema mutated after its first spawn is checked no
 * more on main; the worker still compiles what it is given.
 */
const checkedSchemas = new WeakSet<object>();

function checkJsonSchema(name: string, schema: Record<string, unknown>, what: string): void {
  if (checkedSchemas.has(schema)) return;
  try {
    outputValidator(schema);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UsageError(
      `Expected \`${name}\` to be ${what}, but it does not compile: ${why}; got ${describeValue(schema, 200)}`,
    );
  }
  const unusable = outputSchemaProblem(schema);
  if (unusable !== undefined) {
    throw new UsageError(`Expected \`${name}\` to be usable as a reply's schema, but ${unusable}`);
  }
  checkedSchemas.add(schema);
}

/**
 * The draft asked of a Standard Schema's conversion: the one Ajv's default class compiles, and
 * one of the two the Standard JSON Schema spec asks every library to support.
 */
export const JSON_SCHEMA_TARGET = 'draft-07';

/** Each Standard Schema's JSON Schema, converted once: a spawn may reuse one schema many times. */
const converted = new WeakMap<StandardSchema, Record<string, unknown>>();

/**
 * The JSON Schema of a Standard Schema's input: what the model must write, which the schema's
 * own `validate` then parses into its output (a transform or a default applies there; the output
 * type may have no JSON Schema at all). Taken from `~standard.jsonSchema.input` (Standard JSON
 * Schema), else from a `toJSONSchema()` or `toJsonSchema()` method, asked for draft-07, and kept
 * as plain JSON, since it crosses threads and queues. Throws a UsageError naming `name` when the
 * schema has no conversion, its conversion throws (a type JSON cannot state, as a `Date`), or
 * what it gives does not compile.
 */
export function standardJsonSchema(name: string, schema: StandardSchema): Record<string, unknown> {
  const known = converted.get(schema);
  if (known) return known;
  const props = schema['~standard'];
  if (props.version !== 1) {
    throw expected(
      `${name}['~standard'].version`,
      '1 (a Standard Schema of version 1)',
      props.version,
    );
  }
  const vendor =
    typeof props.vendor === 'string' ? `a ${props.vendor} schema` : 'a Standard Schema';
  const convert = converterOf(schema);
  if (!convert) {
    throw new UsageError(
      `Expected \`${name}\` to be a JSON Schema or a Standard Schema with a JSON Schema conversion (\`~standard.jsonSchema\`, or a \`toJSONSchema()\` method), got ${vendor} with neither: zod 4 and arktype schemas have one; for valibot pass \`toStandardJsonSchema(schema)\` from \`@valibot/to-json-schema\`; or pass the JSON Schema itself (\`z.toJSONSchema(schema)\`, valibot's \`toJsonSchema(schema)\`), which types no result`,
    );
  }
  let json: unknown;
  let text: string | undefined;
  try {
    // A JSON round trip: whatever the library returned, what crosses threads is plain data.
    text = JSON.stringify(convert({ target: JSON_SCHEMA_TARGET }));
    json = JSON.parse(text ?? 'null');
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UsageError(
      `Expected \`${name}\` (${vendor}) to convert to a JSON Schema (${JSON_SCHEMA_TARGET}), but its conversion threw: ${why}`,
    );
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new UsageError(
      `Expected the JSON Schema conversion of \`${name}\` (${vendor}) to give an object, got ${describeValue(json)}`,
    );
  }
  const result = json as Record<string, unknown>;
  // A recursive schema's root refers to itself as `#`, which, nested in the reply tool's input,
  // would point at the wrapper. An `$id` of its own (from its text, so that equal schemas share
  // one and unequal ones never do) makes `#` its own document again.
  if (result.$id === undefined && outputSchemaProblem(result) !== undefined) {
    result.$id = `urn:cohort:output-schema:${createHash('sha256').update(text!).digest('hex').slice(0, 32)}`;
  }
  checkJsonSchema(name, result, `${vendor} whose JSON Schema compiles`);
  converted.set(schema, result);
  return result;
}

/** `schema` as JSON Schema: itself, or a Standard Schema's conversion (`standardJsonSchema`). */
export function jsonOutputSchema(
  schema: OutputSchema | undefined,
): Record<string, unknown> | undefined {
  return isStandardSchema(schema) ? standardJsonSchema('outputSchema', schema) : schema;
}

type Converter = (options: JsonSchemaConversion) => unknown;

function converterOf(schema: StandardSchema): Converter | undefined {
  const input = schema['~standard'].jsonSchema?.input;
  if (typeof input === 'function') return (options) => input(options);
  const methods = schema as unknown as { toJSONSchema?: unknown; toJsonSchema?: unknown };
  for (const method of [methods.toJSONSchema, methods.toJsonSchema]) {
    if (typeof method === 'function') return (options) => method.call(schema, options);
  }
  return undefined;
}
