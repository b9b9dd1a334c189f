import { note } from '../../output.js';
import { type FieldPath, valueAt } from './fields.js';
import type { TableFormat } from './formats.js';
import { type ReadReport, readResults } from './reader.js';
import type { Sink } from './sink.js';

/** What `exportResults` writes, and where. */
export interface ExportOptions {
  fields: readonly FieldPath[];
  format: TableFormat;
  /** The tasks file's ids in its order (`--tasks`); without it, the results file's order. */
  order?: readonly string[];
  sink: Sink;
}

/**
 * `cohort results FILE export`: a table of the chosen fields, a row per task. In file order the
 * rows are written as they are read; in task order (`--tasks`) the rows are gathered first (only
 * the chosen fields of each), then written in the tasks file's order. A task with no result line
 * yet gets a row with its `taskId` and every other cell empty (`null` in JSON lines), and is
 * counted on stderr; results for tasks the tasks file does not have are left out, and counted.
 */
export function exportResults(
  file: string,
  options: ExportOptions,
): { report: ReadReport; rows: number } {
  const { fields, format, order, sink } = options;
  const names = fields.map((field) => field.name);
  const cells = (record: Record<string, unknown>) =>
    fields.map((field) => valueAt(record, field.path));
  let written = 0;
  // The header goes with the first row (or at the end): a file refused at its first line
  // prints nothing.
  let headed = false;
  const header = () => {
    if (!headed) sink.write(format.header(names));
    headed = true;
  };
  const write = (row: unknown[]) => {
    header();
    written++;
    return sink.write(format.row(names, row));
  };
  if (order === undefined) {
    const report = readResults(file, (line) => (write(cells(line.record)) ? undefined : 'stop'));
    header();
    return { report, rows: written };
  }
  const rows = new Map<string, unknown[]>();
  const report = readResults(file, (line) => {
    rows.set(line.taskId, cells(line.record));
    return undefined;
  });
  let missing = 0;
  header();
  for (const taskId of order) {
    const row = rows.get(taskId);
    if (row === undefined) missing++;
    else rows.delete(taskId);
    if (!write(row ?? cells({ taskId }))) return { report, rows: written };
  }
  if (missing > 0) {
    note(`cohort results: ${missing} task(s) of --tasks have no result line yet (empty outcome)`);
  }
  if (rows.size > 0) {
    note(`cohort results: ${rows.size} result line(s) for tasks not in --tasks were left out`);
  }
  return { report, rows: written };
}
