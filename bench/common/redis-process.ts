/**
 * A private redis-server for the `scale` part: its own temporary folder, a unix socket in it and
 * no TCP port, no persistence, so the bench never meets a Redis the machine happens to run. The
 * same start-up as the tests' rig (test/redis.ts), kept here because the bench does not import
 * the tests.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';

export interface RedisProcess {
  /** The unix socket's path: what a queue URL is for it. */
  socket: string;
  child: ChildProcess;
  /** SIGTERM, wait for the exit, remove the folder. */
  stop(): Promise<void>;
}

const READY_WITHIN_MS = 10_000;
const POLL_MS = 25;

/** Why the part cannot run its queue cases, or undefined when redis-server is there. */
export function redisServerMissing(): string | undefined {
  const probe = spawnSync('redis-server', ['--version'], { stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0
    ? undefined
    : 'redis-server is not installed (Debian package redis-server)';
}

/** Starts redis-server on a socket in a new folder; resolves once it answers PING. */
export async function startRedisProcess(): Promise<RedisProcess> {
  // Short on purpose: a unix socket path must fit in about 100 bytes.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cb-'));
  const socket = path.join(dir, 'r.sock');
  const child = spawn(
    'redis-server',
    [
      '--port',
      '0',
      '--unixsocket',
      socket,
      '--unixsocketperm',
      '700',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const exited = once(child, 'exit');
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + READY_WITHIN_MS;
  while (!(await answersPing(socket))) {
    if (gone || Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING on ${socket}`);
    }
    await new Promise((done) => setTimeout(done, POLL_MS));
  }
  return { socket, child, stop };
}

/** A client for the bench's own reads (INFO, FLUSHALL) that neither retries nor queues. */
export function benchClient(socket: string): Redis {
  return new Redis({ path: socket, maxRetriesPerRequest: 0, retryStrategy: () => null });
}

/** One PING through a short-lived client that neither retries nor queues (test/redis.ts too). */
export async function answersPing(socket: string): Promise<boolean> {
  const probe = new Redis({
    path: socket,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // A refused connection is the expected answer until the server listens.
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/** Calls per command since the last CONFIG RESETSTAT, from `INFO commandstats`. */
export function parseCommandStats(text: string): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match) calls[match[1]!] = Number(match[2]);
  }
  return calls;
}

/** Bytes read from clients and written to them since start, from `INFO stats`. */
export function parseNetBytes(text: string): { in: number; out: number } {
  const field = (name: string) =>
    Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { in: field('total_net_input_bytes'), out: field('total_net_output_bytes') };
}
