import { isRecord } from './is-record.js';
import { isMultipleOf } from './schema-check.js';

/**
 * How the scripted model joins schemas (`allOf`, a `$ref` beside other keywords, a chosen `anyOf`
 * branch with its parent) before it makes one value for them (schema-value.ts).
 */

/** A JSON Schema object, as the scripted model reads one. */
export type Schema = Record<string, unknown>;

/**
 * Two schemas as one, so that a value made for the result can meet both: types intersect,
 * `required` and `properties` unite (a property in both must meet both), bounds take the
 * tighter, `enum`s intersect. Where two constraints cannot be joined (two `pattern`s, two
 * `anyOf`s) the first is kept; the exact schema judges the value made.
 */
export function merge(a: Schema, b: Schema): Schema {
  const merged: Schema = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const mine = merged[key];
    if (!(key in merged)) {
      merged[key] = value;
      continue;
    }
    switch (key) {
      case 'type': {
        const left = typeList(mine);
        const right = typeList(value);
        merged.type = left.flatMap((type) => {
          if (right.includes(type)) return [type];
          if (type === 'number' && right.includes('integer')) return ['integer'];
          if (type === 'integer' && right.includes('number')) return ['integer'];
          return [];
        });
        break;
      }
      case 'required':
        merged.required = [...new Set([...asArray(mine), ...asArray(value)])];
        break;
      case 'properties':
      case 'patternProperties':
        merged[key] = mergeMaps(mine, value);
        break;
      case 'additionalProperties':
      case 'items':
      case 'contains':
      case 'propertyNames':
        if (mine === false || value === false) merged[key] = false;
        else if (isRecord(mine) && isRecord(value)) merged[key] = { allOf: [mine, value] };
        break;
      case 'enum':
        merged.enum = asArray(mine).filter((item) =>
          asArray(value).some((other) => JSON.stringify(other) === JSON.stringify(item)),
        );
        break;
      case 'minimum':
      case 'minLength':
      case 'minItems':
      case 'minProperties':
      case 'minContains':
        merged[key] = Math.max(Number(mine), Number(value));
        break;
      case 'maximum':
      case 'maxLength':
      case 'maxItems':
      case 'maxProperties':
      case 'maxContains':
        merged[key] = Math.min(Number(mine), Number(value));
        break;
      case 'exclusiveMinimum':
      case 'exclusiveMaximum':
        merged[key] = joinExclusive(key, mine, value);
        break;
      case 'uniqueItems':
        merged[key] = mine === true || value === true;
        break;
      case 'multipleOf':
        merged[key] = joinMultiples(Number(mine), Number(value));
        break;
      case 'dependentRequired':
      case 'dependencies':
        merged[key] = { ...(isRecord(value) ? value : {}), ...(isRecord(mine) ? mine : {}) };
        break;
    }
  }
  return merged;
}

function typeList(type: unknown): string[] {
  return (Array.isArray(type) ? type : [type]).filter(
    (entry): entry is string => typeof entry === 'string',
  );
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function mergeMaps(a: unknown, b: unknown): Schema {
  const merged: Schema = { ...(isRecord(a) ? a : {}) };
  for (const [key, schema] of Object.entries(isRecord(b) ? b : {})) {
    merged[key] = key in merged ? { allOf: [merged[key], schema] } : schema;
  }
  return merged;
}

function joinExclusive(key: string, a: unknown, b: unknown): unknown {
  if (typeof a === 'boolean' || typeof b === 'boolean') return a === true || b === true;
  return key === 'exclusiveMinimum'
    ? Math.max(Number(a), Number(b))
    : Math.min(Number(a), Number(b));
}

function joinMultiples(a: number, b: number): number {
  if (isMultipleOf(a, b)) return a;
  if (isMultipleOf(b, a)) return b;
  return a * b;
}
