import { fstatSync, lstatSync, realpathSync, type Stats, statSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from '../../shared/errors.js';
import { safeLabel } from '../output.js';

/** Where `--out` points, checked before anything is opened: see `inspectTarget`. */
export interface Target {
  /** Resolved: symbolic links followed, so two names for one file share one lock. */
  path: string;
  /** The path as the user gave it, for messages. */
  label: string;
  /** Its stat when it exists. */
  stat: Stats | undefined;
}

/**
 * Accepts a regular file, or a missing path in an existing folder; refuses the rest with a
 * message naming it. Only lstat/stat here: a FIFO or /dev/zero is never opened.
 */
export function inspectTarget(out: string): Target {
  const label = safeLabel(out);
  const absolute = path.resolve(out);
  let link: Stats | undefined;
  try {
    link = lstatSync(absolute);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOTDIR: a parent is a file; the folder check below says which and how.
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw statError(label, error);
  }
  if (link === undefined) {
    const folder = checkedFolder(path.dirname(absolute), label);
    return { path: path.join(folder, path.basename(absolute)), label, stat: undefined };
  }
  let stat: Stats | undefined;
  try {
    stat = statSync(absolute, { throwIfNoEntry: false });
  } catch (error) {
    throw statError(label, error); // A symbolic-link loop, a folder we may not enter.
  }
  if (stat === undefined) {
    throw new UsageError(
      `Expected --out ${label} to be a results file or a new path, got a symbolic link to nothing. Remove the link or pick another --out.`,
    );
  }
  if (stat.isDirectory()) {
    throw new UsageError(
      `Expected --out to name a results file, got the directory ${label}. Give a file path, e.g. ${safeLabel(path.join(out, 'results.jsonl'))}.`,
    );
  }
  if (!stat.isFile()) {
    throw new UsageError(
      `Expected --out ${label} to be a regular file or a new path, got ${specialKind(stat)}. Results must go to a file that can be reread on resume.`,
    );
  }
  refuseOwnOutput(stat, label);
  if (stat.nlink > 1) {
    // A lock is named after one path; a second name for the same file would get its own lock.
    throw new UsageError(
      `Expected --out ${label} to have one name, got a file with ${stat.nlink} hard links: a run through another name would not see this run's lock. Copy it to a file of its own.`,
    );
  }
  return { path: realpathSync(absolute), label, stat };
}

/**
 * `--out /dev/stdout > r.jsonl` reaches the file the shell opened for our own output: results
 * appended there and the summary written over them from offset 0 would tear each other.
 */
function refuseOwnOutput(stat: Stats, label: string): void {
  for (const [fd, name] of [
    [1, 'stdout'],
    [2, 'stderr'],
  ] as const) {
    let own: Stats;
    try {
      own = fstatSync(fd);
    } catch {
      continue;
    }
    if (own.dev === stat.dev && own.ino === stat.ino) {
      throw new UsageError(
        `Expected --out ${label} to be a file of its own, got the file this command's ${name} goes to. Give --out its own path.`,
      );
    }
  }
}

/** The folder a new results file goes in, resolved; refuses a missing folder or a file. */
function checkedFolder(folder: string, label: string): string {
  let stat: Stats | undefined;
  try {
    stat = statSync(folder);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new UsageError(
        `Expected the folder of --out ${label} to exist, got no folder ${safeLabel(folder)}. Create it first.`,
      );
    }
    if (code === 'ENOTDIR') {
      throw new UsageError(
        `Expected the folder of --out ${label} to be a folder, got a path through a file: ${safeLabel(folder)}.`,
      );
    }
    throw statError(label, error);
  }
  if (!stat.isDirectory()) {
    throw new UsageError(
      `Expected the folder of --out ${label} to be a folder, got ${safeLabel(folder)}, which is ${stat.isFile() ? 'a file' : specialKind(stat)}.`,
    );
  }
  return realpathSync(folder);
}

export function specialKind(stat: Stats): string {
  if (stat.isCharacterDevice()) return 'a character device (such as /dev/null or a terminal)';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isFIFO()) return 'a FIFO (a named pipe, or a piped /dev/stdout)';
  if (stat.isSocket()) return 'a socket';
  return 'a special file';
}

function statError(label: string, error: unknown): UsageError {
  const code = (error as NodeJS.ErrnoException).code ?? 'an error';
  return new UsageError(
    `Expected --out ${label} to be a path cohort can check, got ${code}: ${safeLabel((error as Error).message)}`,
  );
}

/** `--out` naming the tasks file would replace the tasks with results. */
export function refuseTasksFile(target: Target, tasksFile: string | undefined): void {
  if (tasksFile === undefined || target.stat === undefined) return;
  let tasks: Stats | undefined;
  try {
    tasks = statSync(tasksFile, { throwIfNoEntry: false });
  } catch {
    return; // A tasks file we cannot stat was not read either; reading it reports the problem.
  }
  if (tasks === undefined) return;
  if (tasks.dev === target.stat.dev && tasks.ino === target.stat.ino) {
    throw new UsageError(
      `Expected --out to be a file other than the tasks file, got ${target.label}, which is the tasks file ${safeLabel(tasksFile)}. Results would replace the tasks; pick another --out.`,
    );
  }
}
