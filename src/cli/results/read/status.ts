import path from 'node:path';
import { clockText } from '../../../shared/duration.js';
import { safeLabel } from '../../output.js';
import { BatchTally, describeSpend } from '../../views/batch-progress.js';
import { RERUN_CODES, runsAgain } from '../file.js';
import { asResult } from './as-result.js';
import { type ReadReport, readResults, tornNote } from './reader.js';

/**
 * `cohort results FILE status`: what a batch's tasks came to, added up by the batch's own tally
 * (`BatchTally`), so the counts, the failure codes, the spend and the cache's hit rate are
 * worked out and worded as the batch's closing summary has them.
 *
 * The agents' own time (`elapsedMs`) is added up and the longest named. The span runs from the
 * first start (a line's `settledAt` less its `elapsedMs`) to the last `settledAt`; lines written
 * before `settledAt` existed have no clock time, and a file of only those has no span.
 */
export interface ResultsStatus {
  type: 'status';
  /** The file, resolved. */
  file: string;
  lines: number;
  tasks: number;
  /** As `cohort batch --json`'s summary: by outcome, failures by code, what was spent. */
  counts: BatchTally['counts'];
  failures: BatchTally['failureCodes'];
  spent: BatchTally['spent'];
  /** The agents' own time: added up, and the longest with its task. */
  elapsedMs: { total: number; longest: number; longestTaskId?: string };
  /** The first start and the last settle, over the lines with a clock time (ISO 8601). */
  span?: { from: string; to: string; ms: number };
  /** Tasks a rerun of the batch runs again: cancelled by a stop, or failed for a provider's state. */
  rerun: number;
  /** Lines for a task already seen, and the first few such tasks. */
  duplicates: number;
  duplicateIds: string[];
  /** The size of an incomplete last line that was skipped. */
  tornBytes?: number;
}

/** A file's status, with what only the plain text needs. */
export interface StatusRead {
  status: ResultsStatus;
  /** `12 complete, 3 failed (2 rate_limited, 1 auth)`, as the batch words its outcomes. */
  outcomes: string;
  report: ReadReport;
}

/** Reads `file` whole and adds up its tasks. */
export function resultsStatus(file: string): StatusRead {
  const tally = new BatchTally();
  const elapsed = { total: 0, longest: 0, longestTaskId: undefined as string | undefined };
  let rerun = 0;
  let from = Number.POSITIVE_INFINITY;
  let to = Number.NEGATIVE_INFINITY;
  const report = readResults(file, (line) => {
    const result = asResult(line);
    const at = line.record.settledAt;
    const settled = typeof at === 'string' ? Date.parse(at) : Number.NaN;
    if (Number.isFinite(settled)) {
      from = Math.min(from, settled - result.elapsedMs);
      to = Math.max(to, settled);
    }
    tally.settle(result);
    elapsed.total += result.elapsedMs;
    if (elapsed.longestTaskId === undefined || result.elapsedMs > elapsed.longest) {
      elapsed.longest = result.elapsedMs;
      elapsed.longestTaskId = line.taskId;
    }
    // The rule the batch applies when it opens the file again.
    if (runsAgain(result)) rerun++;
    return undefined;
  });
  const { longestTaskId, ...times } = elapsed;
  const status: ResultsStatus = {
    type: 'status',
    file: path.resolve(file),
    lines: report.lines,
    tasks: report.tasks,
    counts: tally.counts,
    failures: tally.failureCodes,
    spent: tally.spent,
    elapsedMs: longestTaskId === undefined ? times : { ...times, longestTaskId },
    ...(to >= from
      ? {
          span: {
            from: new Date(from).toISOString(),
            to: new Date(to).toISOString(),
            ms: to - from,
          },
        }
      : {}),
    rerun,
    duplicates: report.duplicates,
    duplicateIds: report.duplicateIds,
    ...(report.tornBytes === undefined ? {} : { tornBytes: report.tornBytes }),
  };
  return { status, outcomes: tally.describe(), report };
}

/** The status for a person: a line each for the tasks, their outcomes, the spend and the time. */
export function statusText({ status, outcomes, report }: StatusRead): string {
  const head = `${report.label}: ${status.tasks} task(s) in ${status.lines} line(s)`;
  const lines = [status.tasks === 0 ? `${head}, no result yet` : head];
  if (status.tasks > 0) {
    lines.push(`outcomes: ${outcomes}`);
    lines.push(`spent: ${describeSpend(status.spent, status.tasks)}`);
    const { total, longest, longestTaskId } = status.elapsedMs;
    const which = longestTaskId === undefined ? '' : ` (task ${safeLabel(longestTaskId)})`;
    lines.push(
      `agent time: ${formatElapsed(total)} in all, longest ${formatElapsed(longest)}${which}`,
    );
    if (status.span) {
      lines.push(
        `span: ${formatElapsed(status.span.ms)}, from ${status.span.from} to ${status.span.to}`,
      );
    }
  }
  if (status.rerun > 0) {
    lines.push(
      `rerun: ${status.rerun} task(s) run again when the batch is rerun (cancelled by a stop, or failed with ${RERUN_CODES.join(', ')})`,
    );
  }
  if (status.duplicates > 0) {
    const more = report.duplicateTasks > status.duplicateIds.length ? ', …' : '';
    lines.push(
      `duplicates: ${status.duplicates} line(s) repeat a task already in the file (${status.duplicateIds.map(safeLabel).join(', ')}${more}); each task's first line counts`,
    );
  }
  if (status.tornBytes !== undefined) lines.push(tornNote(status.tornBytes));
  return `${lines.join('\n')}\n`;
}

/** `850 ms`, `12.4 s`, `4m05s`, `2h13m`: the agents' time, added up over a batch, runs to hours. */
function formatElapsed(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  return seconds < 60 ? `${seconds.toFixed(1)} s` : clockText(seconds);
}
