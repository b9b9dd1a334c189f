import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScriptedModel } from '../src/testing/index.js';

export const CLI = fileURLToPath(new URL('../dist/src/cli/cli.js', import.meta.url));

export interface CliRun {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the first stderr/stdout text matching `pattern` seen so far or later. */
  waitFor(pattern: RegExp, stream?: 'stdout' | 'stderr'): Promise<void>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Runs the built CLI as a real child process, with a clean provider environment. `stdin` is
 * written to its standard input and closed; without it, stdin is /dev/null.
 */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  /** `detached`: in a process group of its own, as a terminal's foreground job is. */
  options: { stdin?: string; cwd?: string; detached?: boolean } = {},
): CliRun {
  const cleanEnv = { ...process.env };
  delete cleanEnv.ANTHROPIC_API_KEY;
  delete cleanEnv.ANTHROPIC_BASE_URL;
  // A bearer token alone selects the real API too (provider-select.ts).
  delete cleanEnv.ANTHROPIC_AUTH_TOKEN;
  const child = spawn(process.execPath, [CLI, ...withThreads(args)], {
    env: { ...cleanEnv, ...env },
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(options.detached ? { detached: true } : {}),
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (options.stdin !== undefined) child.stdin!.end(options.stdin);
  let out = '';
  let err = '';
  const waiters: { pattern: RegExp; stream: 'stdout' | 'stderr'; resolve: () => void }[] = [];
  const check = () => {
    for (const waiter of [...waiters]) {
      if (waiter.pattern.test(waiter.stream === 'stdout' ? out : err)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  };
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    check();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString();
    check();
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    waitFor: (pattern, stream = 'stderr') =>
      new Promise<void>((resolve) => {
        waiters.push({ pattern, stream, resolve });
        check();
      }),
    exit,
  };
}

/** The commands that start a pool of worker threads. */
const POOL_COMMANDS = new Set(['agent', 'run', 'batch', 'demo', 'worker']);

/**
 * One worker thread unless a test sets `--threads`: every thread costs a process about 0.35 s of
 * CPU to start (docs/BENCHMARKS.md, "Process start-up"), the suite starts a few hundred cohort
 * processes, and two test files share the machine's two cores. A test about threads says how many.
 */
function withThreads(args: string[]): string[] {
  const [command] = args;
  if (command === undefined || !POOL_COMMANDS.has(command)) return args;
  if (args.some((arg) => arg === '--threads' || arg.startsWith('--threads=') || arg === '--help'))
    return args;
  // After the command's positionals and flags: a `--` would end the flags, so never append past it.
  const end = args.indexOf('--');
  return end === -1
    ? [...args, '--threads', '1']
    : [...args.slice(0, end), '--threads', '1', ...args.slice(end)];
}

/**
 * Writes a tasks file in a fresh temp folder: `count` tasks `t0…` with plain prompts, or one
 * task per given prompt. Returns its path.
 */
export function writeTasks(tasks: number | string[], name = 'tasks.jsonl'): string {
  const prompts =
    typeof tasks === 'number'
      ? Array.from({ length: tasks }, (_, index) => `Task number ${index}.`)
      : tasks;
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'cohort-tasks-')), name);
  writeFileSync(
    file,
    prompts.map((prompt, index) => JSON.stringify({ id: `t${index}`, prompt })).join('\n'),
  );
  return file;
}

/** The result lines of a batch's results file. */
export function readResultLines(
  file: string,
): { taskId: string; outcome: string; reason?: string; code?: string }[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

/** Resolves once `model` has received `count` more requests. */
export function requests(model: ScriptedModel, count: number): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const onRequest = () => {
      if (++seen === count) {
        model.off('request', onRequest);
        resolve();
      }
    };
    model.on('request', onRequest);
  });
}
