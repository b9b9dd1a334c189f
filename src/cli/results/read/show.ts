import { UsageError } from '../../../shared/errors.js';
import { safeLabel } from '../../output.js';
import { formatResult } from '../../views/render-result.js';
import { describeSaving } from '../../views/usage-text.js';
import { asResult } from './as-result.js';
import { escapeJsonControls } from './formats.js';
import { type ReadReport, type ResultLine, readResults } from './reader.js';

/** Task ids named when the one asked for is not there. */
const IDS_SHOWN = 5;

/** What `formatResult` already shows of a line; the rest is listed under it. */
const RENDERED: ReadonlySet<string> = new Set([
  'taskId',
  'id',
  'title',
  'outcome',
  'reason',
  'code',
  'text',
  'usage',
  'elapsedMs',
  'truncated',
  'logDir',
  'replyFile',
]);

/**
 * `cohort results FILE show ID`: task ID's line, its first as a rerun keeps it. The whole file is
 * read even after it is found, so a file that is not a results file is refused whatever the ID.
 * Throws a UsageError naming a few ids the file has when ID is not one of them.
 */
export function findTask(file: string, taskId: string): { line: ResultLine; report: ReadReport } {
  let found: ResultLine | undefined;
  const some: string[] = [];
  const report = readResults(file, (line) => {
    if (line.taskId === taskId) found = line;
    if (some.length < IDS_SHOWN) some.push(line.taskId);
    return undefined;
  });
  if (found === undefined) {
    const held =
      report.tasks === 0
        ? 'it has no result line yet'
        : `it has ${report.tasks} task(s): ${some.map(safeLabel).join(', ')}${report.tasks > some.length ? ', …' : ''}`;
    throw new UsageError(
      `Expected the id of a task in ${report.label}, got \`${safeLabel(taskId)}\`; ${held}`,
    );
  }
  return { line: found, report };
}

/** The line as it is in the file (its raw DEL and C1 characters as `\u` escapes: the same JSON). */
export function lineJson(line: ResultLine): string {
  return `${escapeJsonControls(line.text)}\n`;
}

/**
 * The line for a person: the task and its line number, the result as `cohort agent` renders one,
 * then its cost and every other field it holds (`cancelReason`, `budgetExceeded`, `host`, a field
 * a newer cohort adds), one a line, non-text values as compact JSON.
 */
export function renderTask(line: ResultLine): string {
  const result = asResult(line);
  const lines = [`task ${safeLabel(line.taskId)} · line ${line.number}`, formatResult(result)];
  const usage = result.usage;
  if (usage.costUsd !== undefined) {
    const saved =
      usage.cacheSavedUsd === undefined ? '' : ` (${describeSaving(usage.cacheSavedUsd)})`;
    lines.push(`   cost $${usage.costUsd.toFixed(4)}${saved}`);
  }
  for (const [key, value] of Object.entries(line.record)) {
    if (RENDERED.has(key)) continue;
    // A typed reply's value is the text above, rendered; it is listed only when there is none.
    if (key === 'value' && result.text !== '') continue;
    const shown = typeof value === 'string' ? value : JSON.stringify(value);
    lines.push(`   ${safeLabel(key)}: ${safeLabel(shown ?? String(value))}`);
  }
  return `${lines.join('\n')}\n`;
}
