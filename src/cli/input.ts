import { createReadStream, fstatSync, type Stats, statSync } from 'node:fs';
import { UsageError } from '../shared/errors.js';
import { note, safeLabel } from './output.js';

/** The most text read from stdin or a file for one prompt or one tasks file. */
const MAX_INPUT_BYTES = 256 * 1024 * 1024;

/**
 * A prompt argument: `-` reads standard input, `@FILE` reads a file, `@@…` is a literal prompt
 * starting with `@`, anything else is the prompt itself. So a prompt is never limited by the
 * size of a command line.
 */
export async function readPrompt(arg: string): Promise<string> {
  let text: string;
  if (arg === '-') text = await readStdin('the prompt');
  else if (arg.startsWith('@@')) text = arg.slice(1);
  else if (arg.startsWith('@')) text = await readTextFile(arg.slice(1), 'a prompt file');
  else text = arg;
  if (text.trim() === '') {
    const where =
      arg === '-' ? 'on stdin' : arg.startsWith('@') ? `in \`${safeLabel(arg.slice(1))}\`` : '';
    throw new UsageError(
      `Expected a non-empty prompt${where ? ` ${where}` : ''}, got an empty one`,
    );
  }
  return text;
}

/** A tasks file's text: `-` is standard input. */
export async function readTasksInput(arg: string): Promise<string> {
  return arg === '-' ? readStdin('tasks') : readTextFile(arg, 'a readable tasks file');
}

/**
 * Reads a whole file as UTF-8: a regular file, or a pipe (`<(…)`, `@/dev/stdin` fed by a pipe).
 * A folder, a missing file or a device is a UsageError, so /dev/zero is never read.
 */
async function readTextFile(file: string, what: string): Promise<string> {
  let stat: Stats;
  try {
    stat = statSync(file);
    if (stat.isDirectory()) throw new Error('it is a folder');
    if (!stat.isFile() && !stat.isFIFO() && !stat.isSocket()) {
      throw new Error('it is not a regular file or a pipe');
    }
  } catch (error) {
    throw new UsageError(`Expected ${what}, got \`${safeLabel(file)}\`: ${readFailure(error)}`);
  }
  // `@/dev/stdin`: read our own stdin as it is; a socket (a parent's pipe) cannot be reopened.
  if (isStdin(stat)) return readStdin(what);
  if (stat.size > MAX_INPUT_BYTES) {
    throw new UsageError(
      `Expected ${what} of at most ${MAX_INPUT_BYTES} bytes, got \`${safeLabel(file)}\` of ${stat.size}`,
    );
  }
  try {
    return await readCapped(createReadStream(file), `${what} \`${safeLabel(file)}\``);
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`Expected ${what}, got \`${safeLabel(file)}\`: ${readFailure(error)}`);
  }
}

function isStdin(stat: Stats): boolean {
  try {
    const stdin = fstatSync(0);
    return stdin.dev === stat.dev && stdin.ino === stat.ino;
  } catch {
    return false;
  }
}

async function readStdin(what: string): Promise<string> {
  if (process.stdin.isTTY) note(`cohort: reading ${what} from stdin; end it with Ctrl-D`);
  return readCapped(process.stdin, `${what} on stdin`);
}

/** A stream's whole text, refused past MAX_INPUT_BYTES (a pipe has no size to check first). */
async function readCapped(stream: AsyncIterable<Buffer>, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += chunk.length;
    if (total > MAX_INPUT_BYTES) {
      throw new UsageError(`Expected ${what} of at most ${MAX_INPUT_BYTES} bytes, got more`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Why a file could not be read, in a few words: `no such file`, `permission denied`, … */
export function readFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EACCES') return 'permission denied';
  return error instanceof Error ? error.message : String(error);
}
