/**
 * `cohort run --resume`: the checks made before a stopped run is taken up, and the lines by which
 * every run says where it is and how to resume it.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { defaultLogRoot } from '../../main/run-folder.js';
import { QUEUE_FIELDS } from '../../main/runners/queue/options.js';
import type { Session } from '../../main/session.js';
import { readStoppedRun } from '../../main/stopped-run.js';
import { UsageError } from '../../shared/errors.js';
import { JournalVersionError } from '../../shared/journal/reader.js';
import type { MessageParam } from '../../shared/provider/types.js';
import { type ParsedValues, stringFlag } from '../flags.js';
import { checkRunId, logRootOf, RUN_FLAG } from '../logs/run-folders.js';
import { note, safeLabel, shellQuote, stdout } from '../output.js';

/**
 * The flags of `cohort run --resume ID`, checked, with the run folder they name: `ROOT/ID`, which
 * must hold a stopped session's journal this cohort reads. Nothing has started yet.
 */
export async function resumeValues(
  id: string,
  prompts: number,
  values: ParsedValues,
): Promise<ParsedValues> {
  if (prompts > 0) {
    throw new UsageError(
      `Expected no PROMPT with --resume (the run goes on from its own conversation), got ${prompts}`,
    );
  }
  checkRunId(id, '--resume');
  if (stringFlag(values, QUEUE_FIELDS.url) !== undefined) {
    throw new UsageError(
      `Expected --resume without --queue, got --queue: a queued run's children are jobs in Redis that its workers go on with when this process stops, and resuming them from here is not supported`,
    );
  }
  const named = stringFlag(values, RUN_FLAG);
  if (named !== undefined && named !== id) {
    throw new UsageError(
      `Expected --run to be left out with --resume ${id}, got --run ${safeLabel(named)}`,
    );
  }
  const root = logRootOf(values);
  const dir = path.join(root, id);
  if (!existsSync(dir)) {
    throw new UsageError(
      `Expected --resume to name a run under ${safeLabel(root)}, got ${safeLabel(id)}: there is no such folder (\`cohort logs list${root === path.resolve(defaultLogRoot()) ? '' : ` --log-dir ${shellQuote(root)}`}\` lists the runs)`,
    );
  }
  await checkStoppedRun(dir);
  return { ...values, run: id };
}

/** Reads the run for a resume as `Session.resume` will: what it refuses is a usage error. */
async function checkStoppedRun(dir: string): Promise<void> {
  try {
    await readStoppedRun(dir);
  } catch (error) {
    if (error instanceof JournalVersionError)
      throw new UsageError(`Expected a journal this cohort reads, got: ${error.message}`);
    throw error;
  }
}

/**
 * Where the run is and how to take it up again: the first JSON line, or a line on stderr. A
 * resumed run says what it found.
 */
export function announceRun(logDir: string, json: boolean, session: Session, hint: boolean): void {
  const id = path.basename(logDir);
  const resumed = session.resumed;
  if (json) {
    stdout().write(
      `${JSON.stringify({ type: 'run', id, logDir, ...(resumed ? { resumed } : {}) })}\n`,
    );
    return;
  }
  const root = path.dirname(logDir);
  const elsewhere = root === path.resolve(defaultLogRoot()) ? '' : ` --log-dir ${shellQuote(root)}`;
  if (resumed) {
    const nothing = resumed.ended && resumed.resumed + resumed.undelivered === 0;
    note(
      safeLabel(
        nothing
          ? `cohort: run ${id} had ended: nothing left to do`
          : `cohort: resuming run ${id}: ${resumed.resumed} agent(s) go on, ${resumed.undelivered} result(s) to deliver${resumed.corrupt > 0 ? `, ${resumed.corrupt} failed for a corrupt journal record` : ''}`,
      ),
    );
  }
  if (!hint) return;
  note(
    safeLabel(
      `cohort: run ${id}; if it stops, go on with: cohort run --resume ${shellQuote(id)}${elsewhere} (and the same provider and tool options)`,
    ),
  );
}

/** The text of the last message, when the root's. */
export function lastAssistantText(messages: readonly MessageParam[]): string {
  const last = messages.at(-1);
  if (last?.role !== 'assistant') return '';
  if (typeof last.content === 'string') return last.content;
  return last.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}
