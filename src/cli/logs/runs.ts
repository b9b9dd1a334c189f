/**
 * Finding runs and agents under a log root, for `cohort logs show`, `tail`, `export` and `list`.
 * A run is a folder directly under the root that is named as the engine names run folders, or
 * that holds a journal segment (a folder named by `--run`). Links are not followed: a link
 * under the root is not a run, as `cohort logs prune` sees it.
 */
import { open, readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { runFolderPid } from '../../main/run-folder.js';
import { CohortError, UsageError } from '../../shared/errors.js';
import { segmentPid } from '../../shared/journal/format.js';
import {
  type AgentHistory,
  histories,
  parseSegment,
  segmentFiles,
} from '../../shared/journal/reader.js';

/** Nothing by that name where the command looked: the command is fine, the journal lacks it. */
export class NotFoundError extends CohortError {
  constructor(message: string) {
    super('not_found', message);
  }
}

/** One run under a log root. */
export interface RunInfo {
  /** Its folder's name: what `--run` takes. */
  id: string;
  dir: string;
  /** Its segment files, oldest process first. */
  segments: string[];
  /** Epoch ms: its earliest segment's opening, else (no segment yet) its folder's time. */
  startedAt: number;
  /** The processes that wrote it (from its folder's and its segments' names). */
  pids: number[];
}

/**
 * The runs under `root`, newest first; none when the root does not exist. A root that is not a
 * folder is a usage error.
 */
export async function runsUnder(root: string): Promise<RunInfo[]> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(root);
  } catch {
    return [];
  }
  if (!info.isDirectory()) {
    throw new UsageError(`Expected \`--log-dir\` to be a folder of run logs, got \`${root}\``);
  }
  const entries = await readdir(root, { withFileTypes: true });
  const runs = await Promise.all(
    entries
      .filter((entry) => entry.isDirectory())
      .map((entry) => runInfo(root, entry.name, runFolderPid(entry.name) !== undefined)),
  );
  return runs
    .filter((run): run is RunInfo => run !== undefined)
    .sort((a, b) => b.startedAt - a.startedAt || (a.id < b.id ? 1 : -1));
}

/**
 * The run `id` under `root` (its folder must exist), or undefined when it is not there or not a
 * run. `always` takes a folder without segments as a run (an engine-named one).
 */
async function runInfo(root: string, id: string, always: boolean): Promise<RunInfo | undefined> {
  const dir = path.join(root, id);
  const segments = await segmentFiles(dir);
  if (segments.length === 0 && !always) return undefined;
  const opened = await Promise.all(segments.map(segmentOpenedAt));
  const times = opened.filter((at): at is number => at !== undefined);
  let startedAt = times.length > 0 ? Math.min(...times) : undefined;
  if (startedAt === undefined) {
    try {
      startedAt = (await stat(dir)).mtimeMs;
    } catch {
      return undefined; // removed while we looked
    }
  }
  const pids = new Set<number>();
  const own = runFolderPid(id);
  if (own !== undefined) pids.add(own);
  for (const file of segments) {
    const pid = segmentPid(path.basename(file));
    if (pid !== undefined) pids.add(pid);
  }
  return { id, dir, segments, startedAt, pids: [...pids] };
}

/**
 * When a segment was opened, from its first line (its header), read alone: a run's start is
 * known without reading its records. Undefined when that line is not a header of this version
 * (reading the run says why).
 */
async function segmentOpenedAt(file: string): Promise<number | undefined> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, 'r');
  } catch {
    return undefined;
  }
  try {
    const buffer = Buffer.alloc(1024);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const text = buffer.subarray(0, bytesRead).toString('utf8');
    const end = text.indexOf('\n');
    if (end < 0) return undefined;
    return parseSegment(file, text.slice(0, end + 1)).header?.at;
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

/** The run `--run` names under `root`; a folder that is not there is not found. */
export async function namedRun(root: string, id: string): Promise<RunInfo> {
  const dir = path.join(root, id);
  let isFolder = false;
  try {
    isFolder = (await stat(dir)).isDirectory();
  } catch {
    // Missing: said below.
  }
  if (!isFolder) {
    throw new NotFoundError(`no run ${id} under ${root} (cohort logs list shows the runs there)`);
  }
  return (await runInfo(root, id, true))!;
}

/** The run `--run` names, else the newest under `root`. */
export async function chosenRun(root: string, id: string | undefined): Promise<RunInfo> {
  if (id !== undefined) return namedRun(root, id);
  const [newest] = await runsUnder(root);
  if (!newest) throw new NotFoundError(`no runs under ${root}`);
  return newest;
}

/** An agent's history and the run it is in. */
export interface FoundAgent {
  run: RunInfo;
  history: AgentHistory;
}

/**
 * Agent `agentId` in the run `runId` names, else in the runs under `root`, newest first. Each
 * run's segments are searched for the id as text before any is parsed, so a miss costs a read.
 */
export async function findAgent(
  root: string,
  runId: string | undefined,
  agentId: string,
): Promise<FoundAgent> {
  const runs = runId === undefined ? await runsUnder(root) : [await namedRun(root, runId)];
  const marker = `"a":"${agentId}"`;
  for (const run of runs) {
    const texts = await Promise.all(
      run.segments.map((file) => readFile(file, 'utf8').catch(() => '')),
    );
    if (!texts.some((text) => text.includes(marker))) continue;
    const history = histories(
      texts.map((text, index) => parseSegment(run.segments[index]!, text)),
    ).get(agentId);
    if (history) return { run, history };
  }
  const where =
    runId === undefined
      ? runs.length === 0
        ? `no runs under ${root}`
        : `the ${runs.length} run(s) under ${root}`
      : `run ${runId} (${runs[0]!.dir})`;
  throw new NotFoundError(
    runs.length === 0 ? `no agent ${agentId}: ${where}` : `no agent ${agentId} in ${where}`,
  );
}
