import { isRecord } from './is-record.js';

/**
 * A JSON Schema as one document: where each subschema's `$ref`s resolve. A typed reply's schema
 * arrives nested in the `reply` tool's input schema, with its `definitions` and `$defs` lifted to
 * the top (src/shared/tools/reply.ts), so `#/…` refers to the tool's schema, except inside a
 * subschema with an `$id` of its own, whose `#` is itself.
 */
export class SchemaDocument {
  /** Each subschema's document root: the nearest enclosing schema with an `$id`, else the top. */
  readonly #rootOf = new WeakMap<object, Record<string, unknown>>();
  /** Subschemas by `$id` (as written) and by `$anchor` (as `#name`). */
  readonly #byId = new Map<string, Record<string, unknown>>();
  readonly #top: Record<string, unknown>;

  constructor(top: Record<string, unknown>) {
    this.#top = top;
    this.#walk(top, top, 0);
  }

  #walk(value: unknown, root: Record<string, unknown>, depth: number): void {
    // A schema deeper than this is not one a model is given; its refs past it stay unresolved.
    if (depth > 64) return;
    if (Array.isArray(value)) {
      for (const item of value) this.#walk(item, root, depth + 1);
      return;
    }
    if (!isRecord(value)) return;
    let own = root;
    if (typeof value.$id === 'string') {
      if (value.$id.startsWith('#')) this.#byId.set(value.$id, value);
      else {
        own = value;
        this.#byId.set(value.$id.replace(/#$/, ''), value);
      }
    }
    if (typeof value.$anchor === 'string') this.#byId.set(`#${value.$anchor}`, value);
    this.#rootOf.set(value, own);
    // `enum` and `const` hold data, not schemas: an `$id` inside them is not one.
    for (const [key, item] of Object.entries(value)) {
      if (key !== 'enum' && key !== 'const' && key !== 'examples' && key !== 'default') {
        this.#walk(item, own, depth + 1);
      }
    }
  }

  /** The schema `ref` names, seen from `from`; undefined when it names nothing here. */
  resolve(ref: string, from: object): unknown {
    const hash = ref.indexOf('#');
    const base = hash === -1 ? ref : ref.slice(0, hash);
    const fragment = hash === -1 ? '' : ref.slice(hash + 1);
    let root: unknown;
    if (base === '') root = this.#rootOf.get(from) ?? this.#top;
    else root = this.#byId.get(base) ?? this.#bySuffix(base);
    if (root === undefined) return undefined;
    if (fragment === '') return root;
    if (!fragment.startsWith('/')) return this.#byId.get(`#${fragment}`);
    return pointer(root, fragment);
  }

  /** A relative `$ref` (`item.json#/…`) matched against the end of an absolute `$id`. */
  #bySuffix(base: string): Record<string, unknown> | undefined {
    for (const [id, schema] of this.#byId) if (id.endsWith(`/${base}`)) return schema;
    return undefined;
  }
}

function pointer(root: unknown, fragment: string): unknown {
  let node = root;
  for (const raw of fragment.split('/').slice(1)) {
    const key = percentDecoded(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (Array.isArray(node)) node = node[Number(key)];
    else if (isRecord(node)) node = node[key];
    else return undefined;
  }
  return node;
}

function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A deep equality of JSON values, key order aside (what `enum`, `const` and `uniqueItems` use). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (isRecord(a) && isRecord(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length &&
      keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key], b[key]))
    );
  }
  return false;
}
