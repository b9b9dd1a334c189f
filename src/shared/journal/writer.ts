/**
 * This thread's journal segments: one per run folder, appended off the event loop. Records queued
 * during a turn of the event loop go out together in one write at its end (group commit), one
 * write in flight at a time, so the file holds them in the order they were queued.
 */
import fs from 'node:fs';
import path from 'node:path';
import { isMainThread, threadId } from 'node:worker_threads';
import type { AgentResult } from '../result.js';
import { JOURNAL_VERSION, type JournalRecord, recordLine, segmentName } from './format.js';

/**
 * A segment's descriptor is closed after this long with nothing to write, and opened again (an
 * append to an existing file, no create) by the next record: a worker that goes idle, or exits,
 * holds no descriptor for long.
 */
const IDLE_CLOSE_MS = 2000;

/** The thread's name in segment names: `main`, or `t` and the worker's thread id. */
export function threadTag(): string {
  return isMainThread ? 'main' : `t${threadId}`;
}

/** The path of the segment of `thread` in process `pid` for the run in `dir`. */
export function segmentPath(dir: string, pid: number, thread: string): string {
  return path.join(dir, segmentName(pid, thread));
}

/**
 * One segment file of this thread. `append` never blocks and never throws; `flushed` resolves
 * once everything appended before it is written (or has failed). After a failed write the
 * segment takes no more records, so what is on disk is always a prefix of what was appended.
 */
export class SegmentWriter {
  readonly file: string;
  #pending: string[] = [];
  #fd: number | undefined;
  #opening = false;
  #writing = false;
  #scheduled = false;
  #headerWritten = false;
  #failed: Error | undefined;
  #waiters: (() => void)[] = [];
  #idleTimer: NodeJS.Timeout | undefined;

  constructor(file: string) {
    this.file = file;
  }

  /** The error that stopped the segment, if one did. */
  get failed(): Error | undefined {
    return this.#failed;
  }

  append(record: JournalRecord): void {
    if (this.#failed) return;
    this.#pending.push(recordLine(record));
    this.#schedule();
  }

  /** Resolves once every record appended so far is written, or the segment has failed. */
  flushed(): Promise<void> {
    if (this.#idle()) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  #idle(): boolean {
    return this.#pending.length === 0 && !this.#writing && !this.#opening && !this.#scheduled;
  }

  #schedule(): void {
    if (this.#scheduled || this.#writing || this.#opening) return;
    this.#scheduled = true;
    // At the end of this turn: the code that appended (a step's commit, then its next request)
    // goes first, and everything appended in the turn goes out in one write.
    setImmediate(() => {
      this.#scheduled = false;
      this.#next();
    });
  }

  #next(): void {
    if (this.#failed) {
      this.#pending = [];
      this.#wakeIfIdle();
      return;
    }
    if (this.#pending.length === 0) {
      this.#wakeIfIdle();
      this.#armIdleClose();
      return;
    }
    if (this.#fd === undefined) {
      this.#open();
      return;
    }
    this.#disarmIdleClose();
    const data = Buffer.from(this.#pending.join(''), 'utf8');
    this.#pending = [];
    this.#writing = true;
    this.#writeAll(this.#fd, data, 0);
  }

  #writeAll(fd: number, data: Buffer, offset: number): void {
    fs.write(fd, data, offset, data.length - offset, null, (error, written) => {
      if (error) {
        this.#writing = false;
        this.#fail(error);
        return;
      }
      if (offset + written < data.length) {
        this.#writeAll(fd, data, offset + written);
        return;
      }
      this.#writing = false;
      // What was appended meanwhile goes at the end of a turn too, never from this callback:
      // the code that appended (a tool's, a step's) always runs first.
      if (this.#pending.length > 0) this.#schedule();
      else this.#next();
    });
  }

  #open(): void {
    this.#opening = true;
    const opened = (error: NodeJS.ErrnoException | null, fd: number) => {
      this.#opening = false;
      if (error) {
        this.#fail(error);
        return;
      }
      this.#fd = fd;
      if (!this.#headerWritten) {
        this.#headerWritten = true;
        const header: JournalRecord = {
          k: 'segment',
          v: JOURNAL_VERSION,
          pid: process.pid,
          thread: threadTag(),
          at: Date.now(),
        };
        this.#pending.unshift(recordLine(header));
      }
      this.#next();
    };
    fs.open(this.file, 'a', 0o666, (error, fd) => {
      if (error?.code !== 'ENOENT') {
        opened(error, fd);
        return;
      }
      // The run folder was removed (or never made, on a queue worker's machine): make it again.
      fs.mkdir(path.dirname(this.file), { recursive: true }, (dirError) => {
        if (dirError) opened(dirError, -1);
        else fs.open(this.file, 'a', 0o666, opened);
      });
    });
  }

  #fail(error: Error): void {
    this.#failed = error;
    this.#pending = [];
    this.#closeFd();
    this.#wakeIfIdle();
  }

  #wakeIfIdle(): void {
    if (!this.#idle()) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  #armIdleClose(): void {
    if (this.#fd === undefined || this.#idleTimer) return;
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#idle()) this.#closeFd();
    }, IDLE_CLOSE_MS);
    this.#idleTimer.unref();
  }

  #disarmIdleClose(): void {
    if (!this.#idleTimer) return;
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  #closeFd(): void {
    this.#disarmIdleClose();
    const fd = this.#fd;
    this.#fd = undefined;
    if (fd !== undefined) fs.close(fd, () => {});
  }

  /** Writes what is pending, then closes the descriptor. */
  async close(): Promise<void> {
    await this.flushed();
    this.#closeFd();
  }
}

const segments = new Map<string, SegmentWriter>();

/** This thread's segment for the run in `dir`. */
export function journalFor(dir: string): SegmentWriter {
  let writer = segments.get(dir);
  if (!writer) {
    writer = new SegmentWriter(segmentPath(dir, process.pid, threadTag()));
    segments.set(dir, writer);
  }
  return writer;
}

/**
 * Journals a result no worker wrote (made on main: a child cancelled before it started, one
 * whose worker was lost, an agent of a stopped run), in this thread's segment for `dir`, not
 * awaited: a burst of them is one group-committed write. `keep` is the `logs` policy's word.
 */
export function journalResult(dir: string, result: AgentResult, keep: boolean): void {
  journalFor(dir).append({ k: 'result', a: result.id, at: Date.now(), keep, r: result });
}

/** Resolves once every record this thread appended so far is written (or failed). */
export async function journalsFlushed(): Promise<void> {
  await Promise.all([...segments.values()].map((writer) => writer.flushed()));
}

/**
 * Writes what is pending on this thread's segments and closes their descriptors; the next append
 * opens its segment again. A worker calls it when its last live child ends, so a thread that
 * piscina stops holds no descriptor.
 */
export async function closeJournals(): Promise<void> {
  await Promise.all([...segments.values()].map((writer) => writer.close()));
}
