import { readFileSync } from 'node:fs';
import path from 'node:path';
import cliProgress from 'cli-progress';
import { UsageError } from '../../shared/errors.js';
import { type AgentOutcome, emptyOutcomeCounts } from '../../shared/result.js';
import { type BatchTask, parseTasks } from '../batch-tasks.js';
import { COMMON_OPTIONS, intFlag, parseCommand, stringFlag } from '../cli-options.js';
import { type AgentOptions, Engine } from '../engine.js';
import { mapAgents } from '../map-agents.js';
import { selectProvider } from '../provider-select.js';
import { prepareResults, ResultsWriter } from '../results-file.js';
import { engineOptionsFrom } from './common.js';

export const BATCH_USAGE = `cohort batch TASKS.jsonl --out RESULTS.jsonl [--concurrency N] [--strict] [--quiet]
             [--json] [common options]

Runs one child agent per task line ({"id","prompt","title"?,"system"?,"tools"?,"maxSteps"?,
"model"?}) and appends one AgentResult line (plus "taskId") per task as it settles. Rerunning
the same command skips tasks already in RESULTS.jsonl. Bad lines are reported with their line
number; the good ones run (--strict refuses to start instead). Ctrl-C stops admitting tasks,
cancels the running ones, writes their cancelled results and says how to resume.
Exit code: 0 when every task is complete, 1 otherwise, 2 for a usage error.`;

export async function batchCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, {
    ...COMMON_OPTIONS,
    out: { type: 'string', short: 'o' },
    concurrency: { type: 'string' },
    strict: { type: 'boolean' },
    quiet: { type: 'boolean' },
  });
  if (values.help) {
    process.stdout.write(`${BATCH_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1) {
    throw new UsageError(`Expected exactly one TASKS.jsonl argument, got ${positionals.length}`);
  }
  const out = stringFlag(values, 'out');
  if (out === undefined) throw new UsageError('Expected `--out RESULTS.jsonl`, got nothing');
  const concurrency = intFlag(values, 'concurrency', 1, 100_000) ?? 50;
  const tasksFile = positionals[0]!;
  const { tasks, errors } = parseTasks(readTasksFile(tasksFile));
  for (const error of errors) log(`cohort batch: ${tasksFile}:${error.line}: ${error.message}`);
  if (errors.length > 0 && values.strict) {
    log(`cohort batch: ${errors.length} bad line(s); --strict refuses to start`);
    return 2;
  }
  const resume = prepareResults(out);
  const todo = tasks.filter((task) => !resume.done.has(task.id));
  const skipped = tasks.length - todo.length;
  const quiet = values.quiet === true;
  const engineOptions = engineOptionsFrom(values, {});
  const provider = await selectProvider(values);
  const engine = await Engine.start({ ...engineOptions, provider: provider.config });
  if (!quiet) {
    log(
      `cohort batch: ${tasks.length} task(s)${skipped ? `, ${skipped} already in ${out}` : ''}, ${todo.length} to run, concurrency ${concurrency}`,
    );
  }
  const progress = new Progress({
    total: todo.length,
    quiet,
    tty: process.stderr.isTTY === true && !values.json,
  });
  let run: BatchRun;
  try {
    run = await runTasks({ engine, todo, out, concurrency, progress });
  } finally {
    await engine.close();
    await provider.close();
  }
  const ran = Object.values(run.counts).reduce((sum, count) => sum + count, 0);
  const summary = Object.entries(run.counts)
    .filter(([, count]) => count > 0)
    .map(([outcome, count]) => `${count} ${outcome}`)
    .join(', ');
  if (values.json) {
    process.stdout.write(
      `${JSON.stringify({ type: 'summary', tasks: tasks.length, skipped, ran, counts: run.counts, badLines: errors.length, interrupted: run.interrupted, out: path.resolve(out) })}\n`,
    );
  }
  if (!quiet)
    log(
      `cohort batch: done — ${ran} ran${summary ? ` (${summary})` : ''}, ${skipped} skipped, ${errors.length} bad line(s); results in ${out}`,
    );
  if (run.interrupted) {
    const left = todo.length - ran + run.counts.cancelled;
    log(`cohort batch: interrupted; ${left} task(s) not finished. Resume with the same command:`);
    log(`  cohort batch ${process.argv.slice(3).join(' ')}`);
  }
  return errors.length === 0 && !run.interrupted && everyTaskComplete(out, tasks) ? 0 : 1;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

function readTasksFile(tasksFile: string): string {
  try {
    return readFileSync(tasksFile, 'utf8');
  } catch (error) {
    throw new UsageError(
      `Expected a readable tasks file, got \`${tasksFile}\`: ${(error as Error).message}`,
    );
  }
}

interface BatchRun {
  counts: Record<AgentOutcome, number>;
  interrupted: boolean;
}

/**
 * Runs the tasks and appends each result as it settles. Ctrl-C stops admitting, cancels the
 * running tasks, and their cancelled results are written too.
 */
async function runTasks(options: {
  engine: Engine;
  todo: BatchTask[];
  out: string;
  concurrency: number;
  progress: Progress;
}): Promise<BatchRun> {
  const { progress } = options;
  const writer = new ResultsWriter(options.out);
  const counts: Record<AgentOutcome, number> = emptyOutcomeCounts();
  const controller = new AbortController();
  let interrupted = false;
  const onSigint = () => {
    if (interrupted) return;
    interrupted = true;
    progress.note('cohort batch: stopping — cancelling running tasks and writing their results');
    controller.abort('user');
  };
  process.on('SIGINT', onSigint);
  try {
    const specs = options.todo.map((task) => ({ ...toAgentOptions(task), task }));
    for await (const { spec, result } of mapAgents(options.engine, specs, {
      concurrency: options.concurrency,
      signal: controller.signal,
    })) {
      writer.append({ ...result, taskId: spec.task.id });
      counts[result.outcome]++;
      progress.update(counts);
    }
  } finally {
    process.removeListener('SIGINT', onSigint);
    writer.close();
    progress.stop();
  }
  return { counts, interrupted };
}

function toAgentOptions(task: BatchTask): AgentOptions {
  return {
    prompt: task.prompt,
    title: task.title ?? task.id,
    streamText: false,
    ...(task.system === undefined ? {} : { system: task.system }),
    ...(task.tools === undefined ? {} : { tools: task.tools }),
    ...(task.maxSteps === undefined ? {} : { maxSteps: task.maxSteps }),
    ...(task.model === undefined ? {} : { model: task.model }),
  };
}

/** Whether every task has a `complete` line in the output (resumed runs count earlier lines). */
function everyTaskComplete(out: string, tasks: BatchTask[]): boolean {
  const complete = new Set<string>();
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    try {
      const parsed = JSON.parse(line) as { taskId?: string; outcome?: string };
      if (parsed.outcome === 'complete' && parsed.taskId) complete.add(parsed.taskId);
    } catch {
      // A torn line is not complete.
    }
  }
  return tasks.every((task) => complete.has(task.id));
}

/** Progress: a bar on a terminal, periodic plain lines otherwise, nothing with --quiet. */
class Progress {
  readonly #bar: cliProgress.SingleBar | undefined;
  readonly #total: number;
  readonly #quiet: boolean;
  readonly #started = Date.now();
  #lastLine = 0;
  #done = 0;

  constructor(options: { total: number; quiet: boolean; tty: boolean }) {
    this.#total = options.total;
    this.#quiet = options.quiet;
    if (!options.quiet && options.tty) {
      this.#bar = new cliProgress.SingleBar(
        {
          format: 'batch [{bar}] {value}/{total} | {outcomes} | {rate}/s | ETA {eta_formatted}',
          hideCursor: true,
          stream: process.stderr,
        },
        cliProgress.Presets.shades_classic,
      );
      this.#bar.start(options.total, 0, { outcomes: '', rate: '0.0' });
    }
  }

  update(counts: Record<string, number>): void {
    this.#done++;
    const seconds = (Date.now() - this.#started) / 1000;
    const rate = seconds > 0 ? (this.#done / seconds).toFixed(1) : '0.0';
    const outcomes = Object.entries(counts)
      .filter(([, count]) => count > 0)
      .map(([outcome, count]) => `${outcome} ${count}`)
      .join(' ');
    if (this.#bar) {
      this.#bar.update(this.#done, { outcomes, rate });
      return;
    }
    if (this.#quiet) return;
    const now = Date.now();
    if (now - this.#lastLine >= 2000 || this.#done === this.#total) {
      this.#lastLine = now;
      process.stderr.write(
        `cohort batch: ${this.#done}/${this.#total} done (${outcomes}), ${rate}/s\n`,
      );
    }
  }

  note(line: string): void {
    if (this.#bar) this.#bar.stop();
    process.stderr.write(`${line}\n`);
  }

  stop(): void {
    this.#bar?.stop();
  }
}
