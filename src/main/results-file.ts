import {
  closeSync,
  existsSync,
  fdatasyncSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import type { AgentResult } from '../shared/result.js';

/** A batch output line: the AgentResult plus the task's id. */
export type BatchResultLine = AgentResult & { taskId: string };

/** Reasons for which a cancelled line means "interrupted by us": the task runs again on resume. */
const INTERRUPTED = new Set(['user', 'shutdown']);

export interface ResumeState {
  /** Task ids with a final line already in the file. */
  done: Set<string>;
  /** Lines dropped: a torn last line, and cancelled lines of interrupted tasks that will rerun. */
  dropped: number;
}

/**
 * Prepares an output file for appending. Keeps every whole line; drops a torn last line (the
 * process was killed mid-write) and the `cancelled` lines of tasks interrupted by Ctrl-C or
 * shutdown, which run again. When anything is dropped the file is rewritten atomically
 * (temporary file + rename), so a crash during the rewrite loses nothing.
 */
export function prepareResults(file: string): ResumeState {
  const done = new Set<string>();
  if (!existsSync(file)) return { done, dropped: 0 };
  const text = readFileSync(file, 'utf8');
  const kept: string[] = [];
  let dropped = 0;
  const lines = text.split('\n');
  // The piece after the last newline is either empty or a torn line.
  const complete = lines.slice(0, -1);
  if (lines.at(-1) !== '') dropped++;
  for (const line of complete) {
    if (line.trim() === '') continue;
    let parsed: Partial<BatchResultLine>;
    try {
      parsed = JSON.parse(line) as Partial<BatchResultLine>;
    } catch {
      dropped++;
      continue;
    }
    if (typeof parsed.taskId !== 'string') {
      dropped++;
      continue;
    }
    if (parsed.outcome === 'cancelled' && INTERRUPTED.has(parsed.reason ?? '')) {
      dropped++;
      continue;
    }
    if (done.has(parsed.taskId)) {
      dropped++;
      continue;
    }
    done.add(parsed.taskId);
    kept.push(line);
  }
  if (dropped > 0) {
    const temporary = `${file}.cohort-tmp`;
    writeFileSync(temporary, kept.map((line) => `${line}\n`).join(''));
    renameSync(temporary, file);
  }
  return { done, dropped };
}

/**
 * Appends result lines. Each line goes out in one `write` on an O_APPEND descriptor, so a kill
 * cannot leave half of it; the data is synced to disk at most every `syncEveryMs`.
 */
export class ResultsWriter {
  readonly #fd: number;
  readonly #syncEveryMs: number;
  #lastSync = 0;
  #closed = false;

  constructor(file: string, options: { syncEveryMs?: number } = {}) {
    this.#fd = openSync(file, 'a');
    this.#syncEveryMs = options.syncEveryMs ?? 200;
  }

  append(line: BatchResultLine): void {
    const buffer = Buffer.from(`${JSON.stringify(line)}\n`);
    let offset = 0;
    while (offset < buffer.length) offset += writeSync(this.#fd, buffer, offset);
    const now = Date.now();
    if (now - this.#lastSync >= this.#syncEveryMs) {
      fdatasyncSync(this.#fd);
      this.#lastSync = now;
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    fdatasyncSync(this.#fd);
    closeSync(this.#fd);
  }
}
