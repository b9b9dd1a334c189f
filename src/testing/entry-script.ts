import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Whether the module at `moduleUrl` is the script node was started with (not an import of it). */
export function isEntryScript(moduleUrl: string): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}
