/**
 * The journals a batch's runs wrote, so that a rerun of the same command goes on with a task that
 * was mid-way from its last committed step rather than from its prompt. Each run appends its run
 * folder to `<out>.journals` (one path per line); a rerun reads those journals for the tasks it
 * is about to run (their start records carry the task's journal key as `meta.key`).
 */
import { appendFileSync, readFileSync } from 'node:fs';
import type { JournaledStep } from '../../main/lanes/collector-options.js';
import type { BatchRecord } from '../../shared/journal/format.js';
import {
  type AgentHistory,
  readRun,
  readSegment,
  segmentFiles,
} from '../../shared/journal/reader.js';
import type { MessageParam } from '../../shared/provider/types.js';
import { INTERRUPTED } from './file.js';

/** The main thread's segment of a run: the only one that holds `batch` records. */
const MAIN_SEGMENT = '-main.jsonl';

/** The run folders `<out>.journals` lists, oldest first, each once; none without the file. */
function runFolders(out: string): string[] {
  try {
    const listed = readFileSync(journalsFile(out), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '');
    return [...new Set(listed)];
  } catch {
    return [];
  }
}

/**
 * The Message Batches earlier runs of this batch created and never read (the batches lane's
 * `batch` records without a `batch-read` one), by the custom id of each request: the newest
 * batch that holds it, with its server and the request's digest. A rerun follows these instead
 * of sending a step a killed run sent already (`batchesInFlight`, docs/LANES.md). Only the main
 * thread's segments hold them.
 */
export async function batchesInFlight(out: string): Promise<Map<string, JournaledStep>> {
  const found = new Map<string, JournaledStep>();
  const read = new Set<string>();
  const made: BatchRecord[] = [];
  for (const runDir of runFolders(out)) {
    for (const file of await segmentFiles(runDir)) {
      if (!file.endsWith(MAIN_SEGMENT)) continue;
      try {
        const content = await readSegment(file);
        made.push(...content.batches);
        for (const batch of content.batchesRead) read.add(`${batch.url} ${batch.b}`);
      } catch {
        // Another version's segment, or unreadable: its steps are sent again.
      }
    }
  }
  for (const batch of made) {
    if (read.has(`${batch.url} ${batch.b}`)) continue;
    batch.c.forEach((customId, index) => {
      found.set(customId, { batchId: batch.b, endpoint: batch.url, digest: batch.d[index]! });
    });
  }
  return found;
}

/** The side file that lists the run folders of the batch writing `out`. */
export function journalsFile(out: string): string {
  return `${out}.journals`;
}

/** Notes that this run of the batch journals in `runDir`. A failure to write costs only resumes. */
export function recordJournal(out: string, runDir: string): void {
  try {
    appendFileSync(journalsFile(out), `${runDir}\n`);
  } catch {
    // Without the note, a later rerun starts these tasks from their prompts: nothing is lost.
  }
}

/** Whether a history is a task cut off mid-way: started, stopped by us or by a kill. */
function unfinished(history: AgentHistory): boolean {
  if (history.inc < 0 || history.corrupt) return false;
  // Nothing past the prompt: there is nothing to go on from.
  if (history.messages.length < 2) return false;
  const result = history.result;
  if (!result) return true;
  return result.outcome === 'cancelled' && INTERRUPTED.has(result.reason ?? '');
}

/**
 * For each task of `keys` (its journal key: its id and the short hash of the task as it runs,
 * so a task changed since is not taken for the one that wrote the journal) that an earlier run of
 * this batch left mid-way, the transcript it had committed, by key: the newest run's that holds
 * it. Run folders removed since are passed over.
 */
export async function unfinishedTasks(
  out: string,
  keys: ReadonlySet<string>,
): Promise<Map<string, MessageParam[]>> {
  const found = new Map<string, MessageParam[]>();
  // Newest first: a task resumed before and cut off again goes on from its latest run.
  for (const runDir of runFolders(out).reverse()) {
    let agents: Map<string, AgentHistory>;
    try {
      agents = await readRun(runDir);
    } catch {
      continue; // another version's journal, or unreadable: those tasks start over
    }
    for (const history of agents.values()) {
      const key = history.meta?.key;
      if (typeof key !== 'string' || !keys.has(key) || found.has(key)) continue;
      if (unfinished(history)) found.set(key, history.messages);
    }
  }
  return found;
}
