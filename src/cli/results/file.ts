import {
  closeSync,
  constants,
  fdatasyncSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  writeSync,
} from 'node:fs';
import { describeValue, UsageError } from '../../shared/errors.js';
import type { AgentOutcome, AgentResult } from '../../shared/result.js';
import { safeLabel, safeText } from '../output.js';
import { compactInPlace, type LineSpan, recoverCompaction } from './compaction.js';
import { acquireLock, type ResultsLock } from './lock.js';
import { type ChangedMode, changedTasksError, compareHash } from './rerun.js';
import { inspectTarget, refuseTasksFile, specialKind, type Target } from './target.js';

/**
 * The batch results file, ours alone for the whole run: checked (it must be absent, empty or a
 * results file), locked (`<out>.lock`, see lock.ts), compacted in place (see
 * compaction.ts) and then appended to, one whole line per settled task.
 */

/**
 * A batch output line: the AgentResult plus the task's id and the hash of the task as it ran
 * (`src/cli/task-identity.ts`; lines an older cohort wrote have none).
 */
export type BatchResultLine = AgentResult & {
  taskId: string;
  taskHash?: string;
  /** When the batch wrote the line (ISO 8601, UTC). */
  settledAt?: string;
};

export interface OpenResultsOptions {
  /** The tasks file path (absent for stdin): `--out` equal to it (same file by dev+ino) is refused. */
  tasksFile?: string;
  /** `--retry-failed`: drop the lines of failed tasks so they run again. */
  retryFailed?: boolean;
  /** Written into the lock, so that a second run can say which command holds it. */
  command?: string;
  /**
   * Each task's hash as it runs now, by id: a kept line written with another hash is a task that
   * changed since (see rerun.ts). Without it no line is compared.
   */
  taskHashes?: ReadonlyMap<string, string>;
  /** What the open does with a changed task's line: refuse (the default), rerun or keep. */
  changed?: ChangedMode;
}

const OUTCOMES: ReadonlySet<string> = new Set<AgentOutcome>([
  'complete',
  'empty',
  'cancelled',
  'capped',
  'failed',
]);
/** Reasons for which a cancelled line means "interrupted by us": the task runs again on resume. */
export const INTERRUPTED: ReadonlySet<string> = new Set(['user', 'shutdown']);
const CHUNK = 1 << 20;
/** No result line comes near this; a "line" this long is some other kind of file. */
const MAX_LINE_BYTES = 64 << 20;
/** fdatasync at most this often while appending; close() always syncs. */
const SYNC_EVERY_MS = 200;

/**
 * Takes the lock, checks and compacts the file, opens it for appending. Throws UsageError (exit
 * 2) on refusal, leaving the file untouched.
 *
 * Order matters: the path is checked with lstat/stat first (a special file is never opened, let
 * alone read), then the lock is taken, and only with the lock held is the file read and changed.
 */
export function openResults(out: string, options: OpenResultsOptions = {}): ResultsFile {
  const target = inspectTarget(out);
  refuseTasksFile(target, options.tasksFile);
  const lock = acquireLock(`${target.path}.lock`, {
    label: out,
    command: options.command,
  });
  try {
    return new ResultsFile(prepareUnderLock(target, rulesOf(options)), lock);
  } catch (error) {
    lock.release();
    throw error;
  }
}

/** An open, locked results file. Made by `openResults`. */
export class ResultsFile {
  /** The file, resolved (symbolic links followed). */
  readonly path: string;
  /** Task ids with a final line kept. */
  readonly done: ReadonlySet<string>;
  /** Lines removed at open: a torn last line, interrupted cancels, duplicates. */
  readonly dropped: number;
  /** Failed lines removed for `retryFailed`. */
  readonly retried: number;
  /** Ids of the tasks whose kept line was written for another version of them, in task order. */
  readonly changed: readonly string[];
  /** Of those, how many had their line removed to run again (`changed: 'rerun'`). */
  readonly rerunChanged: number;
  /** Kept lines of the compared tasks that carry no hash of this version: taken as unchanged. */
  readonly unhashed: number;
  readonly #fd: number;
  readonly #lock: ResultsLock;
  /** Each task's outcome, from its first line in the file (the one a later open keeps). */
  readonly #outcomes: Map<string, AgentOutcome>;
  #lastSync = 0;
  #closed = false;

  /** @internal Use `openResults`. */
  constructor(prepared: PreparedResults, lock: ResultsLock) {
    this.path = prepared.path;
    this.done = new Set(prepared.outcomes.keys());
    this.dropped = prepared.dropped;
    this.retried = prepared.retried;
    this.changed = prepared.changed;
    this.rerunChanged = prepared.rerunChanged;
    this.unhashed = prepared.unhashed;
    this.#outcomes = prepared.outcomes;
    this.#lock = lock;
    // O_APPEND, opened only now that compaction is over: every write lands at the current end.
    this.#fd = openSync(prepared.path, 'a');
  }

  /**
   * Appends one line in a single `write` on the O_APPEND descriptor, so a kill cannot leave half
   * of it in the middle of the file; syncs to disk at most every 200 ms.
   */
  append(line: BatchResultLine): void {
    if (this.#closed) throw new Error(`results file ${this.path} is closed`);
    const buffer = Buffer.from(`${JSON.stringify(line)}\n`);
    let offset = 0;
    while (offset < buffer.length) offset += writeSync(this.#fd, buffer, offset);
    if (!this.#outcomes.has(line.taskId)) this.#outcomes.set(line.taskId, line.outcome);
    const now = Date.now();
    if (now - this.#lastSync >= SYNC_EVERY_MS) {
      fdatasyncSync(this.#fd);
      this.#lastSync = now;
    }
  }

  /**
   * Completed task ids as in the file now (for the exit code). Kept in memory: with the lock held
   * nobody else writes the file, so what we read at open plus what we appended is the file.
   */
  completeIds(): Set<string> {
    const complete = new Set<string>();
    for (const [taskId, outcome] of this.#outcomes)
      if (outcome === 'complete') complete.add(taskId);
    return complete;
  }

  /** The outcome of a task's line in the file now, if it has one. */
  outcomeOf(taskId: string): AgentOutcome | undefined {
    return this.#outcomes.get(taskId);
  }

  /** Syncs, closes the file and releases the lock. Idempotent and synchronous ('exit'-safe). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      fdatasyncSync(this.#fd);
    } finally {
      try {
        closeSync(this.#fd);
      } finally {
        this.#lock.release();
      }
    }
  }
}

interface PreparedResults {
  path: string;
  outcomes: Map<string, AgentOutcome>;
  dropped: number;
  retried: number;
  changed: string[];
  rerunChanged: number;
  unhashed: number;
}

/** What decides a kept line's fate beyond its own facts: the flags and the tasks as they are. */
interface LineRules {
  retryFailed: boolean;
  taskHashes: ReadonlyMap<string, string> | undefined;
  changed: ChangedMode;
}

function rulesOf(options: OpenResultsOptions): LineRules {
  return {
    retryFailed: options.retryFailed === true,
    taskHashes: options.taskHashes,
    changed: options.changed ?? 'refuse',
  };
}

/**
 * With the lock held: finishes an interrupted compaction, reads, checks and compacts. Changed
 * tasks refused leave the file as it was read: nothing is compacted.
 */
function prepareUnderLock(target: Target, rules: LineRules): PreparedResults {
  recoverCompaction(target.path);
  // O_NONBLOCK: should the path have turned into a FIFO since it was checked, opening it does not
  // wait for a writer; the fstat below then refuses it before a byte is read.
  const flags =
    constants.O_RDWR |
    constants.O_CREAT |
    (constants.O_NONBLOCK ?? 0) |
    (constants.O_NOFOLLOW ?? 0);
  let fd: number;
  try {
    fd = openSync(target.path, flags, 0o644);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'an error';
    throw new UsageError(
      `Expected --out ${target.label} to be a file cohort can read and write, got ${code}: ${safeLabel((error as Error).message)}`,
    );
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) {
      throw new UsageError(
        `Expected --out ${target.label} to be a regular file, got ${specialKind(stat)}.`,
      );
    }
    const scan = scanResults(fd, stat.size, { rules, label: target.label });
    if (rules.changed === 'refuse' && scan.changed.size > 0) {
      throw changedTasksError(target.label, inTaskOrder(scan.changed, rules));
    }
    applyScan(fd, target.path, scan, stat.size);
    const dropped = scan.removed + (scan.tornAt === undefined ? 0 : 1);
    return {
      path: target.path,
      outcomes: scan.outcomes,
      dropped,
      retried: scan.retried,
      changed: inTaskOrder(scan.changed, rules),
      rerunChanged: scan.rerunChanged,
      unhashed: scan.unhashed,
    };
  } finally {
    closeSync(fd);
  }
}

/** Ids in the order of the tasks file (the order `taskHashes` holds them in), not the lines'. */
function inTaskOrder(ids: ReadonlySet<string>, rules: LineRules): string[] {
  return [...(rules.taskHashes?.keys() ?? [])].filter((id) => ids.has(id));
}

interface Scan {
  /** The lines to keep, in file order. */
  keep: LineSpan[];
  outcomes: Map<string, AgentOutcome>;
  /** Whole lines to remove: interrupted cancels and duplicates. */
  removed: number;
  /** Failed lines to remove for `retryFailed`. */
  retried: number;
  /** Tasks whose first final line was written for another version of them. */
  changed: Set<string>;
  /** Changed tasks' lines to remove, so they run again. */
  rerunChanged: number;
  /** Kept lines of compared tasks without a hash of this version. */
  unhashed: number;
  /** Where a torn last line starts: the process was killed mid-write. */
  tornAt: number | undefined;
  /** The last line is a whole result line that only lacks its newline. */
  unterminated: boolean;
}

/** Reads the file line by line and decides each line's fate; throws on a line that is not ours. */
function scanResults(fd: number, size: number, options: { rules: LineRules; label: string }): Scan {
  const scan: Scan = {
    keep: [],
    outcomes: new Map(),
    removed: 0,
    retried: 0,
    changed: new Set(),
    rerunChanged: 0,
    unhashed: 0,
    tornAt: undefined,
    unterminated: false,
  };
  let number = 0;
  forEachLine(fd, size, (bytes, start, terminated) => {
    number++;
    if (bytes === undefined) throw notResults(options.label, number, 'longer than 64 MiB', '');
    const text = bytes.toString('utf8');
    if (text.trim() === '') return;
    const checked = checkLine(text);
    if (!terminated) {
      if (checked.ok) scan.unterminated = true;
      else if (cutFromOurs(text)) {
        scan.tornAt = start;
        return;
      } else throw notResults(options.label, number, checked.why, text);
    }
    if (!checked.ok) throw notResults(options.label, number, checked.why, text);
    decide(scan, checked, { start, end: start + bytes.length }, options.rules);
  });
  return scan;
}

/**
 * Whether an unterminated last line can be a piece of a line our own append was cut from: it
 * begins as every result line does and is not whole JSON. A whole object without a newline (a
 * one-line config written with printf) is someone else's, and is refused, never cut.
 */
export function cutFromOurs(text: string): boolean {
  const head = '{"id":"';
  if (!(text.startsWith(head) || head.startsWith(text))) return false;
  try {
    JSON.parse(text);
    return false;
  } catch {
    return true;
  }
}

/**
 * Failure codes a rerun retries without `--retry-failed`: the task never had its chance (a spent
 * quota, a provider that could not be reached or refused the key), so it runs again once that
 * is fixed.
 */
export const RERUN_CODES = ['quota_exhausted', 'connection', 'auth'] as const;
const RERUN: ReadonlySet<string> = new Set(RERUN_CODES);

/**
 * Keeps a task's first final line; drops interrupted cancels, failures a rerun retries (see
 * RERUN_CODES), duplicates and retried failures. A line kept so far is compared with its task
 * as it is now: a changed task's line is noted, and dropped when changed tasks rerun.
 */
/**
 * Whether a batch that opens the file runs this line's task again whatever its flags: it was
 * cancelled by a stop, or failed for the provider's state (a spent quota, no connection, a
 * refused key).
 */
export function runsAgain(line: {
  outcome: string;
  reason?: string | undefined;
  code?: string | undefined;
}): boolean {
  if (line.outcome === 'cancelled') return INTERRUPTED.has(line.reason ?? '');
  return line.outcome === 'failed' && RERUN.has(line.code ?? '');
}

function decide(scan: Scan, line: ResultLineFacts, span: LineSpan, rules: LineRules): void {
  if (scan.outcomes.has(line.taskId)) scan.removed++;
  else if (runsAgain(line)) scan.removed++;
  else if (line.outcome === 'failed' && rules.retryFailed) scan.retried++;
  else {
    const comparison = compareHash(line.taskHash, rules.taskHashes?.get(line.taskId));
    if (comparison === 'unhashed') scan.unhashed++;
    if (comparison === 'changed') {
      scan.changed.add(line.taskId);
      if (rules.changed === 'rerun') {
        scan.rerunChanged++;
        return;
      }
    }
    scan.outcomes.set(line.taskId, line.outcome);
    scan.keep.push(span);
  }
}

/** Applies the scan's verdict, touching the file only as much as needed. */
function applyScan(fd: number, file: string, scan: Scan, size: number): void {
  if (scan.removed + scan.retried + scan.rerunChanged > 0) {
    // Lines go from the middle: rewrite (this also cuts a torn tail and ends the last line).
    compactInPlace(fd, file, scan.keep);
  } else if (scan.tornAt !== undefined) {
    // Only the tail goes: cut it in place, atomically.
    ftruncateSync(fd, scan.tornAt);
    fsyncSync(fd);
  } else if (scan.unterminated) {
    // A whole last line without its newline (a hand edit): end it, so the next append starts a line.
    writeSync(fd, '\n', size);
    fsyncSync(fd);
  }
}

/** What a result line says, as `checkLine` read it. */
export interface ResultLineFacts {
  ok: true;
  /** The whole line, parsed: the AgentResult plus `taskId`, and any field a newer cohort adds. */
  record: Record<string, unknown>;
  taskId: string;
  outcome: AgentOutcome;
  reason?: string;
  code?: string;
  taskHash?: string;
}

/**
 * Whether a line is a result line; if not, why not. The one check of a line, for the batch that
 * owns the file and for `cohort results`, which reads it back.
 */
export function checkLine(text: string): ResultLineFacts | { ok: false; why: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, why: 'not JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, why: 'not a JSON object' };
  }
  const line = value as {
    taskId?: unknown;
    outcome?: unknown;
    reason?: unknown;
    code?: unknown;
    taskHash?: unknown;
  };
  if (typeof line.taskId !== 'string') {
    return {
      ok: false,
      why: `"taskId" is ${describeValue(line.taskId, 40, { quoteStrings: true })}`,
    };
  }
  if (typeof line.outcome !== 'string' || !OUTCOMES.has(line.outcome)) {
    return {
      ok: false,
      why: `"outcome" is ${describeValue(line.outcome, 40, { quoteStrings: true })}, not one of ${[...OUTCOMES].join(', ')}`,
    };
  }
  return {
    ok: true,
    record: value as Record<string, unknown>,
    taskId: line.taskId,
    outcome: line.outcome as AgentOutcome,
    ...(typeof line.reason === 'string' ? { reason: line.reason } : {}),
    ...(typeof line.code === 'string' ? { code: line.code } : {}),
    ...(typeof line.taskHash === 'string' ? { taskHash: line.taskHash } : {}),
  };
}

function notResults(label: string, number: number, why: string, text: string): UsageError {
  const shown = text === '' ? '' : `: ${snippet(text)}`;
  return new UsageError(
    `Expected --out ${label} to be empty or a cohort results file (every line a JSON object with a string "taskId" and an "outcome"), got line ${number}: ${safeText(why)}${shown}. The file was left as it is; pick another --out.`,
  );
}

/** A short, quoted, escaped piece of a line: no control character reaches the terminal. */
export function snippet(text: string): string {
  const short = text.length > 60 ? `${text.slice(0, 60)}…` : text;
  // JSON.stringify escapes C0 controls and lone surrogates; safeText then escapes DEL and C1.
  return safeText(JSON.stringify(short));
}

/**
 * Calls `onLine` for each line of the file in 1 MiB reads: a large results file is never held
 * whole, and a binary file fails at its first line. `bytes` excludes the newline; `terminated`
 * is false only for a last piece without one; `bytes` is undefined for a line over the limit.
 */
export function forEachLine(
  fd: number,
  size: number,
  onLine: (bytes: Buffer | undefined, start: number, terminated: boolean) => void,
): void {
  const chunk = Buffer.allocUnsafe(CHUNK);
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let lineStart = 0;
  let position = 0;
  while (position < size) {
    const count = readSync(fd, chunk, 0, Math.min(CHUNK, size - position), position);
    if (count === 0) break;
    position += count;
    const data = chunk.subarray(0, count);
    let from = 0;
    for (let newline = data.indexOf(10); newline !== -1; newline = data.indexOf(10, from)) {
      const piece = data.subarray(from, newline);
      const line = pending.length === 0 ? piece : Buffer.concat([...pending, piece]);
      onLine(line, lineStart, true);
      lineStart += line.length + 1;
      pending = [];
      pendingBytes = 0;
      from = newline + 1;
    }
    if (from < count) {
      pending.push(Buffer.from(data.subarray(from)));
      pendingBytes += count - from;
      if (pendingBytes > MAX_LINE_BYTES) {
        onLine(undefined, lineStart, false);
        return;
      }
    }
  }
  if (pending.length > 0) onLine(Buffer.concat(pending), lineStart, false);
}
