import { UsageError } from '../../../shared/errors.js';
import { readTasksInput } from '../../input.js';
import { note, safeLabel } from '../../output.js';
import { parseTasks } from '../../task-lines.js';

/**
 * The task ids of `--tasks TASKS.jsonl`, in its order: the order an export follows. The file is
 * read with the batch's own reader and line check, and what that check refuses is said the way
 * the batch says it (`FILE:LINE: why`): the batch gave such a line no result either, so it is left
 * out and the rest kept. A file with no task line at all (a results file, notes) is refused.
 */
export async function taskOrder(file: string): Promise<string[]> {
  const label = file === '-' ? 'stdin' : safeLabel(file);
  const parsed = parseTasks(await readTasksInput(file));
  if (parsed.tasks.length === 0) {
    const first = parsed.errors[0];
    throw new UsageError(
      `Expected --tasks ${label} to be a tasks file (one JSON task a line, with an "id" and a "prompt", as cohort batch reads), got ${first === undefined ? 'no task line' : `line ${first.line}: ${safeLabel(first.message)}`}`,
    );
  }
  for (const error of parsed.errors) {
    note(`cohort results: ${label}:${error.line}: ${safeLabel(error.message)}; not in the export`);
  }
  return parsed.tasks.map((task) => task.id);
}
