import { safeLabel } from '../../output.js';
import { jsonLine } from './formats.js';
import { type ReadReport, readResults } from './reader.js';

/** A reason longer than this (in characters, before escaping) is cut, so each task is one short line. */
const REASON_CHARS = 160;

/**
 * `cohort results FILE failed`: one line per failed task, in file order. For a person,
 * `ID [CODE]: REASON` with the reason escaped onto one line and cut at 160 characters; with
 * `json`, a JSON line `{"taskId","id","code","reason"}` each, the reason whole. A failed line
 * without a code is `internal`, as the batch counts it.
 */
export function listFailed(
  file: string,
  options: { json: boolean; write: (text: string) => boolean },
): { report: ReadReport; failed: number } {
  let failed = 0;
  const report = readResults(file, (line) => {
    if (line.outcome !== 'failed') return undefined;
    failed++;
    const code = typeof line.record.code === 'string' ? line.record.code : 'internal';
    const reason = typeof line.record.reason === 'string' ? line.record.reason : '';
    const id = typeof line.record.id === 'string' ? line.record.id : '';
    const text = options.json
      ? `${jsonLine({ taskId: line.taskId, id, code, reason })}\n`
      : `${safeLabel(line.taskId)} [${safeLabel(code)}]: ${safeLabel(shorten(reason))}\n`;
    return options.write(text) ? undefined : 'stop';
  });
  return { report, failed };
}

function shorten(text: string): string {
  if (text.length <= REASON_CHARS) return text;
  // By code points, so a cut never splits a surrogate pair.
  const points = Array.from(text);
  return points.length <= REASON_CHARS ? text : `${points.slice(0, REASON_CHARS).join('')}…`;
}
