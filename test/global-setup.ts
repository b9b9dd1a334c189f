import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Set while a run's cache folder exists: each vitest project runs this setup, and they share it. */
const MARK = 'COHORT_TEST_CACHE_HOME';

/**
 * Runs before any test file: the run gets a cache folder of its own, so no engine or CLI process
 * of the suite reads the user's governor state (`governor.state`, under `$XDG_CACHE_HOME` when it
 * is set, on any system) or leaves its own there. Test workers and the processes tests start
 * inherit the variable; the folder goes when the run ends.
 */
export default function setup(): (() => void) | undefined {
  if (process.env[MARK] !== undefined && process.env[MARK] === process.env.XDG_CACHE_HOME) {
    return undefined;
  }
  const cache = mkdtempSync(path.join(os.tmpdir(), 'cohort-test-cache-'));
  process.env.XDG_CACHE_HOME = cache;
  process.env[MARK] = cache;
  return () => {
    rmSync(cache, { recursive: true, force: true });
    delete process.env[MARK];
  };
}
