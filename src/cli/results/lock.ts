import { closeSync, fsyncSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { UsageError } from '../../shared/errors.js';
import { defined } from '../../shared/option-schema.js';
import { safeLabel, safeText } from '../output.js';

/**
 * The exclusive lock on a batch results file: a file beside it (`<out>.lock`) created with
 * O_EXCL, holding who took it. Without kernel locks (Node has no flock), the file's existence is
 * the lock: O_EXCL makes creating it atomic, so of two runs starting at once exactly one wins.
 */

/** What a lock file holds. */
export interface LockHolder {
  pid: number;
  host: string;
  /** ISO time the lock was taken. */
  startedAt: string;
  /** The command that holds it, for the message a second run shows. */
  command?: string;
}

export interface AcquireLockOptions {
  /** Shown to a second run: which command holds the lock. */
  command?: string | undefined;
  /** How the locked file is named in messages (the path as the user gave it). */
  label?: string;
  /**
   * What is locked, for messages, when it is not a results file: how to name it (`run ID`),
   * what it is (`run`), and what to pick when the lock cannot be made.
   */
  what?: LockedThing;
}

/** How messages name what a lock guards. */
export interface LockedThing {
  subject: string;
  noun: string;
  fix: string;
}

/** Tries of the acquire loop; each one after the first waits `RETRY_MS` (half a second in all). */
const ATTEMPTS = 50;
const RETRY_MS = 10;

/** A held lock. `release()` is idempotent and synchronous, so an 'exit' handler may call it. */
export class ResultsLock {
  /** The lock file. */
  readonly path: string;
  readonly #content: string;
  #released = false;
  // A forced exit (process.exit from anywhere) still releases the lock. A kill by signal does
  // not run 'exit' handlers; that lock is left behind and taken over as stale by the next run.
  readonly #onExit = () => this.release();

  constructor(lockPath: string, content: string) {
    this.path = lockPath;
    this.#content = content;
    process.on('exit', this.#onExit);
  }

  get released(): boolean {
    return this.#released;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    process.removeListener('exit', this.#onExit);
    // Remove the file only while it is still ours: if someone removed it by hand and another run
    // took the lock since, unlinking would free that run's lock.
    if (readRaw(this.path) === this.#content) {
      try {
        unlinkSync(this.path);
      } catch {
        // Gone already: nothing to release.
      }
    }
  }
}

/**
 * Takes the lock at `lockPath`, or throws a UsageError naming the holder. A lock left by a dead
 * process on this host is taken over; one from another host never is (we cannot see its
 * processes), and the message says how to remove it by hand.
 */
export function acquireLock(lockPath: string, options: AcquireLockOptions = {}): ResultsLock {
  const label = options.label ?? lockPath;
  const what: LockedThing = options.what ?? {
    subject: `--out ${safeLabel(label)}`,
    noun: 'results file',
    fix: 'Pick an --out in a folder you can write to.',
  };
  const record: LockHolder = defined({
    pid: process.pid,
    host: hostname(),
    startedAt: new Date().toISOString(),
    command: options.command,
  });
  const content = `${JSON.stringify(record)}\n`;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (attempt > 0) pause(RETRY_MS);
    if (tryCreate(lockPath, content, what)) return new ResultsLock(lockPath, content);
    const raw = readRaw(lockPath);
    if (raw === undefined) continue; // Released between our create and our read: try again.
    const holder = parseHolder(raw);
    if (holder === undefined) {
      // The holder may be between its O_EXCL create and its write: give it a moment.
      if (attempt < 10) continue;
      throw unreadableLock(lockPath, what, raw);
    }
    if (holder.host !== hostname()) throw otherHostLock(lockPath, what, holder);
    if (isAlive(holder.pid)) throw heldLock(lockPath, what, holder);
    // Dead holder: remove its file under the takeover guard, then loop to create ours. When the
    // guard is busy another run is taking over right now; the next turn sees its lock.
    removeStale(lockPath, raw);
  }
  throw stuckTakeover(lockPath, what);
}

/*
 * Why the takeover is safe against two racing takers.
 *
 * The naive takeover (see a dead pid, unlink, create) is not: A and B both read the dead holder's
 * record; A unlinks it and creates its own lock; B, still acting on what it read, unlinks A's
 * fresh lock and creates its own. Both run. Checking after creating does not help, since the
 * damage is B's unlink, which comes later.
 *
 * So the only unlink of somebody else's lock happens inside a second O_EXCL file, the takeover
 * guard (`<lock>.takeover`), and only after re-reading the lock file inside it and finding the
 * very record judged stale. Inside the guard nothing else can replace that file: other takers are
 * shut out by the guard, a normal acquirer's O_EXCL create fails while the file exists, and its
 * dead holder will not release it. After the unlink the taker leaves the guard and competes for
 * the lock by O_EXCL create like anyone, so still exactly one run wins.
 *
 * The guard is held for a read and an unlink. A taker killed in that instant leaves the guard
 * behind; it is never removed automatically (that would reopen the same race one level up): after
 * half a second of trying, the error names the file to remove by hand.
 *
 * A dead pid that the system has since given to another process looks alive: we refuse, which is
 * the safe side, and the message says how to remove the lock by hand.
 */
function removeStale(lockPath: string, staleRaw: string): void {
  const guardPath = `${lockPath}.takeover`;
  let guard: number;
  try {
    guard = openSync(guardPath, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw error;
  }
  try {
    writeSync(guard, `${JSON.stringify({ pid: process.pid, host: hostname() })}\n`);
    if (readRaw(lockPath) === staleRaw) unlinkSync(lockPath);
  } finally {
    closeSync(guard);
    unlinkSync(guardPath);
  }
}

/** Creates the lock file with O_EXCL; false when it exists. */
function tryCreate(lockPath: string, content: string, what: LockedThing): boolean {
  let fd: number;
  try {
    fd = openSync(lockPath, 'wx');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    throw new UsageError(
      `Expected to create the lock file ${safeLabel(lockPath)} for ${what.subject}, got ${code ?? 'an error'}: ${safeLabel((error as Error).message)}. ${what.fix}`,
    );
  }
  try {
    writeSync(fd, content);
    // Durable, so a lock file found after a power cut still says whose it was.
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** The lock file's text, or undefined when there is none. */
function readRaw(lockPath: string): string | undefined {
  try {
    return readFileSync(lockPath, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    // A directory or an unreadable file in the lock's place: treat as unreadable content.
    return '';
  }
}

/** The holder record in a lock file's text, or undefined when it is not one. */
function parseHolder(raw: string): LockHolder | undefined {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Partial<LockHolder>;
  // A pid of 0 or below would signal a whole process group in process.kill: never accept one.
  if (!Number.isInteger(record.pid) || (record.pid ?? 0) <= 0) return undefined;
  if (typeof record.host !== 'string' || typeof record.startedAt !== 'string') return undefined;
  return {
    pid: record.pid as number,
    host: record.host,
    startedAt: record.startedAt,
    ...(typeof record.command === 'string' ? { command: record.command } : {}),
  };
}

/**
 * Whether a process with this pid runs on this host. EPERM means it exists but is not ours. A
 * zombie (killed, not yet reaped by its parent: a moment after `kill -9`) runs nothing.
 */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  return !isZombie(pid);
}

/** Whether Linux's process table says `pid` is a zombie; false where there is no /proc. */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) S …`: the state follows the last `)`, since comm may hold one.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false;
  }
}

/** Sleeps synchronously: opening a results file is synchronous, and this wait is milliseconds. */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function describeHolder(holder: LockHolder): string {
  const command = holder.command === undefined ? '' : `, running \`${holder.command}\``;
  return `pid ${holder.pid} on host ${safeLabel(holder.host)} (since ${safeLabel(holder.startedAt)}${safeLabel(command)})`;
}

function heldLock(lockPath: string, what: LockedThing, holder: LockHolder): UsageError {
  return new UsageError(
    `Expected ${what.subject} to be free, got a lock held by ${describeHolder(holder)}: ${safeLabel(lockPath)}. Another process is using this ${what.noun}; wait for it to finish or stop it. If no cohort process is using it, remove the lock file by hand.`,
  );
}

function otherHostLock(lockPath: string, what: LockedThing, holder: LockHolder): UsageError {
  return new UsageError(
    `Expected ${what.subject} to be free, got a lock held by ${describeHolder(holder)}: ${safeLabel(lockPath)}. A lock from another host is never taken over, since this host (${safeLabel(hostname())}) cannot tell whether that process still runs. If no cohort process is using it, remove the lock file by hand.`,
  );
}

function unreadableLock(lockPath: string, what: LockedThing, raw: string): UsageError {
  return new UsageError(
    `Expected the lock file ${safeLabel(lockPath)} of ${what.subject} to hold a cohort lock record ({"pid","host","startedAt"}), got ${safeText(JSON.stringify(raw.slice(0, 80)))}. If no cohort process is using it, remove the lock file by hand.`,
  );
}

function stuckTakeover(lockPath: string, what: LockedThing): UsageError {
  return new UsageError(
    `Expected to take over the stale lock ${safeLabel(lockPath)} of ${what.subject}, got a takeover guard that stayed in place: ${safeLabel(`${lockPath}.takeover`)}. Its taker was probably killed mid-takeover. If no cohort process is starting on it, remove both files by hand.`,
  );
}
