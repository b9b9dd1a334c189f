import fs from 'node:fs';
import path from 'node:path';

/**
 * One file operation on an agent's log folder. `data` may be a function: it is then called when
 * the operation's turn comes, after every earlier operation of the folder has completed.
 */
export type LogOp =
  /** Creates or truncates `file` and writes `data`. */
  | { kind: 'write'; file: string; data: string | (() => string) }
  /** Appends `data` (whole lines) in one write; appends queued behind each other are joined. */
  | { kind: 'append'; file: string; data: string }
  /** Writes `file.tmp`, then renames it over `file`: a reader sees the old or the new, whole. */
  | { kind: 'replace'; file: string; data: string }
  /** Removes the folder and everything in it. */
  | { kind: 'remove' };

/** Called once an operation has completed: with null, or with the error that stopped it. */
export type LogDone = (error: Error | null) => void;

interface Queued {
  op: LogOp;
  done: LogDone | undefined;
}

/**
 * How many folders of one thread may have an operation in flight at once. libuv runs file
 * operations on one pool of threads per process (4 by default), shared by main and every worker:
 * a burst of thousands of spawns or cancels on one thread must not queue ahead of the other
 * threads' step commits. Eight keeps the pool busy (each operation is three requests, open, write
 * and close, with a turn of the event loop between them); 32 measured no faster
 * (docs/BENCHMARKS.md, "Agent logs").
 */
const IN_FLIGHT_PER_THREAD = 8;

/**
 * The operations of one log folder, run one at a time in the order they were queued. Appends that
 * wait behind a running operation are joined into one write when their turn comes (group commit).
 * An append that fails stops the file: later appends to it fail without writing, so a transcript
 * on disk is always a prefix of what was committed, never one with a step missing in the middle.
 */
export class LogLane {
  readonly dir: string;
  readonly #writer: LogWriter;
  #queue: Queued[] = [];
  #state: 'idle' | 'ready' | 'running' = 'idle';
  #dirMade = false;
  readonly #stopped = new Map<string, Error>();
  #idleWaiters: (() => void)[] = [];

  constructor(dir: string, writer: LogWriter = threadLogWriter()) {
    this.dir = dir;
    this.#writer = writer;
  }

  /** Queues `op`; `done` is called once it has completed (or failed). Never throws. */
  push(op: LogOp, done?: LogDone): void {
    this.#queue.push({ op, done });
    if (this.#state === 'idle') {
      this.#state = 'ready';
      this.#writer.ready(this);
    }
  }

  /** Queues `op` and resolves once it has completed: with null, or with its error. */
  run(op: LogOp): Promise<Error | null> {
    return new Promise((resolve) => this.push(op, resolve));
  }

  /** Resolves once every operation queued so far has completed. */
  idle(): Promise<void> {
    if (this.#state === 'idle') return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Runs the next operation (the writer calls this when the lane's turn comes). */
  start(finished: () => void): void {
    this.#state = 'running';
    const batch = this.#take();
    const settle = (error: Error | null) => {
      for (const item of batch) item.done?.(error);
      this.#afterRun();
      finished();
    };
    const op = batch[0]!.op;
    if (op.kind === 'remove') {
      this.#dirMade = false;
      fs.rm(this.dir, { recursive: true, force: true }, settle);
      return;
    }
    this.#ensureDir((dirError) => {
      if (dirError) settle(dirError);
      else if (op.kind === 'append') this.#append(op.file, op.data, settle);
      else this.#write(op, settle);
    });
  }

  /** The next operation, with the appends to the same file queued right behind it. */
  #take(): Queued[] {
    const queue = this.#queue;
    const first = queue[0]!;
    let count = 1;
    if (first.op.kind === 'append') {
      const file = first.op.file;
      while (count < queue.length) {
        const next = queue[count]!.op;
        if (next.kind !== 'append' || next.file !== file) break;
        count++;
      }
    }
    const batch = queue.slice(0, count);
    this.#queue = queue.slice(count);
    if (count > 1) {
      const data = batch.map((item) => (item.op as { data: string }).data).join('');
      batch[0] = {
        op: { kind: 'append', file: (first.op as { file: string }).file, data },
        done: first.done,
      };
    }
    return batch;
  }

  #afterRun(): void {
    if (this.#queue.length > 0) {
      this.#state = 'ready';
      this.#writer.ready(this);
      return;
    }
    this.#state = 'idle';
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }

  #append(file: string, data: string, settle: LogDone): void {
    const stopped = this.#stopped.get(file);
    if (stopped) {
      settle(stopped);
      return;
    }
    writeFile(path.join(this.dir, file), 'a', data, (error) => {
      if (error) this.#stopped.set(file, error);
      settle(error);
    });
  }

  #write(op: Extract<LogOp, { kind: 'write' | 'replace' }>, settle: LogDone): void {
    let data: string;
    try {
      data = typeof op.data === 'function' ? op.data() : op.data;
    } catch (error) {
      settle(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    const file = path.join(this.dir, op.file);
    if (op.kind === 'write') {
      writeFile(file, 'w', data, settle);
      return;
    }
    writeFile(`${file}.tmp`, 'w', data, (error) => {
      if (error) {
        settle(error);
        return;
      }
      fs.rename(`${file}.tmp`, file, (renameError) => {
        // A fresh transcript: appends may go on even if an earlier one had failed.
        if (!renameError) this.#stopped.delete(op.file);
        settle(renameError);
      });
    });
  }

  /**
   * Makes the folder before its first file. Its parent (the run's folder) is made by the engine at
   * start, so a plain mkdir nearly always does; the recursive one is for a parent removed since.
   */
  #ensureDir(then: (error: Error | null) => void): void {
    if (this.#dirMade) {
      then(null);
      return;
    }
    fs.mkdir(this.dir, (error) => {
      if (!error || error.code === 'EEXIST') {
        this.#dirMade = true;
        then(null);
        return;
      }
      if (error.code !== 'ENOENT') {
        then(error);
        return;
      }
      fs.mkdir(this.dir, { recursive: true }, (again) => {
        this.#dirMade = !again;
        then(again);
      });
    });
  }
}

/**
 * Opens `file` (`a`: to append, `w`: created or truncated), writes `data` whole, closes it; one
 * callback at the end. An append opened with O_APPEND is one write at the end of the file (more
 * only if the kernel takes part of it, which a regular file does only when the disk is full).
 */
function writeFile(file: string, flags: 'a' | 'w', data: string, done: LogDone): void {
  fs.open(file, flags, 0o666, (openError, fd) => {
    if (openError) {
      done(openError);
      return;
    }
    writeAll(fd, data, (writeError) =>
      fs.close(fd, (closeError) => done(writeError ?? closeError)),
    );
  });
}

/** Writes `data` at the descriptor's position, all of it. */
function writeAll(fd: number, data: string, done: LogDone): void {
  const bytes = Buffer.from(data, 'utf8');
  const writeFrom = (offset: number) => {
    fs.write(fd, bytes, offset, bytes.length - offset, null, (error, written) => {
      if (error) {
        done(error);
        return;
      }
      if (offset + written < bytes.length) {
        writeFrom(offset + written);
        return;
      }
      done(null);
    });
  };
  writeFrom(0);
}

/**
 * The lanes of one thread that have an operation to run, started in turn, at most
 * `IN_FLIGHT_PER_THREAD` at a time. Lanes that become ready during a turn of the event loop are
 * started together at its end (setImmediate), after the code that queued them (a step's commit
 * is followed by the next provider request, which should go out first).
 */
export class LogWriter {
  #ready: LogLane[] = [];
  #head = 0;
  #inFlight = 0;
  #scheduled = false;
  readonly #limit: number;
  #idleWaiters: (() => void)[] = [];

  constructor(limit = IN_FLIGHT_PER_THREAD) {
    this.#limit = limit;
  }

  /** Folders with an operation in flight or waiting for its turn. */
  get pending(): number {
    return this.#inFlight + this.#ready.length - this.#head;
  }

  /** Resolves once no operation of this thread is in flight or waiting for its turn. */
  idle(): Promise<void> {
    if (this.#inFlight === 0 && this.#head === this.#ready.length) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  ready(lane: LogLane): void {
    this.#ready.push(lane);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  #wakeIdle(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }

  #pump(): void {
    while (this.#inFlight < this.#limit && this.#head < this.#ready.length) {
      const lane = this.#ready[this.#head++]!;
      this.#inFlight++;
      lane.start(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
    // Drop the lanes already started, so that a long burst does not keep them all alive.
    if (this.#head === this.#ready.length) {
      this.#ready = [];
      this.#head = 0;
      if (this.#inFlight === 0 && !this.#scheduled) this.#wakeIdle();
    } else if (this.#head > 1024 && this.#head * 2 > this.#ready.length) {
      this.#ready = this.#ready.slice(this.#head);
      this.#head = 0;
    }
  }
}

let writer: LogWriter | undefined;

/** Resolves once every log write queued on this thread so far has completed (or failed). */
export function logWritesIdle(): Promise<void> {
  return writer ? writer.idle() : Promise.resolve();
}

/** This thread's writer: each worker thread, and main, has its own. */
export function threadLogWriter(): LogWriter {
  writer ??= new LogWriter();
  return writer;
}
