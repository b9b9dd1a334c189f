import { UsageError } from '../../shared/errors.js';
import type { AgentOutcome } from '../../shared/result.js';
import type { CliFlag, ParsedValues } from '../flags.js';
import { safeLabel } from '../output.js';
import { TASK_HASH_PREFIX } from '../task-identity.js';
import type { ResultsFile } from './file.js';

/**
 * What a rerun of a batch does with the lines it finds, beyond "done is done": a task whose line
 * was written for another version of it (a new prompt under the same id, an edited agent file:
 * its hash differs, `../task-identity.ts`) is refused until the command says to rerun it or to
 * keep its line; lines an older cohort wrote without a hash are taken as unchanged, said once;
 * and a rerun left with nothing to run but lines that are not complete says why it exits 1.
 */

/** A changed task's line: refuse to start (the default), run the task again, or keep the line. */
export type ChangedMode = 'refuse' | 'rerun' | 'keep';

export const RERUN_CHANGED_FLAG: CliFlag = {
  flag: '--rerun-changed',
  help: 'rerun the tasks that changed since their line in --out was\nwritten, replacing their lines',
};

export const KEEP_CHANGED_FLAG: CliFlag = {
  flag: '--keep-changed',
  help: 'keep the lines of the tasks that changed, as done',
};

/** `--rerun-changed` or `--keep-changed`; neither refuses changed tasks, both is a mistake. */
export function changedMode(values: ParsedValues): ChangedMode {
  const rerun = values['rerun-changed'] === true;
  const keep = values['keep-changed'] === true;
  if (rerun && keep) {
    throw new UsageError(
      'Expected at most one of `--rerun-changed` (run the changed tasks again) and `--keep-changed` (keep their old lines), got both',
    );
  }
  return rerun ? 'rerun' : keep ? 'keep' : 'refuse';
}

/**
 * A kept line's hash against its task's now: `uncompared` when the task is not in this run's
 * tasks, `unhashed` when the line has no hash this version writes (an older cohort's line).
 */
export function compareHash(
  written: string | undefined,
  now: string | undefined,
): 'same' | 'changed' | 'unhashed' | 'uncompared' {
  if (now === undefined) return 'uncompared';
  if (written === undefined || !written.startsWith(TASK_HASH_PREFIX)) return 'unhashed';
  return written === now ? 'same' : 'changed';
}

/** How many ids a message names before "and N more". */
const LISTED = 20;

/** The first ids, quoted and escaped, then how many more there are. */
export function listIds(ids: readonly string[]): string {
  const shown = ids.slice(0, LISTED).map((id) => safeLabel(JSON.stringify(id)));
  const more = ids.length - shown.length;
  return `${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** The refusal of a rerun that found changed tasks: exit 2, nothing ran, the file as it was. */
export function changedTasksError(label: string, ids: readonly string[]): UsageError {
  return new UsageError(
    `Expected each task that has a line in ${label} to be the task that wrote it, got ${ids.length} changed since (another prompt, system, preamble, model, tools, maxSteps, outputSchema, budget or agent file): ${listIds(ids)}. Nothing ran and ${label} is as it was. Rerun with --rerun-changed to run them again (their lines are replaced), or with --keep-changed to keep their old lines as done`,
  );
}

/** ` (1 failed, to retry; 2 changed, to rerun)` for the start line, or '' when neither. */
export function againDetail(results: Pick<ResultsFile, 'retried' | 'rerunChanged'>): string {
  const parts = [
    results.retried ? `${results.retried} failed, to retry` : '',
    results.rerunChanged ? `${results.rerunChanged} changed, to rerun` : '',
  ].filter((part) => part !== '');
  return parts.length === 0 ? '' : ` (${parts.join('; ')})`;
}

/**
 * The lines a rerun prints after its start line about the lines it kept: those without a hash
 * (once), the changed tasks kept by `--keep-changed`, and, when nothing is left to run, the
 * outcomes that make the exit code 1 and how to run the failed ones again.
 */
export function rerunNotes(options: {
  results: Pick<ResultsFile, 'changed' | 'rerunChanged' | 'unhashed' | 'outcomeOf'>;
  taskIds: readonly string[];
  toRun: number;
  label: string;
}): string[] {
  const { results, label } = options;
  const notes: string[] = [];
  if (results.unhashed > 0) {
    notes.push(
      `cohort batch: ${results.unhashed} line(s) in ${label} have no task hash (written by an older cohort); treating them as unchanged`,
    );
  }
  if (results.changed.length > 0 && results.rerunChanged === 0) {
    notes.push(
      `cohort batch: ${results.changed.length} changed task(s) keep their old line (--keep-changed): ${listIds(results.changed)}`,
    );
  }
  if (options.toRun === 0) {
    const notComplete = notCompleteNote(options.taskIds, results, label);
    if (notComplete !== undefined) notes.push(notComplete);
  }
  return notes;
}

/** Why a rerun with nothing to run exits 1: the kept lines that are not `complete`. */
function notCompleteNote(
  taskIds: readonly string[],
  results: Pick<ResultsFile, 'outcomeOf'>,
  label: string,
): string | undefined {
  const counts = new Map<AgentOutcome, number>();
  for (const id of taskIds) {
    const outcome = results.outcomeOf(id);
    if (outcome !== undefined) counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
  }
  const lines = [...counts.values()].reduce((sum, count) => sum + count, 0);
  const complete = counts.get('complete') ?? 0;
  if (complete === lines) return undefined;
  const others = [...counts]
    .filter(([outcome]) => outcome !== 'complete')
    .map(([outcome, count]) => `${count} ${outcome}`)
    .join(', ');
  const failed = counts.get('failed') ?? 0;
  const hint = failed > 0 ? '. Rerun with --retry-failed to run the failed ones again' : '';
  return `cohort batch: of the ${lines} task(s) in ${label}, ${complete} complete, ${others} (line kept); 0 to run, so the exit code is 1: not every task is complete${hint}`;
}
