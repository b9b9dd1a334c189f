import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  GOVERNOR_STATE_EXPIRY_MS,
  GOVERNOR_STATE_MAX_KEYS,
  GovernorStateFile,
  openGovernorState,
} from '../src/main/governor-state.js';
import { defaultGovernorStatePath } from '../src/main/governor-state-path.js';
import { tempDir } from './helpers.js';

// The store against real files in a temporary folder: what one process learns, the next one
// recalls; two processes that share the file merge; a bad file or path warns once and the run
// goes on. No test waits for the debounce timer: `flush` and `close` write at once.

const opened: GovernorStateFile[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()));
});

/** A store on `file` that collects its warnings. */
function open(file: string): { store: GovernorStateFile; warnings: string[] } {
  const warnings: string[] = [];
  const store = new GovernorStateFile({
    path: file,
    onWarning: (message) => warnings.push(message),
  });
  opened.push(store);
  return { store, warnings };
}

function stateFile(): string {
  return path.join(tempDir('cohort-state-'), 'nested', 'governor-state.json');
}

function readState(file: string): { version: number; keys: Record<string, { savedAt: number }> } {
  return JSON.parse(readFileSync(file, 'utf8'));
}

const KEY = '0123456789abcdef claude-sonnet-4-5';

describe('the governor state file', () => {
  it('round trip: what one store remembers, a store opened after its close recalls', async () => {
    const file = stateFile();
    const first = open(file);
    expect(first.store.recall(KEY)).toBeUndefined();
    first.store.remember(KEY, { window: 40, rpm: 4000, itpm: 400_000 });
    first.store.remember('other model', { window: 7, unlimited: true });
    // Nothing is written before the debounce or the close.
    expect(existsSync(file)).toBe(false);
    await first.store.close();
    expect(Object.keys(readState(file).keys)).toHaveLength(2);
    const second = open(file);
    expect(second.store.recall(KEY)).toEqual({ window: 40, rpm: 4000, itpm: 400_000 });
    expect(second.store.recall('other model')).toEqual({ window: 7, unlimited: true });
    expect(second.store.recall('a key never seen')).toBeUndefined();
    expect(first.warnings).toEqual([]);
    expect(second.warnings).toEqual([]);
    // No temporary file is left beside it.
    expect(readdirSync(path.dirname(file))).toEqual(['governor-state.json']);
  });

  it('keeps only the known fields, and the latest memory of a key', async () => {
    const file = stateFile();
    const { store } = open(file);
    store.remember(KEY, { window: 4 });
    store.remember(KEY, { window: 12, otpm: 80_000, extra: 'not kept' } as never);
    await store.close();
    const entries = Object.values(readState(file).keys);
    expect(entries).toHaveLength(1);
    expect(Object.keys(entries[0]!).sort()).toEqual(['otpm', 'savedAt', 'window']);
    expect(open(file).store.recall(KEY)).toEqual({ window: 12, otpm: 80_000 });
  });

  it('does not keep a memory it would read back as corrupt', async () => {
    const file = stateFile();
    const { store, warnings } = open(file);
    store.remember(KEY, { window: 5 });
    store.remember(KEY, { window: Number.NaN });
    store.remember('other', { window: 3, rpm: -1 });
    await store.close();
    const next = open(file);
    expect(next.store.recall(KEY)).toEqual({ window: 5 });
    expect(next.store.recall('other')).toBeUndefined();
    expect([...warnings, ...next.warnings]).toEqual([]);
  });

  it('holds no key: neither the API key nor the base URL nor the model, only hashes', async () => {
    const apiKey = 'sk-ant-api03-DISTINCTIVE-FAKE-KEY-4f9c2a7e1b';
    const baseURL = 'https://user:pa55word@llm-gateway.example.internal:8443/v1';
    const file = stateFile();
    const { store } = open(file);
    // Even a caller that put the raw key material in the governor key leaks none of it.
    store.remember(`${baseURL}\n${apiKey} claude-distinctive-model`, { window: 9, rpm: 50 });
    await store.close();
    const bytes = readFileSync(file, 'utf8');
    for (const secret of [apiKey, 'DISTINCTIVE', baseURL, 'llm-gateway', 'pa55word', 'claude']) {
      expect(bytes).not.toContain(secret);
    }
    expect(Object.keys(readState(file).keys)[0]).toMatch(/^[0-9a-f]{32}$/);
    // Only the owner may read it.
    if (process.platform !== 'win32') expect(statSync(file).mode & 0o077).toBe(0);
  });

  it('drops entries older than a day, and recalls those younger', async () => {
    const file = stateFile();
    const { store: writer } = open(file);
    writer.remember('stale', { window: 50 });
    await writer.flush();
    const [stale] = Object.keys(readState(file).keys);
    writer.remember('fresh', { window: 30 });
    await writer.close();
    // Age one entry past the expiry, as a process a day ago would have left it.
    const state = readState(file);
    state.keys[stale!]!.savedAt = Date.now() - GOVERNOR_STATE_EXPIRY_MS - 60_000;
    writeFileSync(file, JSON.stringify(state));
    const { store, warnings } = open(file);
    expect(store.recall('stale')).toBeUndefined();
    expect(store.recall('fresh')).toEqual({ window: 30 });
    expect(warnings).toEqual([]);
    // The next save leaves the expired entry out.
    store.remember('new', { window: 2 });
    await store.close();
    const kept = Object.keys(readState(file).keys);
    expect(kept).toHaveLength(2);
    expect(kept).not.toContain(stale);
  });

  it('keeps at most a bounded number of keys, the most recently saved', async () => {
    const file = stateFile();
    const old = Date.now() - 60_000;
    const keys: Record<string, { savedAt: number; window: number }> = {};
    for (let index = 0; index < GOVERNOR_STATE_MAX_KEYS; index++) {
      keys[`old${String(index).padStart(29, '0')}`] = { savedAt: old + index, window: 3 };
    }
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify({ version: 1, keys }));
    const { store } = open(file);
    store.remember(KEY, { window: 20 });
    await store.close();
    const kept = Object.keys(readState(file).keys);
    expect(kept).toHaveLength(GOVERNOR_STATE_MAX_KEYS);
    // The oldest went; the new one stayed.
    expect(kept).not.toContain(`old${'0'.repeat(29)}`);
    expect(open(file).store.recall(KEY)).toEqual({ window: 20 });
  });

  it.each([
    ['not JSON', 'hello, not JSON', /got text that is not JSON/],
    ['another version', '{"version":7,"keys":{}}', /got version 7/],
    ['an array', '[1,2,3]', /got an array/],
    ['a bad entry', '{"version":1,"keys":{"ab":{"savedAt":1,"window":"big"}}}', /got an entry ab/],
  ])('a corrupt file (%s) is ignored with one warning and rewritten', async (_name, text, got) => {
    const file = stateFile();
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
    const { store, warnings } = open(file);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(file);
    expect(warnings[0]).toContain('{"version":1,"keys":{…}}');
    expect(warnings[0]).toMatch(got);
    expect(warnings[0]).toMatch(/ignored and rewritten/);
    expect(store.recall(KEY)).toBeUndefined();
    // Rewritten at close even when nothing was learned, so the next process is not warned again.
    await store.close();
    expect(readState(file)).toEqual({ version: 1, keys: {} });
    const next = open(file);
    next.store.remember(KEY, { window: 6 });
    await next.store.close();
    expect(next.warnings).toEqual([]);
    expect(open(file).store.recall(KEY)).toEqual({ window: 6 });
    expect(warnings).toHaveLength(1);
  });

  it.each([
    // No one, root included, makes a file under /proc.
    ['a path under /proc', () => '/proc/cohort-no-such/governor-state.json'],
    ['a folder in the way', () => tempDir('cohort-state-dir-')],
    [
      'a file where its folder should be',
      () => {
        const blocker = path.join(tempDir('cohort-state-'), 'file');
        writeFileSync(blocker, 'x');
        return path.join(blocker, 'governor-state.json');
      },
    ],
  ])(
    'an unusable path (%s): one warning at open, then it keeps to memory',
    async (_name, where) => {
      const file = where();
      const { store, warnings } = open(file);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(path.resolve(file));
      expect(warnings[0]).toMatch(/to be writable, got [A-Z]+/);
      expect(warnings[0]).toMatch(/the run goes on/);
      expect(store.persisting).toBe(false);
      // It still remembers for this process, and says nothing more.
      store.remember(KEY, { window: 11 });
      expect(store.recall(KEY)).toEqual({ window: 11 });
      await store.close();
      expect(warnings).toHaveLength(1);
    },
  );

  it('a folder that stops taking writes: one warning at the save, and no more', async () => {
    const folder = path.join(tempDir('cohort-state-'), 'cache');
    const file = path.join(folder, 'governor-state.json');
    const { store, warnings } = open(file);
    expect(warnings).toEqual([]);
    // Permissions do not stop root; a file put where the folder was stops anyone.
    rmSync(folder, { recursive: true });
    writeFileSync(folder, 'in the way');
    store.remember(KEY, { window: 5 });
    await store.flush();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/to be writable, got E[A-Z]+/);
    store.remember(KEY, { window: 6 });
    await store.close();
    expect(warnings).toHaveLength(1);
    expect(store.recall(KEY)).toEqual({ window: 6 });
  });

  it('two stores on one file merge: per key, the newest save wins', async () => {
    const file = stateFile();
    const a = open(file).store;
    const b = open(file).store;
    a.remember('only a', { window: 10 });
    a.remember('both', { window: 1 });
    await a.flush();
    b.remember('only b', { window: 20 });
    // b learned `both` after a saved it: b's is the newer.
    b.remember('both', { window: 2 });
    await b.flush();
    // a saves again without having learned anything new of `both`: b's entry stays.
    a.remember('only a', { window: 11 });
    await a.close();
    await b.close();
    const reader = open(file).store;
    expect(reader.recall('only a')).toEqual({ window: 11 });
    expect(reader.recall('only b')).toEqual({ window: 20 });
    expect(reader.recall('both')).toEqual({ window: 2 });
    // And a itself picked up what b saved.
    expect(a.recall('only b')).toEqual({ window: 20 });
  });

  it('takes over a lock a dead process left, and leaves no lock of its own', async () => {
    const file = stateFile();
    mkdirSync(path.dirname(file), { recursive: true });
    const lock = `${file}.lock`;
    writeFileSync(lock, '');
    const minuteAgo = new Date(Date.now() - 60_000);
    utimesSync(lock, minuteAgo, minuteAgo);
    const { store, warnings } = open(file);
    store.remember(KEY, { window: 3 });
    await store.close();
    expect(warnings).toEqual([]);
    expect(existsSync(lock)).toBe(false);
    expect(open(file).store.recall(KEY)).toEqual({ window: 3 });
  });

  it('writes on its own after the debounce, without a close', async () => {
    const file = stateFile();
    const warnings: string[] = [];
    const store = new GovernorStateFile({
      path: file,
      onWarning: (message) => warnings.push(message),
      saveEveryMs: 20,
    });
    opened.push(store);
    store.remember(KEY, { window: 8 });
    await vi.waitFor(() => expect(existsSync(file)).toBe(true), { timeout: 10_000 });
    expect(Object.keys(readState(file).keys)).toHaveLength(1);
    expect(warnings).toEqual([]);
  });
});

describe('where the state file goes', () => {
  it('under $XDG_CACHE_HOME when it is set, on any system', () => {
    for (const platform of ['linux', 'darwin', 'win32'] as const) {
      expect(defaultGovernorStatePath({ XDG_CACHE_HOME: '/x/cache' }, platform)).toBe(
        path.join('/x/cache', 'cohort', 'governor-state.json'),
      );
    }
  });

  it("else the platform's cache folder", () => {
    const home = (platform: NodeJS.Platform, env: NodeJS.ProcessEnv = {}) =>
      defaultGovernorStatePath(env, platform);
    expect(home('linux')).toMatch(/\.cache[/\\]cohort[/\\]governor-state\.json$/);
    expect(home('darwin')).toMatch(/Library[/\\]Caches[/\\]cohort[/\\]governor-state\.json$/);
    expect(home('win32', { LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' })).toBe(
      path.join('C:\\Users\\u\\AppData\\Local', 'cohort', 'governor-state.json'),
    );
    // A relative XDG_CACHE_HOME is ignored, as the XDG spec says.
    expect(home('linux', { XDG_CACHE_HOME: 'relative' })).toMatch(/\.cache/);
  });

  it('the suite runs with a cache folder of its own, not the user’s', () => {
    const cache = process.env.XDG_CACHE_HOME!;
    expect(path.basename(cache)).toMatch(/^cohort-test-cache-/);
    expect(defaultGovernorStatePath()).toBe(path.join(cache, 'cohort', 'governor-state.json'));
  });

  it('`false` opens nothing; a path opens that file', async () => {
    const warnings: string[] = [];
    expect(openGovernorState(false, (message) => warnings.push(message))).toBeUndefined();
    const file = stateFile();
    const store = openGovernorState(file, (message) => warnings.push(message))!;
    opened.push(store);
    expect(store.path).toBe(file);
    expect(warnings).toEqual([]);
  });
});
