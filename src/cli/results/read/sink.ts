import {
  closeSync,
  openSync,
  renameSync,
  type Stats,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { UsageError } from '../../../shared/errors.js';
import { safeLabel, stdout } from '../../output.js';

/**
 * Where a subcommand's rows go: stdout, or `--out FILE`. Text is gathered into 64 KiB pieces, so
 * an export of 100,000 rows makes a few hundred writes, not 100,000.
 */
export interface Sink {
  /** False once nobody reads any more (stdout closed): the caller stops. */
  write(text: string): boolean;
  /** Writes what is left; a file is then put in place whole. */
  close(): void;
  /** Gives up: a file being written is removed, and a file that was there stays as it was. */
  abort(): void;
}

const PIECE = 64 * 1024;

/** stdout, through the guarded stream (a closed pipe ends the output quietly). */
export function stdoutSink(): Sink {
  let pending = '';
  const flush = () => {
    if (pending !== '') stdout().write(pending);
    pending = '';
  };
  return {
    write(text) {
      pending += text;
      if (pending.length >= PIECE) flush();
      return !stdout().closed;
    },
    close: flush,
    abort: flush,
  };
}

/**
 * `--out FILE`: written beside it under a temporary name and renamed over it at the end, so a read
 * that fails halfway (a bad line in the results file) leaves no half table and keeps an earlier
 * export as it was. It may not be one of the files read (`inputs`): a results file must never be
 * written by a reader.
 */
export function fileSink(file: string, inputs: readonly string[]): Sink {
  const label = safeLabel(file);
  const target = statOf(file);
  if (target?.isDirectory()) {
    throw new UsageError(`Expected --out to name a file, got the directory ${label}`);
  }
  for (const input of inputs) {
    const other = statOf(input);
    if (target && other && target.dev === other.dev && target.ino === other.ino) {
      throw new UsageError(
        `Expected --out to be a file of its own, got ${label}, which is ${safeLabel(input)}, a file this command reads`,
      );
    }
  }
  const temporary = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  let fd: number;
  try {
    fd = openSync(temporary, 'wx', 0o644);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'an error';
    throw new UsageError(
      `Expected --out ${label} in a folder cohort can write, got ${code}: ${safeLabel((error as Error).message)}`,
    );
  }
  let pending = '';
  let open = true;
  const flush = () => {
    const buffer = Buffer.from(pending);
    pending = '';
    let offset = 0;
    while (offset < buffer.length) offset += writeSync(fd, buffer, offset);
  };
  const finish = (keep: boolean) => {
    if (!open) return;
    open = false;
    try {
      if (keep) flush();
    } catch (error) {
      closeSync(fd);
      unlinkSync(temporary);
      throw error;
    }
    closeSync(fd);
    if (keep) renameSync(temporary, file);
    else unlinkSync(temporary);
  };
  return {
    write(text) {
      pending += text;
      if (pending.length >= PIECE) flush();
      return true;
    },
    close: () => finish(true),
    abort: () => finish(false),
  };
}

function statOf(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch {
    return undefined;
  }
}
