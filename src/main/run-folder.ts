import os from 'node:os';
import path from 'node:path';

/** Where runs put their folders when no `--log-dir` is given: `$TMPDIR/cohort/<time>-<pid>`. */
export function defaultLogRoot(): string {
  return path.join(os.tmpdir(), 'cohort');
}

/**
 * A run folder as the engine names it: an ISO time with `:` and `.` made `-`, then the pid
 * (`2025-01-31T09-15-02-123Z-4711`). Only such folders are pruned: anything else under the root
 * was put there by someone else.
 */
const RUN_FOLDER = /^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z-(\d+)$/;

/** The name of a new run's folder under the log root; the one place that format is made. */
export function runFolderName(now = new Date(), pid = process.pid): string {
  return `${now.toISOString().replace(/[:.]/g, '-')}-${pid}`;
}

/** The pid a run folder's name carries, or `undefined` for a name the engine did not make. */
export function runFolderPid(name: string): number | undefined {
  const match = RUN_FOLDER.exec(name);
  return match ? Number(match[1]) : undefined;
}
