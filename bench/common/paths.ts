/**
 * Where the built files live. The bench forks processes and loads tool modules by path, and those
 * must be JavaScript: under vitest this file is the TS source, so it points into `dist/`.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Absolute path of `relative` (e.g. `bench/common/work-tool.js`) inside the build. */
export function builtPath(relative: string): string {
  const here = fileURLToPath(import.meta.url);
  // This file is bench/common/paths.ts, or dist/bench/common/paths.js when built.
  const distRoot = here.endsWith('.ts')
    ? path.resolve(path.dirname(here), '..', '..', 'dist')
    : path.resolve(path.dirname(here), '..', '..');
  const file = path.join(distRoot, relative);
  if (!existsSync(file)) throw new Error(`build missing at ${file}: run npm run build`);
  return file;
}
