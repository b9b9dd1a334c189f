/**
 * What the governor's state file holds (`governor-state.ts` reads and writes it): a version and,
 * per hashed key, what it learned and when that was saved; entries expire after a day.
 */
import type { KeyMemory } from '../shared/governor/types.js';

/**
 * What a key learned is trusted for a day. An account's limits change (a tier upgrade, a key
 * moved to another workspace, a model retired), and a remembered window larger than the account
 * now takes costs a burst of 429s before the governor cuts it; a day bounds that while covering
 * what the memory is for: the next run, deploy or autoscaled instance of the same day, and a
 * nightly job (it saves when it ends, so the next night's start falls within the day).
 */
export const GOVERNOR_STATE_EXPIRY_MS = 24 * 60 * 60_000;

/** The state file's format version: a file of another version is read as not what was expected. */
export const VERSION = 1;

/** The shape the warnings name, for a person to compare with what the file held. */
export const SHAPE = '{"version":1,"keys":{…}}';

/** A remembered key as the file holds it: the memory and when it was saved (epoch ms). */
export interface Entry extends KeyMemory {
  savedAt: number;
}

export function expired(entry: Entry, now: number): boolean {
  // A clock set back makes an entry from "the future": it ages from now on, within the same bound.
  return Math.abs(now - entry.savedAt) > GOVERNOR_STATE_EXPIRY_MS;
}

export type ParsedState = { ok: true; entries: [string, Entry][] } | { ok: false; got: string };

/** The file's live entries, or what it held instead of the expected shape, for the warning. */
export function parseState(text: string, now: number): ParsedState {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { ok: false, got: `text that is not JSON (${why})` };
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return { ok: false, got: describe(data) };
  }
  const { version, keys } = data as { version?: unknown; keys?: unknown };
  if (version !== VERSION) return { ok: false, got: `version ${describe(version)}` };
  if (typeof keys !== 'object' || keys === null || Array.isArray(keys)) {
    return { ok: false, got: `keys that are ${describe(keys)}` };
  }
  const entries: [string, Entry][] = [];
  for (const [hash, value] of Object.entries(keys)) {
    const entry = entryOf(value);
    if (entry === undefined) return { ok: false, got: `an entry ${hash} of ${describe(value)}` };
    if (!expired(entry, now)) entries.push([hash, entry]);
  }
  return { ok: true, entries };
}

export function entryOf(value: unknown): Entry | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { savedAt, window, rpm, itpm, otpm, unlimited } = value as Record<string, unknown>;
  if (!isPositive(savedAt) || !isPositive(window)) return undefined;
  const entry: Entry = { savedAt, window };
  for (const [name, limit] of [
    ['rpm', rpm],
    ['itpm', itpm],
    ['otpm', otpm],
  ] as const) {
    if (limit === undefined) continue;
    if (!isPositive(limit)) return undefined;
    entry[name] = limit;
  }
  if (unlimited !== undefined) {
    if (typeof unlimited !== 'boolean') return undefined;
    entry.unlimited = unlimited;
  }
  return entry;
}

function isPositive(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}

/** A short account of a value for a warning: its type, and its start when it is a string. */
function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.slice(0, 40))}`;
  if (typeof value === 'object') return 'an object of another shape';
  return `${String(value)} (${typeof value})`;
}
