import { closeSync, constants, existsSync, fstatSync, openSync } from 'node:fs';
import { CohortError, UsageError } from '../../../shared/errors.js';
import type { AgentOutcome } from '../../../shared/result.js';
import { safeLabel, safeText } from '../../output.js';
import { checkLine, cutFromOurs, forEachLine, snippet } from '../file.js';
import { specialKind } from '../target.js';

/**
 * Reads a results file back for `cohort results`, a line at a time in 1 MiB reads (a file of
 * 100,000 lines is never held whole). It only reads: no lock, no compaction, no write, so it
 * works beside a batch that is still appending. Each line passes the batch's own check
 * (`checkLine` in file.ts), so what the batch would refuse as "not a results file" is refused
 * here in the same terms.
 */

/** One task's line, as read. */
export interface ResultLine {
  /** The whole line, parsed: the AgentResult plus `taskId`, with any field a newer cohort adds. */
  record: Record<string, unknown>;
  taskId: string;
  outcome: AgentOutcome;
  /** The line as it is in the file, without its newline. */
  text: string;
  /** Its 1-based line number. */
  number: number;
}

/** What the read found besides the lines it handed on. */
export interface ReadReport {
  /** The file as the user named it, escaped for a message. */
  label: string;
  /** Result lines read, repeats included (blank lines and a torn last line are not). */
  lines: number;
  /** Distinct tasks: the lines handed on. */
  tasks: number;
  /** Lines for a task already seen: only a task's first line counts, as a rerun keeps it. */
  duplicates: number;
  /** Tasks with more than one line. */
  duplicateTasks: number;
  /** The first few of them. */
  duplicateIds: string[];
  /** The size of an incomplete last line that was skipped (a write under way, or one cut by a kill). */
  tornBytes: number | undefined;
}

/** Repeated task ids named in a report; past this, only counted. */
const DUPLICATE_IDS_SHOWN = 5;

/**
 * Hands each task's first line to `onLine`, in file order; `onLine` returning `'stop'` ends the
 * read early (nobody reads the output any more). Throws UsageError when the file is missing, is
 * not a regular file, or has a line that is not a result line.
 */
export function readResults(
  file: string,
  onLine: (line: ResultLine) => undefined | 'stop',
): ReadReport {
  const label = safeLabel(file);
  const fd = openForReading(file, label);
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) {
      throw new UsageError(`Expected a results file, got the directory ${label}`);
    }
    if (!stat.isFile()) {
      throw new UsageError(`Expected ${label} to be a results file, got ${specialKind(stat)}`);
    }
    // Only what is there now: lines a batch appends from here on are left for the next read.
    const report = scan(fd, stat.size, label, file, onLine);
    // A batch that starts compacts the file in place, which can shrink it under a read.
    if (fstatSync(fd).size < stat.size) throw changedUnderRead(label, file);
    return report;
  } finally {
    closeSync(fd);
  }
}

function scan(
  fd: number,
  size: number,
  label: string,
  file: string,
  onLine: (line: ResultLine) => undefined | 'stop',
): ReadReport {
  const report: ReadReport = {
    label,
    lines: 0,
    tasks: 0,
    duplicates: 0,
    duplicateTasks: 0,
    duplicateIds: [],
    tornBytes: undefined,
  };
  const seen = new Set<string>();
  const repeated = new Set<string>();
  let number = 0;
  let stopped = false;
  forEachLine(fd, size, (bytes, _start, terminated) => {
    if (stopped) return;
    number++;
    if (bytes === undefined) throw notResults(label, file, number, 'longer than 64 MiB', '');
    const text = bytes.toString('utf8');
    if (text.trim() === '') return;
    const checked = checkLine(text);
    if (!checked.ok) {
      // The batch's own rule: a last line cut from one of ours is a write under way (or a kill).
      if (!terminated && cutFromOurs(text)) {
        report.tornBytes = bytes.length;
        return;
      }
      throw notResults(label, file, number, checked.why, text);
    }
    report.lines++;
    if (seen.has(checked.taskId)) {
      report.duplicates++;
      if (!repeated.has(checked.taskId)) {
        repeated.add(checked.taskId);
        report.duplicateTasks++;
        if (report.duplicateIds.length < DUPLICATE_IDS_SHOWN)
          report.duplicateIds.push(checked.taskId);
      }
      return;
    }
    seen.add(checked.taskId);
    report.tasks++;
    const line = { record: checked.record, taskId: checked.taskId, outcome: checked.outcome };
    if (onLine({ ...line, text, number }) === 'stop') stopped = true;
  });
  return report;
}

/** Read-only, and without waiting: should the path be a FIFO, opening it does not block. */
function openForReading(file: string, label: string): number {
  try {
    return openSync(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'an error';
    if (code === 'ENOENT') {
      throw new UsageError(
        `Expected a results file (as cohort batch --out writes), got no file at ${label}`,
      );
    }
    throw new UsageError(
      `Expected a results file cohort can read, got ${code} for ${label}: ${safeLabel((error as Error).message)}`,
    );
  }
}

function notResults(
  label: string,
  file: string,
  number: number,
  why: string,
  text: string,
): CohortError {
  // A bad line while a batch compacts the file is the compaction's doing, not the file's.
  if (compacting(file)) return changedUnderRead(label, file);
  const shown = text === '' ? '' : `: ${snippet(text)}`;
  return new UsageError(
    `Expected ${label} to be a cohort results file (every line a JSON object with a string "taskId" and an "outcome", as cohort batch --out writes), got line ${number}: ${safeText(why)}${shown}`,
  );
}

/** Whether a batch is rewriting the file in place now (its redo journal is beside it). */
function compacting(file: string): boolean {
  return existsSync(`${file}.compact`) || existsSync(`${file}.compact.tmp`);
}

function changedUnderRead(label: string, file: string): CohortError {
  return new CohortError(
    'changed',
    `${label} changed while it was read: a batch starting on it compacts it in place${compacting(file) ? ' (it is doing so now)' : ''}. Read it again in a moment`,
  );
}

/** Said wherever a torn last line was skipped. */
export function tornNote(bytes: number): string {
  return `torn: the last line (${bytes} bytes) is incomplete and was skipped: a batch may be writing it now, or was killed mid-write`;
}
