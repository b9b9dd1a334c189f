/**
 * Where the governor's state file goes: its default path under the user's cache folder, and how
 * the folders on the way to a path are made.
 */
import { existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Where the state file goes by default: `cohort/governor-state.json` under the user's cache
 * folder, `$XDG_CACHE_HOME` when it is set (on any system), else `~/Library/Caches` on macOS,
 * `%LOCALAPPDATA%` on Windows and `~/.cache` elsewhere. Undefined when there is no home folder to
 * put it under.
 */
export function defaultGovernorStatePath(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  const cache = cacheFolder(env, platform);
  return cache === undefined ? undefined : path.join(cache, 'cohort', 'governor-state.json');
}

function cacheFolder(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): string | undefined {
  // The XDG spec: a relative path is invalid and ignored.
  const xdg = env.XDG_CACHE_HOME;
  if (xdg !== undefined && path.isAbsolute(xdg)) return xdg;
  if (platform === 'win32' && env.LOCALAPPDATA) return env.LOCALAPPDATA;
  let home: string;
  try {
    home = os.homedir();
  } catch {
    return undefined;
  }
  if (home === '') return undefined;
  if (platform === 'darwin') return path.join(home, 'Library', 'Caches');
  if (platform === 'win32') return path.join(home, 'AppData', 'Local');
  return path.join(home, '.cache');
}

/**
 * Makes a folder and its missing parents, one level at a time. Not `mkdir -p` (`recursive:
 * true`): under /proc, where mkdir answers ENOENT for a parent that exists, Node's recursive mkdir
 * retries forever, and a mistyped `--governor-state` would hang the start.
 */
export function makeFolder(folder: string): void {
  const missing: string[] = [];
  for (let current = folder; !existsSync(current); current = path.dirname(current)) {
    missing.push(current);
    if (path.dirname(current) === current) break;
  }
  for (const level of missing.reverse()) {
    try {
      mkdirSync(level);
    } catch (error) {
      // Another process made it in the meantime: as good as made here.
      if ((error as NodeJS.ErrnoException | null)?.code !== 'EEXIST') throw error;
    }
  }
}
