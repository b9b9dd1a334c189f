import { readlinkSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Engine } from '../../main/engine.js';
import { TIMEOUT } from '../../main/engine-options.js';
import { mapAgents } from '../../main/map-agents.js';
import { batchJobId } from '../../main/runners/queue/job.js';
import { UsageError } from '../../shared/errors.js';
import type { AgentEvent } from '../../shared/events.js';
import { deadlineMs, type Lane } from '../../shared/lane/lane.js';
import { wholeNumber } from '../../shared/option-schema.js';
import type { MessageParam } from '../../shared/provider/types.js';
import { DASHBOARD_FLAGS } from '../dashboard-flags.js';
import { ESTIMATE_FLAGS, ESTIMATE_USAGE } from '../estimate/estimate-flags.js';
import {
  type CliFlag,
  type ParsedValues,
  parseCommand,
  positiveDurationFlag,
  stringFlag,
  wholeNumberFlag,
} from '../flags.js';
import { deadlineFlag, LANE_FLAGS, laneOptions } from '../lane-flags.js';
import { ModelStop, stopOf } from '../model-stop.js';
import { note, safeLabel, shellQuote, stdout } from '../output.js';
import {
  handleInterrupts,
  type InterruptHandler,
  onCleanup,
  type StopSignal,
  signalExitCode,
  stopSignal,
} from '../process.js';
import { openResults, RERUN_CODES, type ResultsFile } from '../results/file.js';
import { batchesInFlight, recordJournal, unfinishedTasks } from '../results/journals.js';
import {
  againDetail,
  changedMode,
  KEEP_CHANGED_FLAG,
  RERUN_CHANGED_FLAG,
  rerunNotes,
} from '../results/rerun.js';
import { FILES_FLAGS, FILES_USAGE } from '../task-files.js';
import { type TaskIdentities, taskIdentities } from '../task-identity.js';
import { type BatchTask, checkTasks, taskAgentOptions } from '../task-lines.js';
import { dryRunOf, printTasks, type TaskSource, taskSource } from '../task-source.js';
import { BatchProgress, BatchTally } from '../views/batch-progress.js';
import { TRACE_FILE_FLAG } from './common.js';
import { COMMON_HELP, commandOptions, EXIT_CODES_HELP, ownHelp } from './help.js';
import { prepareEngine, startEngine } from './start.js';

const OUT_FLAG: CliFlag = {
  flag: '--out',
  short: 'o',
  arg: 'FILE',
  help: 'the results file (required)',
};
const DEFAULT_CONCURRENCY = 50;
const CONCURRENCY_FLAG = wholeNumber(1, 100_000, {
  default: DEFAULT_CONCURRENCY,
  flag: '--concurrency',
  arg: 'N',
  help: `tasks in flight at once (default ${DEFAULT_CONCURRENCY})`,
});

/** `cohort batch`'s own flags, in the order its help lists them. */
const OWN_FLAGS: readonly CliFlag[] = [
  OUT_FLAG,
  CONCURRENCY_FLAG,
  TIMEOUT,
  { flag: '--retry-failed', help: 'rerun the tasks whose line in --out is failed' },
  RERUN_CHANGED_FLAG,
  KEEP_CHANGED_FLAG,
  { flag: '--strict', help: 'refuse to start when any task line is bad' },
  { flag: '--quiet', help: 'no progress and no summary on stderr' },
  { flag: '--json', help: 'a summary object on stdout at the end' },
  ...LANE_FLAGS,
  ...FILES_FLAGS,
  ...ESTIMATE_FLAGS,
  ...DASHBOARD_FLAGS,
];

export const BATCH_USAGE = `Usage: cohort batch TASKS.jsonl --out RESULTS.jsonl [options]
       cohort batch --files GLOB --prompt TEMPLATE --out RESULTS.jsonl [options]

Runs one child agent per task line and appends one result line (the AgentResult plus "taskId")
per task as it settles. TASKS.jsonl may be \`-\` for stdin. A task line is
  {"id", "prompt", "title"?, "system"?, "tools"?, "maxSteps"?, "model"?,
   "agent"?, "outputSchema"?, "budget"?, "patienceMs"?, "timeout"?, "cache"?, "cacheTtl"?,
   "preamble"?, "lane"?, "deadline"?}
("agent" names an agent file in --agents: only the files tasks name are checked, and a task
naming a bad one is a bad line with its FILE:LINE message; "outputSchema" puts the parsed reply in "value";
"patienceMs" is how long one of its requests may be refused 429/529 before it fails, in ms,
over its agent file's and --patience; "timeout" is its wall-clock limit in ms from its spawn
(past it the task is cancelled, reason timeout), over its agent file's and --timeout; "cache"
and "cacheTtl" are over --cache and --cache-ttl;
"preamble" is text the tasks share, a document, sent before the prompt and cached once;
"lane" is over --lane: realtime, batches for Message Batches at half the price, or auto,
batches while the batch turnaround fits before the task's "deadline" (an ISO date-time or
epoch ms in the future, over --deadline), realtime when it does not).
Every line is checked as the engine would check it before anything starts: a bad line is
reported with its number and gets no result line; the good lines run (--strict refuses to start).

${FILES_USAGE}

${ESTIMATE_USAGE}

RESULTS.jsonl is cohort's alone: it must be missing, empty, or a results file. A lock beside it
(RESULTS.jsonl.lock) keeps a second run out. Rerunning the same command skips the tasks already
in it; --retry-failed also reruns the failed ones, replacing their lines. Each line carries
"taskHash", a hash of its task as it ran (prompt, system, preamble, model, tools, maxSteps,
outputSchema, budget, --max-tokens and the agent file's fields; not title, patienceMs, timeout,
cache or cacheTtl). A task whose line was written for another version of it (the same id with a
new prompt, an edited agent file) stops the rerun before anything runs (exit 2, naming the
first 20): --rerun-changed runs those again and replaces their lines, --keep-changed keeps their
old lines as done. Lines written by an older cohort have no hash and count as unchanged.
A task that was mid-way when a run was stopped or killed goes on from its last committed step,
read from that run's journal (RESULTS.jsonl.journals lists them), not from its prompt: its
finished steps are not paid for again (unless the task changed since: then it starts over).
\`cohort results RESULTS.jsonl status|failed|export|show\` reads it back, while it runs too.

Every request passes the rate-limit governor (see --rpm, --patience, --governor). When the
provider says the quota is spent (a spend-limit 429), cannot be reached (5 connection failures
in a row) or refuses the API key, the batch stops admitting tasks for that model, says why once,
and exits 1 within seconds. On a queue the governors are the workers': the first result one of
them failed for those reasons stops the batch alike, and the message names that worker. Rerun
the same command once that is fixed: the tasks never started run, and so do those that failed
for it (codes quota_exhausted, connection and auth: their lines are replaced, without
--retry-failed).

With --queue REDIS, every task is a job on that Redis queue, run by \`cohort worker\` processes on
any machine (docs/SCALE-OUT.md). A task's job id comes from RESULTS.jsonl's path, its id and its
hash, so a rerun after a kill re-adds only what is missing and still writes one line per task
(a changed task is a new job, never the old one's result); the progress counts the workers and
each one's rate, and each line names its \`host\` and \`worker\`.
When its jobs wait 10 s with no worker taking any, it says so on stderr with the command that
starts one (\`cohort queue status\` shows the queue's jobs and workers).
On a queue, --concurrency is how many jobs the batch keeps in Redis at once, waiting or running:
set it above the workers' total --concurrency (a quarter more is plenty), so a worker finishing
a job finds the next one waiting and takes it in the same round trip.

Ctrl-C, SIGTERM or SIGHUP stops admitting tasks, cancels the running ones, writes their
cancelled results and prints how to resume; a second signal stops at once. If stdout or stderr
closes, the batch keeps going and keeps writing RESULTS.jsonl.

Options:
${ownHelp(OWN_FLAGS)}
${COMMON_HELP}
  The run's journal keeps what --logs says; for a large batch, --logs failed keeps only the
  failed agents' records. stderr names its folder at start and in the summary (cohort logs).
${EXIT_CODES_HELP}
  0  every task has a complete line (--print-tasks, --estimate: every task was good)
  1  some task did not complete, some line was bad, or the provider's quota was spent,
     it could not be reached, or it refused the key
  2  a usage error: a bad flag, an unreadable tasks file, a refused --out, a held lock,
     a --files glob that matches nothing, a bad --prompt, (with --strict) a bad line, or a
     changed task without --rerun-changed or --keep-changed; nothing ran
  130/143/129  stopped by SIGINT/SIGTERM/SIGHUP (the cancelled results are written)`;

const OPTIONS = commandOptions(OWN_FLAGS);

export async function batchCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, OPTIONS);
  if (values.help) {
    stdout().write(`${BATCH_USAGE}\n`);
    return 0;
  }
  const source = await taskSource(values, positionals);
  // `--print-tasks` and `--estimate` run nothing, so they need no results file.
  const dry = dryRunOf(values);
  const out = stringFlag(values, OUT_FLAG);
  if (out === undefined && !dry)
    throw new UsageError('Expected `--out RESULTS.jsonl`, got nothing');
  const concurrency = wholeNumberFlag(values, CONCURRENCY_FLAG) ?? DEFAULT_CONCURRENCY;
  const quiet = values.quiet === true;
  const changed = changedMode(values);
  const tasksArg = source.tasksArg;
  if (out !== undefined) refuseTraceFile(stringFlag(values, TRACE_FILE_FLAG), out, tasksArg);
  const { prepared, tasks, errors } = await readTasks(values, source);
  if (values['print-tasks']) return printTasks(tasks, errors.length);
  if (values.estimate) {
    // Loaded only here: the estimate needs the provider and its HTTP client, a run does not.
    const { estimateBatch } = await import('../estimate/estimate.js');
    return estimateBatch(values, prepared, tasks, errors.length);
  }
  if (out === undefined) throw new UsageError('Expected `--out RESULTS.jsonl`, got nothing');
  const identities = taskIdentities(tasks, prepared);
  const results = openResults(out, {
    ...(tasksArg === '-' ? {} : { tasksFile: tasksArg }),
    retryFailed: values['retry-failed'] === true,
    command: 'cohort batch',
    taskHashes: identities.hashes,
    changed,
  });
  onCleanup(() => results.close());
  const todo = tasks.filter((task) => !results.done.has(task.id));
  const skipped = tasks.length - todo.length;
  // Nothing to run (all done, or no good line): start neither the model nor the pool.
  // The batches lane: what a killed run sent and never read is followed, not sent again.
  const batched =
    (prepared.options.lane !== undefined && prepared.options.lane !== 'realtime') ||
    todo.some((task) => task.lane !== undefined && task.lane !== 'realtime');
  const inFlight = batched ? await batchesInFlight(results.path) : undefined;
  if (inFlight !== undefined && inFlight.size > 0) prepared.options.batchesInFlight = inFlight;
  const engine =
    todo.length === 0
      ? undefined
      : (await startEngine(values, { prepared, quiet, command: 'batch' })).engine;
  // Tasks an earlier run left mid-way go on from their last committed step. A queue keeps its
  // own checkpoints per job, by ids a rerun derives again (docs/SCALE-OUT.md).
  const resumable =
    engine && !engine.queued
      ? await unfinishedTasks(
          results.path,
          new Set(todo.map((task) => identities.journalKey(task.id))),
        )
      : new Map<string, MessageParam[]>();
  if (engine && !engine.queued) recordJournal(results.path, engine.logDir);
  if (!quiet) {
    const retried = againDetail(results);
    const goingOn =
      resumable.size > 0 ? `, ${resumable.size} going on from where they stopped` : '';
    note(
      `cohort batch: ${tasks.length} task(s)${skipped ? `, ${skipped} already in ${safeLabel(out)}` : ''}, ${todo.length} to run${retried}${goingOn}, concurrency ${concurrency}`,
    );
    const taskIds = tasks.map((task) => task.id);
    for (const line of rerunNotes({ results, taskIds, toRun: todo.length, label: safeLabel(out) }))
      note(line);
  }
  const tally = new BatchTally();
  const governor = engine?.governor;
  const progress = new BatchProgress({
    total: todo.length,
    quiet,
    tally,
    governor: governor ? () => governor.states() : undefined,
  });
  // On a queue, a batch that no worker serves says so (queue-watch.ts).
  const queue = engine?.queued && !quiet ? prepared.options.queue : undefined;
  const unwatch =
    queue && (await import('../queue-watch.js')).watchQueue({ queue, progress, tally });
  if (unwatch) onCleanup(unwatch);
  // Known before anything runs, so a forced stop reports it too.
  const quota = new ModelStop(todo, (task) => task.model ?? engine?.provider.model ?? '');
  // What a stopped or finished batch tells: the same from a graceful end and a forced one.
  const report = once((stopped: StopSignal | undefined) => {
    const logDir = engine?.keptLogDir;
    const summary = {
      type: 'summary',
      // The lane the tasks ran in unless their line said otherwise, and the batches it made.
      lane: prepared.options.lane ?? 'realtime',
      ...(engine && engine.batchesCreated > 0 ? { messageBatches: engine.batchesCreated } : {}),
      // The auto lane: steps no batch could answer before their deadline, sent in real time.
      ...(engine && engine.stepsMovedToRealtime > 0
        ? { movedToRealtime: engine.stepsMovedToRealtime }
        : {}),
      tasks: tasks.length,
      skipped,
      ran: tally.settled,
      counts: tally.counts,
      failures: tally.failureCodes,
      spent: tally.spent,
      badLines: errors.length,
      changed: results.changed.length,
      rerunChanged: results.rerunChanged,
      unhashed: results.unhashed,
      interrupted: stopped !== undefined,
      ...(quota.models.size > 0
        ? {
            ...quota.byKind(),
            notStarted: quota.notStarted,
          }
        : {}),
      // On a queue: how many results each worker (`HOST/PID`) answered.
      ...(tally.workers.size > 0
        ? {
            workers: Object.fromEntries(
              [...tally.workers].map(([name, { results }]) => [name, results]),
            ),
          }
        : {}),
      out: results.path,
      // The run's folder, when it holds anything (as `cohort run`'s final line names it).
      ...(logDir === undefined ? {} : { logDir }),
    };
    if (values.json) stdout().write(`${JSON.stringify(summary)}\n`);
    if (!quiet) progress.summary(results.path, skipped, errors.length, logDir);
    if (!quiet && summary.lane === 'batches') {
      const saved = tally.spent.batchSavedUsd;
      note(
        `cohort batch: lane batches: ${engine?.batchesCreated ?? 0} Message Batch(es)${saved === undefined ? '' : `, $${saved.toFixed(4)} less than in real time`}`,
      );
    }
    if (!quiet && summary.lane === 'auto') {
      const saved = tally.spent.batchSavedUsd;
      note(
        `cohort batch: lane auto: ${engine?.batchesCreated ?? 0} Message Batch(es), ${engine?.stepsMovedToRealtime ?? 0} step(s) sent in real time to meet a deadline${saved === undefined ? '' : `, $${saved.toFixed(4)} less than in real time`}`,
      );
    }
    // Cancelled tasks and those that failed for a spent quota or an unreachable provider run
    // again on resume, like the ones never started.
    const again =
      tally.counts.cancelled +
      RERUN_CODES.reduce((sum, code) => sum + (tally.failureCodes[code] ?? 0), 0);
    if (stopped) printResumeHint(todo.length - tally.settled + again);
    else if (quota.models.size > 0 && !quiet) quota.explain();
  });
  const controller = new AbortController();
  const stopHandling = handleInterrupts(batchInterrupts(controller, progress, report));
  try {
    if (engine) {
      await runTasks({
        engine,
        lane: prepared.options.lane ?? 'realtime',
        quota,
        todo,
        resumable,
        identities,
        results,
        concurrency,
        tally,
        progress,
        signal: controller.signal,
      });
    }
    progress.stop();
    await unwatch?.();
    await engine?.close();
    const complete = results.completeIds();
    results.close();
    const stopped = controller.signal.aborted ? stopSignal() : undefined;
    report(stopped);
    if (stopped) return signalExitCode(stopped);
    return errors.length === 0 && tasks.every((task) => complete.has(task.id)) ? 0 : 1;
  } finally {
    stopHandling();
  }
}

/**
 * `--trace-file` may not be the results file, its lock or the tasks file: spans appended to
 * either would break it (the results file is cohort's alone).
 */
function refuseTraceFile(traceFile: string | undefined, out: string, tasksArg: string): void {
  if (traceFile === undefined) return;
  const trace = sameFileKey(traceFile);
  const others: [string, string][] = [
    [out, '`--out`'],
    [`${out}.lock`, "`--out`'s lock"],
    ...(tasksArg === '-' ? [] : [[tasksArg, 'the tasks file'] as [string, string]]),
  ];
  for (const [other, what] of others) {
    if (sameFileKey(other) === trace) {
      throw new UsageError(
        `Expected \`--trace-file\` to be a file of its own, got \`${traceFile}\`, which is ${what}`,
      );
    }
  }
}

/**
 * What identifies a file: its device and inode when it exists (hard links too); else the path it
 * would be made at, through a dangling symbolic link and with its folder's links resolved.
 */
function sameFileKey(file: string): string {
  try {
    const info = statSync(file);
    return `${info.dev}:${info.ino}`;
  } catch {
    let target = path.resolve(file);
    try {
      target = path.resolve(path.dirname(target), readlinkSync(target));
    } catch {
      // Not a link: the path itself.
    }
    try {
      return path.join(realpathSync(path.dirname(target)), path.basename(target));
    } catch {
      return target;
    }
  }
}

/**
 * Everything is checked before anything starts: the flags, the engine options they make, and
 * every task line, with the engine's own check of an agent's options. Bad lines are reported
 * with their numbers (and refused with --strict).
 */
async function readTasks(values: ParsedValues, source: TaskSource) {
  const { label } = source;
  // Only the agent files a task names must be good: a bad one makes those lines bad, not the run.
  const prepared = await prepareEngine(values, {
    agentFileCheck: 'spawn',
    own: laneOptions(values),
  });
  const timeout = positiveDurationFlag(values, TIMEOUT);
  const deadline = deadlineFlag(values);
  const parsed = await source.read(prepared.check);
  // `--deadline` is each task's default: its line's wins.
  if (deadline !== undefined) for (const task of parsed.tasks) task.deadline ??= deadline;
  // `--timeout` is each task's default: its line's and its agent file's win.
  if (timeout !== undefined) {
    const agents = new Map(prepared.check.agents.map((agent) => [agent.name, agent]));
    for (const task of parsed.tasks) {
      const own = task.agent === undefined ? undefined : agents.get(task.agent)?.timeout;
      task.timeout ??= own ?? timeout;
    }
  }
  const { tasks, errors } = checkTasks(parsed, (task) =>
    prepared.check.checkAgent(taskAgentOptions(task)),
  );
  for (const error of errors) {
    note(`cohort batch: ${source.where(error.line)}: ${safeLabel(error.message)}`);
  }
  if (errors.length > 0 && values.strict) {
    throw new UsageError(
      `${errors.length} bad task line(s) in ${label}; --strict refuses to start`,
    );
  }
  return { prepared, tasks, errors };
}

/**
 * A task whose deadline passed while it waited for a slot (it was in the future when its line was
 * checked) is not refused for it: in the auto lane it runs in real time, all that is left to it.
 */
function pastDeadline<
  T extends { deadline?: string | number | Date | undefined; lane?: Lane | undefined },
>(spec: T, lane: Lane): T {
  const ms = deadlineMs(spec.deadline);
  if (ms === undefined || ms > Date.now()) return spec;
  const { deadline: _passed, ...rest } = spec;
  return (spec.lane ?? lane) === 'auto' ? ({ ...rest, lane: 'realtime' } as T) : (rest as T);
}

/** `fn`, run at most once: later calls do nothing. */
function once<Args extends unknown[]>(fn: (...args: Args) => void): (...args: Args) => void {
  let done = false;
  return (...args) => {
    if (done) return;
    done = true;
    fn(...args);
  };
}

/**
 * The first signal stops admitting and cancels the running tasks, whose cancelled results are
 * written too; a second forces, after telling what has settled. Installed for the whole run, up
 * to the last line printed, so a second signal is never left without its report.
 */
function batchInterrupts(
  controller: AbortController,
  progress: BatchProgress,
  report: (stopped: StopSignal) => void,
): InterruptHandler {
  return {
    onSignal: (signal, count) => {
      if (count > 1) return 'force';
      progress.note('cohort batch: stopping — cancelling running tasks and writing their results');
      controller.abort(signal === 'SIGINT' ? 'user' : 'shutdown');
      return 'handled';
    },
    onForce: () => {
      progress.stop();
      report(stopSignal() ?? 'SIGINT');
    },
  };
}

/** Runs the tasks and appends each result as it settles, until done or `signal` aborts. */
async function runTasks(options: {
  engine: Engine;
  /** `--lane`: a task's lane unless its line has one. */
  lane: Lane;
  todo: BatchTask[];
  /** Transcripts to go on from, by journal key. */
  resumable: ReadonlyMap<string, MessageParam[]>;
  /** Each task's hash: on its line, in its journal key and its job id. */
  identities: TaskIdentities;
  results: ResultsFile;
  concurrency: number;
  tally: BatchTally;
  progress: BatchProgress;
  quota: ModelStop;
  signal: AbortSignal;
}): Promise<void> {
  const { progress, tally, results, quota, identities } = options;
  const specs = options.todo.map((task) => {
    const key = identities.journalKey(task.id);
    const messages = options.resumable.get(key);
    return {
      ...taskAgentOptions(task),
      // Journaled with its records: how a rerun finds this task's transcript.
      key,
      ...(messages ? { resumeFrom: { messages } } : {}),
      task,
      // Only retries are watched (no text, no steps cross the thread): the progress says when
      // the provider pushes back.
      onEvent: tally.watch,
      eventTypes: ['provider-retry', 'step-end'] as AgentEvent['type'][],
    };
  });
  // Tasks are admitted one at a time as others settle: once the provider says a model's quota is
  // spent, the tasks for that model are passed over, not run to fail one after another.
  function* admitted() {
    for (const spec of specs) {
      if (quota.stopped(spec.task)) continue;
      quota.admitted.add(spec.task.id);
      yield pastDeadline(spec, options.lane);
    }
  }
  try {
    for await (const { spec, result } of mapAgents(options.engine, admitted(), {
      concurrency: options.concurrency,
      signal: options.signal,
      // On a queue each task is one job, by an id a rerun derives again (docs/SCALE-OUT.md).
      ...(options.engine.queued
        ? {
            contextOf: ({ task }) => ({
              jobId: batchJobId(results.path, task.id, identities.version(task.id)),
            }),
          }
        : {}),
    })) {
      results.append({
        ...result,
        taskId: spec.task.id,
        taskHash: identities.hash(spec.task.id),
        // When the line was written: with `elapsedMs`, the batch's span for `cohort results`.
        settledAt: new Date().toISOString(),
      });
      tally.settle(result);
      const stop = stopOf(result);
      if (stop !== undefined) {
        // One line per model says it all: its other tasks fail for the same reason.
        const passedOver = quota.stop(spec.task, stop.kind, stop.reason);
        if (passedOver !== undefined) {
          progress.passOver(passedOver);
          // On a queue, the worker whose key or provider it was: each has its own.
          const where = result.worker === undefined ? '' : ` (worker ${result.worker})`;
          progress.note(
            `cohort batch: stopped admitting tasks for model ${safeLabel(quota.modelOf(spec.task))}${safeLabel(where)}: ${safeLabel(stop.reason)}`,
          );
        }
      } else if (result.outcome === 'failed') progress.failed(spec.task.id, result);
      progress.update();
    }
  } finally {
    progress.stop();
  }
}

function printResumeHint(left: number): void {
  const args = process.argv.slice(2).map(shellQuote).join(' ');
  const stdin = process.argv.slice(2).includes('-') ? ', with the same tasks on stdin' : '';
  note(
    `cohort batch: interrupted; ${left} task(s) not finished. Resume with the same command${stdin}:`,
  );
  note(`  cohort ${args}`);
}
