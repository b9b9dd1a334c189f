import { type Dirent, lstatSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { runFolderPid } from '../main/run-folder.js';
import { UsageError } from '../shared/errors.js';
import { isSegmentName } from '../shared/journal/format.js';

export interface PruneOptions {
  /** The log root whose run folders are pruned. */
  root: string;
  /** A run folder goes when its newest entry is older than this. */
  olderThanMs: number;
  /** List what would go; remove nothing. */
  dryRun: boolean;
  /** The current time, in ms since the epoch (a parameter so tests need no clock). */
  now?: number;
  /** Whether a pid is a live process on this host. */
  isAlive?: (pid: number) => boolean;
}

/** One run folder and what it holds. */
export interface RunFolder {
  path: string;
  /** Disk use, as `du` counts it (allocated blocks), so the figure is what removing it frees. */
  bytes: number;
  files: number;
  /** The newest modification time of the folder or anything in it, ms since the epoch. */
  newestMs: number;
}

export interface PruneReport {
  root: string;
  dryRun: boolean;
  /** Folders removed (or, in a dry run, that would be). */
  removed: RunFolder[];
  /** Old folders left because their run's process is alive. */
  live: string[];
  /** Folders newer than the cut-off. */
  recent: number;
  /** Folders that could not be removed, with why. */
  failed: { path: string; error: string }[];
}

/**
 * Removes the run folders directly under `root` whose newest entry is older than `olderThanMs`.
 * Never removes a run whose pid is alive, never follows a symlink (a symlink under the root is
 * not a run folder, and `rm` removes a link inside one, not what it points to), and touches
 * nothing outside the root. A missing root has nothing to prune.
 */
export function pruneLogs(options: PruneOptions): PruneReport {
  const root = path.resolve(options.root);
  const report: PruneReport = {
    root,
    dryRun: options.dryRun,
    removed: [],
    live: [],
    recent: 0,
    failed: [],
  };
  const entries = runFolders(root);
  const cutoff = (options.now ?? Date.now()) - options.olderThanMs;
  const isAlive = options.isAlive ?? pidIsAlive;
  for (const { name, pid } of entries) {
    const folder = measure(path.join(root, name));
    if (folder.newestMs >= cutoff) report.recent++;
    else if (isAlive(pid)) report.live.push(folder.path);
    else if (options.dryRun) report.removed.push(folder);
    else {
      try {
        rmSync(folder.path, { recursive: true });
        report.removed.push(folder);
      } catch (error) {
        report.failed.push({ path: folder.path, error: (error as Error).message });
      }
    }
  }
  return report;
}

/** The run folders directly under the root (real folders, not links), with their pids. */
function runFolders(root: string): { name: string; pid: number }[] {
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(root);
  } catch {
    return [];
  }
  // A root that is a link could point anywhere; pruning through it would remove what it points at.
  if (!stat.isDirectory()) {
    const what = stat.isSymbolicLink() ? 'a symbolic link' : 'not a folder';
    throw new UsageError(
      `Expected \`--log-dir\` to be a folder of run logs, got \`${root}\` (${what})`,
    );
  }
  const entries = readdirSync(root, { withFileTypes: true });
  const runs = entries.flatMap((entry: Dirent) => {
    const pid = entry.isDirectory() ? runFolderPid(entry.name) : undefined;
    return pid === undefined ? [] : [{ name: entry.name, pid }];
  });
  // One run's own folder (its journal, or the agent folders of an older cohort) holds no run:
  // pruning it would find nothing, so say what it is rather than report "removed 0".
  if (runs.length === 0 && entries.some(isRunContent)) {
    throw new UsageError(
      `Expected \`--log-dir\` to be a log root holding run folders (<time>-<pid>), got \`${root}\`, which is the folder of one run (its journal, or agent folders ag_…): remove it as a whole, or prune its parent`,
    );
  }
  return runs;
}

/** What only a run's own folder holds: a journal segment, or an agent folder of older runs. */
function isRunContent(entry: Dirent): boolean {
  if (entry.isFile()) return isSegmentName(entry.name);
  return entry.isDirectory() && entry.name.startsWith('ag_');
}

/** Walks a folder without following links: its newest mtime, files and disk use. */
export function measure(dir: string): RunFolder {
  const folder: RunFolder = { path: dir, bytes: 0, files: 0, newestMs: 0 };
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop()!;
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(current);
    } catch {
      continue; // removed while we looked: nothing to count
    }
    folder.newestMs = Math.max(folder.newestMs, stat.mtimeMs);
    // `blocks` is what the file takes on disk; where the platform has no blocks, the size.
    folder.bytes += Number.isFinite(stat.blocks) ? stat.blocks * 512 : stat.size;
    if (stat.isDirectory()) {
      for (const name of safeReaddir(current)) pending.push(path.join(current, name));
    } else folder.files++;
  }
  return folder;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * Whether a pid is a live process on this host. Signal 0 checks without sending anything; EPERM
 * means the process exists but belongs to someone else, which is alive all the same.
 */
export function pidIsAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
