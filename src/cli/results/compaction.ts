import {
  closeSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';

/**
 * Compaction of a batch results file, in place and crash-safe.
 *
 * Why in place and not temporary file + rename: a rename swaps the inode under anyone who has the
 * file open. The batch lock shuts out other cohort runs, but not a `tail -f`, a run of an older
 * cohort, or a hand-made `>>`: after a rename their writes go to an unlinked inode and are lost
 * for good (148 of 200 results once vanished that way). In place, the inode, its links,
 * owner and mode stay, and a stray writer can at worst collide with the few milliseconds of the
 * rewrite itself.
 *
 * A rewrite in place is not atomic, so it goes through a redo journal beside the file:
 * 1. the new content is written to `<out>.compact.tmp`, synced, and renamed to `<out>.compact`
 *    (our private file: renaming it hurts no one), so the journal exists whole or not at all;
 * 2. the journal is copied over the file from offset 0, the rest cut off, the file synced;
 * 3. the journal is removed.
 * A crash before 2 leaves the file as it was (the `.tmp` is deleted on the next open). A crash in
 * or after 2 leaves a whole journal, and the next open, under the lock, replays it before reading
 * the file: replaying is idempotent. The journal's header records the file's device and inode, so
 * a journal left for a file that was since replaced is discarded, not replayed over it.
 */

/** One line of the file, as a byte range without its newline. */
export interface LineSpan {
  start: number;
  end: number;
}

const CHUNK = 1 << 20;

function journalPath(file: string): string {
  return `${file}.compact`;
}

/** Rewrites the file open at `fd` (read-write, not append) to hold only `keep`, each line ended. */
export function compactInPlace(fd: number, file: string, keep: readonly LineSpan[]): void {
  const journal = journalPath(file);
  const temporary = `${journal}.tmp`;
  const out = openSync(temporary, 'w');
  try {
    let position = writeAll(out, Buffer.from(`${JSON.stringify(identityOf(fd))}\n`), 0);
    const newline = Buffer.from('\n');
    for (const span of keep) {
      position = copyRange({ from: fd, start: span.start, end: span.end, to: out, at: position });
      position = writeAll(out, newline, position);
    }
    fsyncSync(out);
  } finally {
    closeSync(out);
  }
  renameSync(temporary, journal);
  syncFolder(path.dirname(file));
  replay(journal, fd);
  unlinkSync(journal);
}

/**
 * Finishes a compaction that a crash interrupted: replays a whole journal onto its file, drops a
 * half-written one. Call with the lock held, before reading the file.
 */
export function recoverCompaction(file: string): void {
  const journal = journalPath(file);
  rmSync(`${journal}.tmp`, { force: true });
  const header = readHeader(journal);
  if (header === 'missing') return;
  const current = statSync(file, { bigint: true, throwIfNoEntry: false });
  if (header !== 'corrupt' && current && sameFile(header, current)) {
    const fd = openSync(file, 'r+');
    try {
      replay(journal, fd);
    } finally {
      closeSync(fd);
    }
  }
  unlinkSync(journal);
}

interface Identity {
  cohortCompaction: 1;
  dev: string;
  ino: string;
}

function identityOf(fd: number): Identity {
  const stat = fstatSync(fd, { bigint: true });
  return { cohortCompaction: 1, dev: String(stat.dev), ino: String(stat.ino) };
}

function sameFile(identity: Identity, stat: { dev: bigint; ino: bigint }): boolean {
  return identity.dev === String(stat.dev) && identity.ino === String(stat.ino);
}

/** The journal's header, `missing` when there is no journal, `corrupt` when it cannot be read. */
function readHeader(journal: string): (Identity & { bodyStart: number }) | 'missing' | 'corrupt' {
  let fd: number;
  try {
    fd = openSync(journal, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    return 'corrupt';
  }
  try {
    const head = Buffer.alloc(4096);
    const count = readSync(fd, head, 0, head.length, 0);
    const newline = head.subarray(0, count).indexOf(10);
    if (newline === -1) return 'corrupt';
    const value = JSON.parse(head.subarray(0, newline).toString('utf8')) as Partial<Identity>;
    if (value.cohortCompaction !== 1 || typeof value.dev !== 'string') return 'corrupt';
    if (typeof value.ino !== 'string') return 'corrupt';
    return { cohortCompaction: 1, dev: value.dev, ino: value.ino, bodyStart: newline + 1 };
  } catch {
    return 'corrupt';
  } finally {
    closeSync(fd);
  }
}

/** Copies the journal's body over the file at `fd` from offset 0, cuts the rest and syncs. */
function replay(journal: string, fd: number): void {
  const header = readHeader(journal);
  if (typeof header === 'string') throw new Error(`compaction journal ${journal} is ${header}`);
  const source = openSync(journal, 'r');
  try {
    const end = fstatSync(source).size;
    const size = copyRange({ from: source, start: header.bodyStart, end, to: fd, at: 0 });
    ftruncateSync(fd, size);
    fsyncSync(fd);
  } finally {
    closeSync(source);
  }
}

/** Copies bytes [start, end) of `from` to `to` at `at`, in chunks; returns the end position. */
function copyRange(options: { from: number; start: number; end: number; to: number; at: number }) {
  const buffer = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(1, options.end - options.start)));
  let read = options.start;
  let at = options.at;
  while (read < options.end) {
    const count = readSync(
      options.from,
      buffer,
      0,
      Math.min(buffer.length, options.end - read),
      read,
    );
    if (count === 0) throw new Error('results file shrank during compaction');
    at = writeAll(options.to, buffer.subarray(0, count), at);
    read += count;
  }
  return at;
}

function writeAll(fd: number, buffer: Buffer, at: number): number {
  let offset = 0;
  while (offset < buffer.length) {
    offset += writeSync(fd, buffer, offset, buffer.length - offset, at + offset);
  }
  return at + buffer.length;
}

/** Makes a rename durable before the file is overwritten. Not possible everywhere: best effort. */
function syncFolder(folder: string): void {
  try {
    const fd = openSync(folder, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Windows cannot open a folder; there the rename's durability is the file system's.
  }
}
