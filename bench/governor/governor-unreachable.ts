/**
 * The `unreachable` scenario of the `governor` part: `cohort batch`, the real CLI in a child
 * process, with thousands of tasks against a provider that cannot serve any of them, timed from
 * spawn to exit. Two cases: a closed port (nothing listens, every connection is refused) and a
 * scripted model that answers every request `401 authentication_error`, as a wrong key gets. A
 * run still going at the cap is stopped (SIGTERM, then SIGKILL) and reported as such.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { scriptBlock } from '../../src/testing/index.js';
import { median } from '../common/stats.js';
import { localModelEnv } from '../engines/fork.js';
import { startGovernorModel } from './governor-model.js';

export const UNREACHABLE_CASES = ['closed port', 'wrong key'] as const;
export type UnreachableCase = (typeof UNREACHABLE_CASES)[number];

/** How long a stopped batch may take to write its cancelled results before it is killed. */
const KILL_GRACE_MS = 10_000;

/** A key for the local server only: it names whose limits a request uses, nothing more. */
const BENCH_KEY = 'bench-not-a-real-key';

export interface UnreachableRun {
  case: UnreachableCase;
  run: number;
  tasks: number;
  concurrency: number;
  /** Spawn → exit, s (past the cap when it had to be stopped). */
  seconds: number;
  /** Still running at the cap, so stopped. */
  timedOut: boolean;
  capSeconds: number;
  exitCode: number | null;
  signal: string | null;
  /** Lines in the results file, by outcome and by failure code. */
  resultLines: number;
  outcomes: Record<string, number>;
  codes: Record<string, number>;
  stderrLines: number;
  /**
   * Distinct error messages on stderr: its lines but the progress and summary, digits as N; for
   * a batch stopped at the cap, those written before the stop.
   */
  errorMessages: number;
  /** Up to five of them, as normalised. */
  messages: string[];
  /** HTTP requests the server received (the wrong-key case; 0 for a closed port). */
  requests: number;
}

/**
 * Lines of `cohort batch`'s progress and summary (its closing line on how to resume the tasks
 * not started included), and the line saying where its journal is: not messages about an error.
 */
const PROGRESS =
  /^cohort batch: (\d+ task\(s\)|[\d.,]+\/[\d.,]+ done|done — |spent |results in |logs: )|^cohort: journal in |^cohort batch: .*: \d+ task\(s\) not started\. .*rerun the same command/;

/** A stderr line with its numbers (task ids, counts, ports, times) made alike. */
export function normaliseMessage(line: string): string {
  return line.replace(/\d+/g, 'N').trim();
}

/** The distinct error messages among `stderr`'s lines (see PROGRESS and normaliseMessage). */
export function distinctMessages(stderr: string): string[] {
  const lines = stderr.split('\n').filter((line) => line.trim() !== '' && !PROGRESS.test(line));
  return [...new Set(lines.map(normaliseMessage))];
}

/** A port that nothing listens on: one the OS just gave out and took back. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

function taskLines(count: number, prompt: (index: number) => string): string {
  return Array.from({ length: count }, (_, index) =>
    JSON.stringify({ id: `t${index}`, prompt: prompt(index) }),
  ).join('\n');
}

/** Every request of a task answered as a wrong key is, on every attempt. */
const WRONG_KEY_SCRIPT = scriptBlock([
  { error: { status: 401, type: 'authentication_error', message: 'invalid x-api-key' } },
]);

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

function readResults(file: string): { outcomes: string[]; codes: string[] } {
  if (!existsSync(file)) return { outcomes: [], codes: [] };
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  const parsed = lines.map((line) => JSON.parse(line) as { outcome?: string; code?: string });
  return {
    outcomes: parsed.map((line) => line.outcome ?? 'unknown'),
    codes: parsed.filter((line) => line.code !== undefined).map((line) => line.code as string),
  };
}

/** Runs the batch until it exits, or stops it at the cap (`onCap` runs just before). */
async function timeBatch(
  child: ChildProcess,
  capMs: number,
  onCap: () => void,
): Promise<{ ms: number; timedOut: boolean; code: number | null; signal: string | null }> {
  const begin = performance.now();
  const exited = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
  let timedOut = false;
  let killer: NodeJS.Timeout | undefined;
  const stopper = setTimeout(() => {
    timedOut = true;
    onCap();
    child.kill('SIGTERM');
    killer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
  }, capMs);
  try {
    const [code, signal] = await exited;
    return { ms: performance.now() - begin, timedOut, code, signal };
  } finally {
    clearTimeout(stopper);
    clearTimeout(killer);
  }
}

export interface UnreachableOptions {
  tasks: number;
  concurrency: number;
  capSeconds: number;
  threads: number | undefined;
  /** The path of the built CLI (dist/src/cli/cli.js). */
  cli: string;
}

/** One run of one case: a fresh folder, a fresh batch process, and for `wrong key` a fresh model. */
export async function measureUnreachable(
  which: UnreachableCase,
  run: number,
  options: UnreachableOptions,
): Promise<UnreachableRun> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cohort-bench-unreachable-'));
  const model = which === 'wrong key' ? await startGovernorModel({ strictAuth: true }) : undefined;
  try {
    const baseUrl = model ? model.url : `http://127.0.0.1:${await closedPort()}`;
    const tasksFile = path.join(dir, 'tasks.jsonl');
    const resultsFile = path.join(dir, 'results.jsonl');
    writeFileSync(
      tasksFile,
      taskLines(options.tasks, (index) =>
        model ? `Bench task ${index}.\n\n${WRONG_KEY_SCRIPT}` : `Bench task ${index}.`,
      ),
    );
    const args = [
      options.cli,
      'batch',
      tasksFile,
      '--out',
      resultsFile,
      '--provider',
      'anthropic',
      '--base-url',
      baseUrl,
      '--concurrency',
      String(options.concurrency),
      '--log-dir',
      path.join(dir, 'logs'),
      '--logs',
      'none',
      ...(options.threads === undefined ? [] : ['--threads', String(options.threads)]),
    ];
    const child = spawn(process.execPath, args, {
      env: { ...localModelEnv(), ANTHROPIC_API_KEY: BENCH_KEY },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    // What it said while it ran: the messages of its stop at the cap are the bench's doing.
    let said: string | undefined;
    const timed = await timeBatch(child, options.capSeconds * 1000, () => {
      said = stderr;
    });
    const { outcomes, codes } = readResults(resultsFile);
    const messages = distinctMessages(said ?? stderr);
    const requests = model ? (await model.report()).stats.requests : 0;
    return {
      case: which,
      run,
      tasks: options.tasks,
      concurrency: options.concurrency,
      seconds: timed.ms / 1000,
      timedOut: timed.timedOut,
      capSeconds: options.capSeconds,
      exitCode: timed.code,
      signal: timed.signal,
      resultLines: outcomes.length,
      outcomes: countBy(outcomes),
      codes: countBy(codes),
      stderrLines: stderr.split('\n').filter((line) => line.trim() !== '').length,
      errorMessages: messages.length,
      messages: messages.slice(0, 5),
      requests,
    };
  } finally {
    await model?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Medians over runs per case; a median is timed out when any of its runs was. */
export interface UnreachableSummary {
  case: UnreachableCase;
  tasks: number;
  concurrency: number;
  seconds: number;
  timedOut: boolean;
  capSeconds: number;
  /** The exit codes of the runs, in order (a signal's name when it had no code). */
  exits: string[];
  resultLines: number;
  errorMessages: number;
  requests: number;
  /** The first run's messages, as normalised. */
  messages: string[];
}

export function summariseUnreachable(runs: readonly UnreachableRun[]): UnreachableSummary[] {
  return UNREACHABLE_CASES.flatMap((which) => {
    const mine = runs.filter((item) => item.case === which);
    const first = mine[0];
    if (!first) return [];
    const middle = (pick: (item: UnreachableRun) => number) => median(mine.map(pick));
    return [
      {
        case: which,
        tasks: first.tasks,
        concurrency: first.concurrency,
        seconds: middle((item) => item.seconds),
        timedOut: mine.some((item) => item.timedOut),
        capSeconds: first.capSeconds,
        exits: mine.map((item) =>
          item.exitCode === null ? String(item.signal) : String(item.exitCode),
        ),
        resultLines: middle((item) => item.resultLines),
        errorMessages: middle((item) => item.errorMessages),
        requests: middle((item) => item.requests),
        messages: first.messages,
      },
    ];
  });
}
