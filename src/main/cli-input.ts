import { readFileSync, statSync } from 'node:fs';
import { UsageError } from '../shared/errors.js';
import { note, safeLabel } from './cli-output.js';

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
  else if (arg.startsWith('@')) text = readTextFile(arg.slice(1), 'a prompt file');
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

/** Reads a whole regular file as UTF-8; a folder, a missing file or a device is a UsageError. */
export function readTextFile(file: string, what: string): string {
  let size: number;
  try {
    const stat = statSync(file);
    if (stat.isDirectory()) throw new Error('it is a folder');
    if (!stat.isFile()) throw new Error('it is not a regular file');
    size = stat.size;
  } catch (error) {
    throw new UsageError(`Expected ${what}, got \`${safeLabel(file)}\`: ${reason(error)}`);
  }
  if (size > MAX_INPUT_BYTES) {
    throw new UsageError(
      `Expected ${what} of at most ${MAX_INPUT_BYTES} bytes, got \`${safeLabel(file)}\` of ${size}`,
    );
  }
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`Expected ${what}, got \`${safeLabel(file)}\`: ${reason(error)}`);
  }
}

async function readStdin(what: string): Promise<string> {
  if (process.stdin.isTTY) note(`cohort: reading ${what} from stdin; end it with Ctrl-D`);
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > MAX_INPUT_BYTES) {
      throw new UsageError(
        `Expected ${what} of at most ${MAX_INPUT_BYTES} bytes on stdin, got more`,
      );
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function reason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EACCES') return 'permission denied';
  return error instanceof Error ? error.message : String(error);
}
