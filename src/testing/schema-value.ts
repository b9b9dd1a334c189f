import { isRecord } from './is-record.js';
import { patternString } from './pattern-string.js';
import { accepts, type CheckMode, codePoints, isMultipleOf } from './schema-check.js';
import { SchemaDocument } from './schema-document.js';
import { merge, type Schema } from './schema-merge.js';
import { formatSample } from './string-formats.js';

/**
 * Values that what an agent read offers for a property: strings, or lists of strings for an
 * array, most fitting first. `name` is the property's name (undefined for the value itself and
 * for array items), `format` the string format its schema asks for.
 */
export type ValueHints = (name: string | undefined, format: string | undefined) => unknown[];

export interface SchemaValueOptions {
  /** The document `schema` sits in (a reply tool's input schema), where its `$ref`s resolve. */
  document?: Record<string, unknown>;
  hints?: ValueHints;
}

/** A value made for a schema, and whether the scripted model's own check finds it valid. */
export interface SchemaValue {
  value: unknown;
  valid: boolean;
}

/**
 * A deterministic value valid against `schema`, as far as the scripted model can make one (the
 * rules are in docs/SCRIPTED-MODEL.md, "Typed replies"): the smallest the schema allows, except
 * where a hint (what the agent read) fits. Candidates are made in order and the first that the
 * schema accepts is taken; when none is, the first made is returned with `valid: false`, and the
 * worker's own check will refuse it.
 */
export function schemaValue(schema: unknown, options: SchemaValueOptions = {}): SchemaValue {
  const top = options.document ?? (isRecord(schema) ? schema : {});
  const document = new SchemaDocument(top);
  const hints = options.hints ?? (() => []);
  const strict = new Maker(document, hints, 'strict').make(schema, { variant: 0, depth: 0 });
  if (accepts(document, schema, strict, 'ajv')) return { value: strict, valid: true };
  // No value meets the formats (or a later draft's keywords) with the rest of the schema: the
  // worker's Ajv checks neither, so a value without them still completes the child.
  const loose = new Maker(document, hints, 'ajv').make(schema, { variant: 0, depth: 0 });
  if (accepts(document, schema, loose, 'ajv')) return { value: loose, valid: true };
  return { value: strict, valid: false };
}

/** Where a value goes: the property's name, which variant (for distinct items), how deep. */
interface Slot {
  name?: string | undefined;
  /** A value the parent chose for this slot (an item of a hinted list), tried first. */
  given?: unknown;
  variant: number;
  depth: number;
}

/** Past this nesting a value is `null`: a schema that requires itself has no finite value. */
const MAX_DEPTH = 24;
/** Candidates made per value at most, so a schema no value satisfies ends the search quickly. */
const CANDIDATE_BUDGET = 1000;
/** How many `$ref`s are followed in a row before one is taken to loop. */
const MAX_REF_HOPS = 32;

const ALL_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'];
const OBJECT_KEYWORDS = [
  'properties',
  'required',
  'additionalProperties',
  'patternProperties',
  'minProperties',
  'maxProperties',
  'propertyNames',
  'dependentRequired',
];
const ARRAY_KEYWORDS = [
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'contains',
  'uniqueItems',
  'additionalItems',
];
const STRING_KEYWORDS = ['minLength', 'maxLength', 'pattern', 'format'];
const NUMBER_KEYWORDS = [
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
];

class Maker {
  #spent = 0;

  constructor(
    readonly document: SchemaDocument,
    readonly hints: ValueHints,
    /** `strict`: a value must meet formats and later drafts' keywords as well as Ajv's check. */
    readonly mode: CheckMode,
  ) {}

  accepts(schema: unknown, value: unknown): boolean {
    if (!accepts(this.document, schema, value, 'ajv')) return false;
    return this.mode === 'ajv' || accepts(this.document, schema, value, 'strict');
  }

  make(schema: unknown, slot: Slot): unknown {
    if (slot.depth > MAX_DEPTH) return null;
    const flat = this.#flatten(schema, 0);
    let first: unknown;
    let made = false;
    for (const value of this.#values(flat, slot)) {
      if (!made) {
        first = value;
        made = true;
      }
      if (this.accepts(schema, value)) return value;
      const branch = this.#branch(flat, value, slot);
      if (branch !== undefined && this.accepts(schema, branch.value)) return branch.value;
      if (++this.#spent > CANDIDATE_BUDGET) break;
    }
    return made ? first : null;
  }

  /** With `if`: the value made again under the branch (`then` or `else`) the first one took. */
  #branch(flat: Schema, value: unknown, slot: Slot): { value: unknown } | undefined {
    if (!('if' in flat)) return undefined;
    const branch = this.accepts(flat.if, value) ? flat.then : flat.else;
    if (branch === undefined) return undefined;
    const { if: _if, then: _then, else: _else, ...rest } = flat;
    return { value: this.make(merge(rest, this.#flatten(branch, 0)), slot) };
  }

  /**
   * `schema` with its `$ref` and `allOf` merged into one object (merge()), so one value can be
   * made for all of them; the exact schema still judges the result.
   */
  #flatten(schema: unknown, hops: number): Schema {
    if (schema === false) return { not: {} };
    if (!isRecord(schema)) return {};
    let flat: Schema = schema;
    if (typeof schema.$ref === 'string' && hops < MAX_REF_HOPS) {
      const { $ref, ...rest } = schema;
      const target = this.document.resolve($ref as string, schema);
      flat = merge(this.#flatten(target, hops + 1), this.#flatten(rest, hops + 1));
    }
    if (Array.isArray(flat.allOf)) {
      const { allOf, ...rest } = flat;
      flat = (allOf as unknown[]).reduce<Schema>(
        (merged, part) => merge(merged, this.#flatten(part, hops + 1)),
        rest,
      );
    }
    return flat;
  }

  *#values(flat: Schema, slot: Slot): Generator<unknown> {
    if ('const' in flat) {
      yield flat.const;
      return;
    }
    if (Array.isArray(flat.enum)) {
      const choices = flat.enum;
      for (let index = 0; index < choices.length; index++) {
        yield choices[(index + slot.variant) % choices.length];
      }
      return;
    }
    const choice = Array.isArray(flat.anyOf) ? 'anyOf' : Array.isArray(flat.oneOf) ? 'oneOf' : '';
    if (choice !== '') {
      const { [choice]: options, ...rest } = flat;
      // Every candidate of each option in turn: the whole schema judges them, so a `oneOf`
      // skips a value that more than one option accepts.
      for (const option of options as unknown[]) {
        yield* this.#values(merge(rest, this.#flatten(option, 0)), slot);
      }
      return;
    }
    for (const type of this.#types(flat, slot)) {
      for (let extra = 0; extra < 3; extra++) {
        yield* this.#ofType(type, flat, { ...slot, variant: slot.variant + extra });
      }
    }
  }

  /** The types to try, in order: the declared ones (`null` last), else the one keywords imply. */
  #types(flat: Schema, slot: Slot): string[] {
    const declared = flat.type;
    if (declared !== undefined) {
      const list = (Array.isArray(declared) ? declared : [declared]).filter(
        (type): type is string => typeof type === 'string',
      );
      return [...list.filter((type) => type !== 'null'), ...list.filter((type) => type === 'null')];
    }
    const has = (keywords: string[]) => keywords.some((keyword) => keyword in flat);
    let primary = 'string';
    if (has(OBJECT_KEYWORDS)) primary = 'object';
    else if (has(ARRAY_KEYWORDS)) primary = 'array';
    else if (has(STRING_KEYWORDS)) primary = 'string';
    else if (has(NUMBER_KEYWORDS)) primary = 'number';
    else if (slot.given !== undefined) primary = Array.isArray(slot.given) ? 'array' : 'string';
    else if (this.hints(slot.name, undefined).some(Array.isArray)) primary = 'array';
    return [primary, ...ALL_TYPES.filter((type) => type !== primary)];
  }

  *#ofType(type: string, flat: Schema, slot: Slot): Generator<unknown> {
    switch (type) {
      case 'null':
        yield null;
        return;
      case 'boolean':
        yield slot.variant % 2 === 1;
        return;
      case 'integer':
      case 'number': {
        const numbers = numberCandidates(flat, type === 'integer');
        for (let index = 0; index < numbers.length; index++) {
          yield numbers[(index + slot.variant) % numbers.length];
        }
        return;
      }
      case 'string':
        yield* this.#strings(flat, slot);
        return;
      case 'array':
        yield this.#array(flat, slot);
        return;
      case 'object':
        yield this.#object(flat, slot, true);
        // An optional property filled from a hint may be what breaks the object: try without.
        yield this.#object(flat, slot, false);
    }
  }

  *#strings(flat: Schema, slot: Slot): Generator<string> {
    const format = typeof flat.format === 'string' ? flat.format : undefined;
    const maxLength = typeof flat.maxLength === 'number' ? flat.maxLength : undefined;
    const minLength = typeof flat.minLength === 'number' ? flat.minLength : 0;
    // A hint is one value read: of several items made alike, only the first gets it, unless
    // the list itself was read (`given`).
    const hinted = [slot.given, ...(slot.variant === 0 ? this.hints(slot.name, format) : [])];
    for (const hint of hinted) {
      const text = Array.isArray(hint) ? hint.join(', ') : hint;
      if (typeof text !== 'string') continue;
      yield text;
      if (maxLength !== undefined && codePoints(text) > maxLength) yield clip(text, maxLength);
    }
    const sample = formatSample(format);
    if (sample !== undefined) yield sample;
    if (typeof flat.pattern === 'string') {
      for (const stretch of new Set([0, minLength, 1, 2, 4, 8, minLength * 2])) {
        const text = patternString(flat.pattern, stretch);
        if (text !== undefined) yield text;
      }
    }
    yield placeholder(slot, minLength, maxLength);
  }

  #array(flat: Schema, slot: Slot): unknown[] {
    const tuple = Array.isArray(flat.prefixItems)
      ? flat.prefixItems
      : Array.isArray(flat.items)
        ? flat.items
        : undefined;
    const rest = Array.isArray(flat.items) ? flat.additionalItems : flat.items;
    const min = typeof flat.minItems === 'number' ? flat.minItems : 0;
    let max = typeof flat.maxItems === 'number' ? flat.maxItems : Number.POSITIVE_INFINITY;
    if (tuple !== undefined && rest === false) max = Math.min(max, tuple.length);
    const given = Array.isArray(slot.given) ? slot.given : undefined;
    const list =
      given ?? (slot.variant === 0 ? this.hints(slot.name, undefined).find(Array.isArray) : []);
    let length = Math.max(min, list?.length ?? 0, tuple?.length ?? 0, 'contains' in flat ? 1 : 0);
    length = Math.min(length, max);
    const items: unknown[] = [];
    // Ajv's draft-07 passes over `prefixItems`, so there `items` judges every item: meet both.
    const every = Array.isArray(flat.prefixItems) && isRecord(flat.items) ? flat.items : undefined;
    for (let index = 0; index < length; index++) {
      let schema = tuple !== undefined && index < tuple.length ? tuple[index] : rest;
      if (every !== undefined && index < (tuple?.length ?? 0)) {
        schema = { allOf: [schema ?? {}, every] };
      }
      if (index === 0 && 'contains' in flat) schema = { allOf: [schema ?? {}, flat.contains] };
      const itemSlot: Slot = {
        name: singular(slot.name),
        variant: slot.variant + index,
        depth: slot.depth + 1,
      };
      if (list?.[index] !== undefined) itemSlot.given = list[index];
      items.push(this.make(schema ?? {}, itemSlot));
    }
    return items;
  }

  #object(flat: Schema, slot: Slot, hinted: boolean): Record<string, unknown> {
    const properties = isRecord(flat.properties) ? flat.properties : {};
    const keys = (Array.isArray(flat.required) ? flat.required : []).filter(
      (key): key is string => typeof key === 'string',
    );
    // An optional property is filled only when what the agent read offers a value for it.
    for (const key of Object.keys(properties)) {
      if (!hinted || keys.includes(key)) continue;
      const format = this.#flatten(properties[key], 0).format;
      if (this.hints(key, typeof format === 'string' ? format : undefined).length > 0) {
        keys.push(key);
      }
    }
    const least = typeof flat.minProperties === 'number' ? flat.minProperties : 0;
    for (const key of Object.keys(properties)) {
      if (keys.length >= least) break;
      if (!keys.includes(key)) keys.push(key);
    }
    for (let extra = 1; keys.length < least && flat.additionalProperties !== false; extra++) {
      if (!keys.includes(`property${extra}`)) keys.push(`property${extra}`);
    }
    addDependents(flat, keys);
    const value: Record<string, unknown> = {};
    for (const key of keys) {
      value[key] = this.make(propertySchema(flat, key), {
        name: key,
        variant: slot.variant,
        depth: slot.depth + 1,
      });
    }
    return value;
  }
}

/** The schema a property's value must meet: its own, a matching pattern's, or the rest's. */
function propertySchema(flat: Schema, key: string): unknown {
  const parts: unknown[] = [];
  if (isRecord(flat.properties) && Object.hasOwn(flat.properties, key)) {
    parts.push(flat.properties[key]);
  }
  if (isRecord(flat.patternProperties)) {
    for (const [pattern, schema] of Object.entries(flat.patternProperties)) {
      try {
        if (new RegExp(pattern, 'u').test(key)) parts.push(schema);
      } catch {
        // A pattern that does not compile matches nothing; the worker's Ajv refused it anyway.
      }
    }
  }
  if (parts.length === 0 && isRecord(flat.additionalProperties)) {
    parts.push(flat.additionalProperties);
  }
  if (parts.length === 0) return {};
  return parts.length === 1 ? parts[0] : { allOf: parts };
}

/** Adds to `keys` what `dependentRequired` (or `dependencies` as lists) asks of those present. */
function addDependents(flat: Schema, keys: string[]): void {
  const lists: Record<string, unknown> = {
    ...(isRecord(flat.dependencies) ? flat.dependencies : {}),
    ...(isRecord(flat.dependentRequired) ? flat.dependentRequired : {}),
  };
  for (let index = 0; index < keys.length; index++) {
    const needed = lists[keys[index]!];
    if (!Array.isArray(needed)) continue;
    for (const name of needed)
      if (typeof name === 'string' && !keys.includes(name)) keys.push(name);
  }
}

/** A placeholder string: the property's name (or `value`), padded or clipped to the lengths. */
function placeholder(slot: Slot, minLength: number, maxLength: number | undefined): string {
  let text = slot.name ?? 'value';
  if (slot.variant > 0) text = `${text} ${slot.variant + 1}`;
  while (codePoints(text) < minLength) text += ` ${slot.name ?? 'value'}`;
  return maxLength === undefined ? text : clip(text, maxLength);
}

function clip(text: string, length: number): string {
  return [...text].slice(0, Math.max(0, length)).join('');
}

/** `authors` → `author`: the name an item of a list property is filled as. */
function singular(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  return name.length > 3 && name.endsWith('s') && !name.endsWith('ss') ? name.slice(0, -1) : name;
}

/**
 * Up to four numbers `schema` allows, nearest to 0 first: within the bounds (`minimum`,
 * `maximum`, both `exclusive…` forms), a multiple of `multipleOf` by Ajv's test, whole for
 * `integer`. Empty when the bounds leave none.
 */
function numberCandidates(schema: Schema, integer: boolean): number[] {
  let low = Number.NEGATIVE_INFINITY;
  let high = Number.POSITIVE_INFINITY;
  let lowOpen = false;
  let highOpen = false;
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf } = schema;
  if (typeof minimum === 'number') [low, lowOpen] = [minimum, exclusiveMinimum === true];
  if (typeof maximum === 'number') [high, highOpen] = [maximum, exclusiveMaximum === true];
  if (typeof exclusiveMinimum === 'number' && exclusiveMinimum >= low) {
    [low, lowOpen] = [exclusiveMinimum, true];
  }
  if (typeof exclusiveMaximum === 'number' && exclusiveMaximum <= high) {
    [high, highOpen] = [exclusiveMaximum, true];
  }
  const within = (value: number) =>
    (lowOpen ? value > low : value >= low) && (highOpen ? value < high : value <= high);
  const divisor = typeof multipleOf === 'number' && multipleOf > 0 ? multipleOf : undefined;
  let step = divisor ?? (integer ? 1 : undefined);
  if (step !== undefined && integer && !Number.isInteger(step)) {
    const whole = Array.from({ length: 1000 }, (_, k) => step! * (k + 1)).find(Number.isInteger);
    step = whole ?? step;
  }
  const fits = (value: number) =>
    within(value) &&
    (!integer || Number.isInteger(value)) &&
    (divisor === undefined || isMultipleOf(value, divisor));
  if (step === undefined) {
    const found: number[] = [];
    // Between two open bounds, their midpoint, rounded so that 0.1 and 0.2 give 0.15.
    const middle = Number(((low + high) / 2).toPrecision(12));
    const start = within(0)
      ? 0
      : low > 0 || (low === 0 && lowOpen)
        ? lowOpen
          ? Number.isFinite(high)
            ? middle
            : low + 1
          : low
        : highOpen
          ? Number.isFinite(low)
            ? middle
            : high - 1
          : high;
    for (const offset of [0, 1, 2, 3, -1, -2]) {
      const value = start + offset;
      if (fits(value) && !found.includes(value)) found.push(value);
      if (found.length >= 4) break;
    }
    const exact = (low + high) / 2;
    if (found.length === 0 && fits(exact)) found.push(exact);
    return found;
  }
  const kLow = Number.isFinite(low) ? Math.ceil(low / step) - 1 : Number.NEGATIVE_INFINITY;
  const kHigh = Number.isFinite(high) ? Math.floor(high / step) + 1 : Number.POSITIVE_INFINITY;
  const k0 = Math.min(Math.max(0, kLow), kHigh);
  const found: number[] = [];
  // Outward from the multiple nearest 0 within the bounds; floating point can make k × step miss
  // Ajv's test (0.1 × 3), so each is checked and the search goes on past the misses.
  for (let distance = 0; distance < 400 && found.length < 4; distance++) {
    for (const k of distance === 0 ? [k0] : [k0 + distance, k0 - distance]) {
      if (k < kLow || k > kHigh) continue;
      const value = k * step === 0 ? 0 : k * step;
      if (fits(value) && !found.includes(value)) found.push(value);
    }
  }
  return found;
}
