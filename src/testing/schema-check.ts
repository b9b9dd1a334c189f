import { isRecord } from './is-record.js';
import { jsonEqual, type SchemaDocument } from './schema-document.js';
import { matchesFormat } from './string-formats.js';

/**
 * Whether `value` is valid against `schema`. The scripted model carries no validator library
 * (src/testing imports only `node:` modules), and it needs one only to choose among the values it
 * makes. It reads the keywords of JSON Schema drafts 4 to 2020-12 that a value can be built for
 * (the `unevaluated*` ones excepted) in two ways:
 *
 * - `ajv` judges as the worker's Ajv does (src/shared/tools/output-schema.ts: draft-07, no
 *   formats): `format`, `prefixItems`, `minContains`, `maxContains`, `dependentRequired` and
 *   `dependentSchemas` constrain nothing, as Ajv passes over keywords it does not know.
 * - `strict` also checks those, so that a value meant to be a date is one.
 */
export function accepts(
  document: SchemaDocument,
  schema: unknown,
  value: unknown,
  mode: CheckMode = 'strict',
): boolean {
  return new Checker(document, mode === 'strict').check(schema, value, 0);
}

export type CheckMode = 'ajv' | 'strict';

/** Deeper than this a schema's `$ref`s are taken to loop, and the value is refused. */
const MAX_DEPTH = 64;

const patterns = new Map<string, RegExp | null>();

/** `pattern` compiled as Ajv compiles it (the `u` flag), cached; null when it does not compile. */
function compiledPattern(pattern: string): RegExp | null {
  let compiled = patterns.get(pattern);
  if (compiled === undefined) {
    try {
      compiled = new RegExp(pattern, 'u');
    } catch {
      compiled = null;
    }
    if (patterns.size > 512) patterns.clear();
    patterns.set(pattern, compiled);
  }
  return compiled;
}

/** The JSON type names `value` has; an integral number is both `integer` and `number`. */
function jsonTypes(value: unknown): string[] {
  if (value === null) return ['null'];
  if (Array.isArray(value)) return ['array'];
  if (typeof value === 'number')
    return Number.isInteger(value) ? ['integer', 'number'] : ['number'];
  return [typeof value];
}

/** A string's length as JSON Schema counts it: in code points, as Ajv does. */
export function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

/** Whether `value` is a multiple of `divisor`, by Ajv's own test: `value / divisor` parses whole. */
export function isMultipleOf(value: number, divisor: number): boolean {
  const ratio = value / divisor;
  return ratio === Number.parseInt(String(ratio), 10);
}

class Checker {
  constructor(
    readonly document: SchemaDocument,
    /** Whether the keywords Ajv's default passes over (formats, later drafts') apply too. */
    readonly strict: boolean,
  ) {}

  check(schema: unknown, value: unknown, depth: number): boolean {
    if (schema === true || schema === undefined) return true;
    if (schema === false) return false;
    if (!isRecord(schema)) return true;
    if (depth > MAX_DEPTH) return false;
    const next = depth + 1;
    if (typeof schema.$ref === 'string') {
      const target = this.document.resolve(schema.$ref, schema);
      if (target !== undefined && !this.check(target, value, next)) return false;
    }
    return (
      this.#generic(schema, value, next) &&
      this.#numeric(schema, value) &&
      this.#string(schema, value) &&
      this.#array(schema, value, next) &&
      this.#object(schema, value, next)
    );
  }

  #generic(schema: Record<string, unknown>, value: unknown, depth: number): boolean {
    const { type } = schema;
    if (type !== undefined) {
      const allowed = Array.isArray(type) ? type : [type];
      const types = jsonTypes(value);
      if (!allowed.some((name) => types.includes(name as string))) return false;
    }
    if (Array.isArray(schema.enum) && !schema.enum.some((item) => jsonEqual(item, value))) {
      return false;
    }
    if ('const' in schema && !jsonEqual(schema.const, value)) return false;
    if (Array.isArray(schema.allOf) && !schema.allOf.every((s) => this.check(s, value, depth))) {
      return false;
    }
    if (Array.isArray(schema.anyOf) && !schema.anyOf.some((s) => this.check(s, value, depth))) {
      return false;
    }
    if (Array.isArray(schema.oneOf)) {
      const matching = schema.oneOf.filter((s) => this.check(s, value, depth)).length;
      if (matching !== 1) return false;
    }
    if ('not' in schema && this.check(schema.not, value, depth)) return false;
    if ('if' in schema) {
      const branch = this.check(schema.if, value, depth) ? schema.then : schema.else;
      if (!this.check(branch, value, depth)) return false;
    }
    return true;
  }

  #numeric(schema: Record<string, unknown>, value: unknown): boolean {
    if (typeof value !== 'number') return true;
    const { minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf } = schema;
    if (typeof minimum === 'number') {
      if (exclusiveMinimum === true ? value <= minimum : value < minimum) return false;
    }
    if (typeof maximum === 'number') {
      if (exclusiveMaximum === true ? value >= maximum : value > maximum) return false;
    }
    if (typeof exclusiveMinimum === 'number' && value <= exclusiveMinimum) return false;
    if (typeof exclusiveMaximum === 'number' && value >= exclusiveMaximum) return false;
    if (typeof multipleOf === 'number' && multipleOf > 0 && !isMultipleOf(value, multipleOf)) {
      return false;
    }
    return true;
  }

  #string(schema: Record<string, unknown>, value: unknown): boolean {
    if (typeof value !== 'string') return true;
    const length = codePoints(value);
    if (typeof schema.minLength === 'number' && length < schema.minLength) return false;
    if (typeof schema.maxLength === 'number' && length > schema.maxLength) return false;
    if (typeof schema.pattern === 'string') {
      const pattern = compiledPattern(schema.pattern);
      if (pattern === null || !pattern.test(value)) return false;
    }
    return !this.strict || matchesFormat(schema.format, value);
  }

  #array(schema: Record<string, unknown>, value: unknown, depth: number): boolean {
    if (!Array.isArray(value)) return true;
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) return false;
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) return false;
    const prefix =
      this.strict && Array.isArray(schema.prefixItems) ? schema.prefixItems : undefined;
    const tuple = prefix ?? (Array.isArray(schema.items) ? schema.items : undefined);
    const rest = Array.isArray(schema.items) ? schema.additionalItems : schema.items;
    for (const [index, item] of value.entries()) {
      const itemSchema = tuple !== undefined && index < tuple.length ? tuple[index] : rest;
      if (!this.check(itemSchema, item, depth)) return false;
    }
    if (schema.uniqueItems === true) {
      for (let i = 0; i < value.length; i++) {
        for (let j = i + 1; j < value.length; j++) if (jsonEqual(value[i], value[j])) return false;
      }
    }
    if ('contains' in schema) {
      const count = value.filter((item) => this.check(schema.contains, item, depth)).length;
      const least = this.strict && typeof schema.minContains === 'number' ? schema.minContains : 1;
      if (count < least) return false;
      const most =
        this.strict && typeof schema.maxContains === 'number' ? schema.maxContains : count;
      if (count > most) return false;
    }
    return true;
  }

  #object(schema: Record<string, unknown>, value: unknown, depth: number): boolean {
    if (!isRecord(value)) return true;
    const keys = Object.keys(value);
    if (typeof schema.minProperties === 'number' && keys.length < schema.minProperties) {
      return false;
    }
    if (typeof schema.maxProperties === 'number' && keys.length > schema.maxProperties) {
      return false;
    }
    if (Array.isArray(schema.required)) {
      if (!schema.required.every((key) => typeof key !== 'string' || Object.hasOwn(value, key))) {
        return false;
      }
    }
    const properties = isRecord(schema.properties) ? schema.properties : {};
    const patternEntries = isRecord(schema.patternProperties)
      ? Object.entries(schema.patternProperties)
      : [];
    for (const key of keys) {
      let known = false;
      if (Object.hasOwn(properties, key)) {
        known = true;
        if (!this.check(properties[key], value[key], depth)) return false;
      }
      for (const [pattern, propertySchema] of patternEntries) {
        if (compiledPattern(pattern)?.test(key) === true) {
          known = true;
          if (!this.check(propertySchema, value[key], depth)) return false;
        }
      }
      if (!known && !this.check(schema.additionalProperties, value[key], depth)) return false;
      if ('propertyNames' in schema && !this.check(schema.propertyNames, key, depth)) return false;
    }
    return this.#dependencies(schema, value, depth);
  }

  #dependencies(
    schema: Record<string, unknown>,
    value: Record<string, unknown>,
    depth: number,
  ): boolean {
    const lists = { ...(isRecord(schema.dependencies) ? schema.dependencies : {}) };
    const later = (keyword: string) =>
      this.strict && isRecord(schema[keyword]) ? (schema[keyword] as Record<string, unknown>) : {};
    const dependentRequired = later('dependentRequired');
    const dependentSchemas = later('dependentSchemas');
    for (const [key, dependency] of [
      ...Object.entries(lists),
      ...Object.entries(dependentRequired),
      ...Object.entries(dependentSchemas),
    ]) {
      if (!Object.hasOwn(value, key)) continue;
      if (Array.isArray(dependency)) {
        if (!dependency.every((name) => typeof name !== 'string' || Object.hasOwn(value, name))) {
          return false;
        }
      } else if (!this.check(dependency, value, depth)) return false;
    }
    return true;
  }
}
