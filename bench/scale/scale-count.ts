/**
 * Counts the Redis commands a process sends through ioredis, for the `scale` part. The measuring
 * process installs it for the producer's own count; each `cohort worker` the part starts loads it
 * with `node --import` (scale-count-preload.ts), and then answers SIGUSR2 by writing its count and
 * CPU time to a file, so the measuring process reads both at the edges of its window without
 * any change to the CLI.
 *
 * Every call of `Redis.prototype.sendCommand` is one command; a write is one write to a counted
 * client's socket, however many commands it carries (a pipeline, a MULTI, or the commands of one
 * `inOneWrite`): the client's round trips. The count costs an increment per command and per
 * write, which the worker's CPU figure includes.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

/** The folder a counted worker writes its snapshot into (`PID.json`). */
export const SNAPSHOT_DIR_ENV = 'COHORT_BENCH_REDIS_SNAPSHOTS';

export interface CommandCount {
  commands: number;
  writes: number;
  /** Commands by name (`evalsha`, `rpush`, …). */
  byName: Record<string, number>;
}

/**
 * What a worker writes on SIGUSR2: its count, its CPU (every thread), its main thread's
 * event-loop delay since the previous snapshot, and how many snapshots it wrote.
 */
export interface WorkerSnapshot extends CommandCount {
  taken: number;
  cpuMs: number;
  eventLoopP99Ms: number;
}

const count: CommandCount = { commands: 0, writes: 0, byName: {} };
const uncounted = new WeakSet<object>();

/** Leaves a client out of the count (the bench's own INFO reads). */
export function dontCount(client: object): void {
  uncounted.add(client);
}

/** Commands and writes sent so far by this process. */
export function commandCount(): CommandCount {
  return { ...count, byName: { ...count.byName } };
}

/** `after − before`, field by field. */
export function countDelta(before: CommandCount, after: CommandCount): CommandCount {
  const byName: Record<string, number> = {};
  for (const [name, calls] of Object.entries(after.byName)) {
    const change = calls - (before.byName[name] ?? 0);
    if (change > 0) byName[name] = change;
  }
  return {
    commands: after.commands - before.commands,
    writes: after.writes - before.writes,
    byName,
  };
}

/** `a + b`, field by field. */
export function countSum(a: CommandCount, b: CommandCount): CommandCount {
  const byName = { ...a.byName };
  for (const [name, calls] of Object.entries(b.byName)) byName[name] = (byName[name] ?? 0) + calls;
  return { commands: a.commands + b.commands, writes: a.writes + b.writes, byName };
}

interface Sendable {
  sendCommand(command: unknown, stream?: unknown, ...rest: unknown[]): unknown;
}

let installed = false;

/**
 * Wraps ioredis's `sendCommand` to count; with `snapshotDir`, SIGUSR2 writes a snapshot there.
 * Worker threads of a counted worker load the preload too (Node passes --import on to them); only
 * the main thread talks to Redis, so nothing is installed on another thread.
 */
export async function installCounter(snapshotDir?: string): Promise<void> {
  if (installed || !isMainThread) return;
  installed = true;
  const { Redis } = await import('ioredis');
  const prototype = Redis.prototype as unknown as Sendable;
  const original = prototype.sendCommand;
  // The sockets of counted clients: their writes are counted where they reach the socket.
  const sockets = new WeakSet<object>();
  prototype.sendCommand = function (this: object, command, stream, ...rest) {
    if (!uncounted.has(this)) {
      count.commands++;
      const name = (command as { name?: string }).name ?? '?';
      count.byName[name] = (count.byName[name] ?? 0) + 1;
      const socket = (this as { stream?: object }).stream;
      if (socket) sockets.add(socket);
    }
    return original.call(this, command, stream, ...rest);
  };
  // One call of either is one write of what the socket had: a chunk, or all it gathered corked.
  const socketPrototype = Socket.prototype as unknown as Record<
    '_write' | '_writev',
    (...args: unknown[]) => unknown
  >;
  for (const name of ['_write', '_writev'] as const) {
    const write = socketPrototype[name]!;
    socketPrototype[name] = function (this: object, ...args: unknown[]) {
      if (sockets.has(this)) count.writes++;
      return write.apply(this, args);
    };
  }
  if (!snapshotDir) return;
  let taken = 0;
  const file = path.join(snapshotDir, `${process.pid}.json`);
  // Read and reset by each snapshot, so the one at the window's end covers the window.
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  process.on('SIGUSR2', () => {
    taken++;
    const cpu = process.cpuUsage();
    // Node records whole 1 ms intervals: the interval itself is taken off, as in probes.ts.
    const eventLoopP99Ms = delay.count > 0 ? Math.max(0, delay.percentile(99) / 1e6 - 1) : 0;
    delay.reset();
    const snapshot: WorkerSnapshot = {
      taken,
      ...count,
      cpuMs: (cpu.user + cpu.system) / 1000,
      eventLoopP99Ms,
    };
    // Renamed into place, so a reader never sees half a file.
    writeFileSync(`${file}.tmp`, JSON.stringify(snapshot));
    renameSync(`${file}.tmp`, file);
  });
}

/** Asks a counted worker for a snapshot and waits for it (at most `withinMs`). */
export async function workerSnapshot(
  dir: string,
  pid: number,
  withinMs = 5000,
): Promise<WorkerSnapshot> {
  const file = path.join(dir, `${pid}.json`);
  const before = readSnapshot(file)?.taken ?? 0;
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + withinMs;
  for (;;) {
    const snapshot = readSnapshot(file);
    if (snapshot !== undefined && snapshot.taken > before) return snapshot;
    if (Date.now() > deadline)
      throw new Error(`worker ${pid} wrote no snapshot within ${withinMs} ms`);
    await new Promise((done) => setTimeout(done, 2));
  }
}

function readSnapshot(file: string): WorkerSnapshot | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as WorkerSnapshot;
  } catch {
    return undefined;
  }
}
