/**
 * The governor's state file as a store: loaded once, entries that expire, and saves that merge
 * with what other processes wrote. Its format is governor-state-format.ts, the lock around a
 * save governor-state-lock.ts, and where the file goes governor-state-path.ts.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { GovernorMemory, KeyMemory } from '../shared/governor/types.js';
import {
  type Entry,
  entryOf,
  expired,
  GOVERNOR_STATE_EXPIRY_MS,
  parseState,
  SHAPE,
  VERSION,
} from './governor-state-format.js';
import { lockStateFile } from './governor-state-lock.js';
import { defaultGovernorStatePath, makeFolder } from './governor-state-path.js';

export { GOVERNOR_STATE_EXPIRY_MS };

/** Keys kept, the most recently saved first: a file of a few tens of KB at most. */
export const GOVERNOR_STATE_MAX_KEYS = 256;

/** Writes are at most this often: a key may learn something on every response. */
export const GOVERNOR_STATE_SAVE_EVERY_MS = 5000;

export interface GovernorStateOptions {
  /** The state file; created, with its folder, at the first save. */
  path: string;
  /** Called with each warning (the file is corrupt, or cannot be written); never throws. */
  onWarning: (message: string) => void;
  /** Writes are at most this often, in ms (default 5 s). */
  saveEveryMs?: number;
}

/**
 * The governor's memory across processes (`governor.state`): what each key learned, in a small
 * JSON file, so that the next process starts from it instead of the slow start. It holds no key:
 * each entry is filed under a SHA-256 of the governor key, which itself holds only a hash of the
 * base URL and API key, and the model.
 *
 * The file is read once, when the store opens; `remember` only updates the copy in memory, and a
 * timer writes it at most every `saveEveryMs` (unref'd: it keeps no process alive), and `close`
 * once more. A write takes the file's lock (governor-state-lock.ts), re-reads the file and keeps,
 * per key, the newer of its entry and ours, so processes that share the file add to it rather
 * than overwrite each other, then replaces the file at once (a temporary file in the same folder,
 * renamed over it), so a reader never sees half a file. A corrupt file is ignored with one
 * warning and rewritten; a path that cannot be written gives one warning, and the store then
 * keeps what it learns in memory only. Nothing here throws.
 */
export class GovernorStateFile implements GovernorMemory {
  readonly path: string;
  readonly #onWarning: (message: string) => void;
  readonly #saveEveryMs: number;
  /** By hashed key. */
  readonly #entries = new Map<string, Entry>();
  /** The hash of each governor key seen: `remember` may be called often for one key. */
  readonly #hashes = new Map<string, string>();
  /** Keys remembered since the last save: only these may override what the file holds. */
  readonly #touched = new Set<string>();
  /** False once the path proved unusable: nothing more is written. */
  #persisting = true;
  #dirty = false;
  #warnedCorrupt = false;
  #timer: NodeJS.Timeout | undefined;
  /** The save under way, if any: saves run one after the other. */
  #saving: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: GovernorStateOptions) {
    this.path = path.resolve(options.path);
    this.#onWarning = options.onWarning;
    this.#saveEveryMs = options.saveEveryMs ?? GOVERNOR_STATE_SAVE_EVERY_MS;
    this.#load();
  }

  /** Whether what is learned reaches the file: false once the path proved unusable. */
  get persisting(): boolean {
    return this.#persisting;
  }

  recall(key: string): KeyMemory | undefined {
    const entry = this.#entries.get(this.#hash(key));
    if (entry === undefined || expired(entry, Date.now())) return undefined;
    const { savedAt: _savedAt, ...memory } = entry;
    return memory;
  }

  remember(key: string, memory: KeyMemory): void {
    // Only the known fields are copied, and checked as a read checks them: nothing else a
    // caller's object holds reaches the file, and nothing this store would read as corrupt.
    const entry = entryOf({ ...memory, savedAt: Date.now() });
    if (entry === undefined) return;
    const hash = this.#hash(key);
    this.#entries.set(hash, entry);
    this.#touched.add(hash);
    this.#changed();
  }

  /** Writes what changed since the last save now, and resolves once it is written. */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#saving = this.#saving
      .then(() => (this.#dirty ? this.#save() : undefined))
      // A save reports its own failures; anything else must not leave the chain rejected.
      .catch((error: unknown) => this.#unusable(error));
    return this.#saving;
  }

  /** Writes what is left to write and stops the timer; later `remember`s stay in memory. */
  close(): Promise<void> {
    this.#closed = true;
    return this.flush();
  }

  #hash(key: string): string {
    let hash = this.#hashes.get(key);
    if (hash === undefined) {
      hash = entryName(key);
      this.#hashes.set(key, hash);
    }
    return hash;
  }

  #changed(): void {
    this.#dirty = true;
    if (this.#timer !== undefined || this.#closed || !this.#persisting) return;
    this.#timer = setTimeout(() => void this.flush(), this.#saveEveryMs);
    // What is learned is worth a later start, not keeping a process alive: close writes the rest.
    this.#timer.unref();
  }

  /**
   * Reads the file once, then checks that its folder takes a file: an unusable path is reported
   * at start rather than at the first save, which may come only at close.
   */
  #load(): void {
    let text: string | undefined;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if (codeOf(error) !== 'ENOENT') {
        this.#unusable(error);
        return;
      }
    }
    if (text !== undefined) {
      const read = parseState(text, Date.now());
      if (read.ok) for (const [hash, entry] of read.entries) this.#entries.set(hash, entry);
      else {
        this.#corrupt(read.got);
        // Rewritten at the next save, or at close if nothing is learned before.
        this.#changed();
      }
    }
    this.#probe();
  }

  /** Makes the folder and writes and removes a file in it, as a save would. */
  #probe(): void {
    const probe = this.#tempPath();
    try {
      makeFolder(path.dirname(this.path));
      writeFileSync(probe, '', { mode: 0o600 });
      rmSync(probe, { force: true });
      // A folder where the file should be: rename would refuse it at every save.
      if (statSync(this.path, { throwIfNoEntry: false })?.isDirectory()) {
        throw Object.assign(new Error(`a folder is in the way: ${this.path}`), { code: 'EISDIR' });
      }
    } catch (error) {
      this.#unusable(error);
    }
  }

  async #save(): Promise<void> {
    if (!this.#persisting) return;
    this.#dirty = false;
    const touched = new Set(this.#touched);
    this.#touched.clear();
    const temp = this.#tempPath();
    let unlock: (() => Promise<void>) | undefined;
    try {
      makeFolder(path.dirname(this.path));
      unlock = await lockStateFile(this.path);
      const now = Date.now();
      await this.#mergeFromDisk(now, touched);
      const kept = [...this.#entries]
        .filter(([, entry]) => !expired(entry, now))
        .sort(([, a], [, b]) => b.savedAt - a.savedAt)
        .slice(0, GOVERNOR_STATE_MAX_KEYS);
      this.#entries.clear();
      for (const [hash, entry] of kept) this.#entries.set(hash, entry);
      const text = `${JSON.stringify({ version: VERSION, keys: Object.fromEntries(kept) })}\n`;
      await writeFile(temp, text, { mode: 0o600 });
      await rename(temp, this.path);
    } catch (error) {
      await rm(temp, { force: true }).catch(() => {});
      this.#unusable(error);
    } finally {
      await unlock?.();
    }
  }

  /**
   * What another process saved since this one read the file. A key this store learned nothing
   * of since its last save takes the file's entry; one it did keeps the newer of the two (ours
   * on a tie: it was learned after the file was read). A file that became corrupt is overwritten
   * (warned about once).
   */
  async #mergeFromDisk(now: number, touched: ReadonlySet<string>): Promise<void> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch {
      // Gone, or unreadable: the write that follows says so if it matters.
      return;
    }
    const read = parseState(text, now);
    if (!read.ok) {
      this.#corrupt(read.got);
      return;
    }
    for (const [hash, entry] of read.entries) {
      const ours = this.#entries.get(hash);
      if (ours === undefined || !touched.has(hash) || entry.savedAt > ours.savedAt) {
        this.#entries.set(hash, entry);
      }
    }
  }

  /** A temporary file beside the state file: the rename that replaces it stays on one disk. */
  #tempPath(): string {
    return `${this.path}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
  }

  #corrupt(got: string): void {
    if (this.#warnedCorrupt) return;
    this.#warnedCorrupt = true;
    this.#warn(
      `Expected the governor state file ${this.path} to hold ${SHAPE} as JSON, got ${got}: it is ignored and rewritten`,
    );
  }

  #unusable(error: unknown): void {
    if (!this.#persisting) return;
    this.#persisting = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    // Node's message ends with the call and its path (`, open '/x/y.tmp'`): the probe's file
    // name would only confuse, and the state file's path is said already.
    const why = error instanceof Error ? error.message.replace(/, \w+ '.*$/, '') : String(error);
    this.#warn(
      `Expected the governor state file ${this.path} to be writable, got ${why}: the run goes on, and what the governor learns is not kept (\`governor.state\` sets another path, or false)`,
    );
  }

  #warn(message: string): void {
    try {
      this.#onWarning(message);
    } catch {
      // A listener's fault is its own: the governor goes on.
    }
  }
}

/** The name a key's entry is filed under: a SHA-256 of the governor key, never the key. */
function entryName(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 32);
}

/**
 * What `key` learned, read from the state file at `file` without opening a store: nothing is
 * made or written (`cohort batch --estimate` reads the limits it would start from). Undefined
 * for a missing, unreadable or corrupt file, and for a key it has no live entry of.
 */
export function readGovernorMemory(file: string, key: string): KeyMemory | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const read = parseState(text, Date.now());
  if (!read.ok) return undefined;
  const name = entryName(key);
  const entry = read.entries.find(([hash]) => hash === name)?.[1];
  if (entry === undefined) return undefined;
  const { savedAt: _savedAt, ...memory } = entry;
  return memory;
}

function codeOf(error: unknown): string | undefined {
  return (error as { code?: unknown } | null)?.code as string | undefined;
}

/**
 * The state file `governor.state` names, opened: the default path unless a path is given,
 * nothing for `false`. Without a home folder for the default, one warning, and nothing is kept.
 */
export function openGovernorState(
  state: string | false | undefined,
  onWarning: (message: string) => void,
): GovernorStateFile | undefined {
  if (state === false) return undefined;
  const file = state ?? defaultGovernorStatePath();
  if (file === undefined) {
    onWarning(
      'Expected a home folder or XDG_CACHE_HOME for the governor state file, got neither: the run goes on, and what the governor learns is not kept (`governor.state` sets a path)',
    );
    return undefined;
  }
  return new GovernorStateFile({ path: file, onWarning });
}
