/**
 * A private redis-server per test file: its own temporary folder, a unix socket in it and no TCP
 * port, so tests never meet each other's data or a Redis the machine happens to run.
 *
 * Queue tests skip when redis-server is missing, and say so in the suite's name, since vitest
 * does not print why a suite was skipped:
 *
 * ```ts
 * describe.skipIf(redisMissing)(redisMissing ? `queue (skipped: ${redisMissing})` : 'queue', () => {
 *   let rig: RedisRig;
 *   beforeAll(async () => { rig = await startRedis(); });
 *   afterAll(() => rig?.stop());
 *   // …
 * });
 * ```
 *
 * With `COHORT_REQUIRE_REDIS=1` (set by CI) a missing redis-server throws at import instead, so
 * CI can never pass by skipping the queue tests.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { answersPing } from '../bench/common/redis-process.js';

/** A running private redis-server. */
export interface RedisRig {
  /** Its folder (socket, and the append-only file when `persist`). */
  dir: string;
  /** The unix socket's path. */
  socket: string;
  /** What a queue URL would be for it: the socket path. */
  url: string;
  /** SIGTERM, wait for it to exit, remove `dir`. Idempotent. */
  stop(): Promise<void>;
  /**
   * kill -9 and start again on the same socket with the same arguments. Data is lost unless
   * the rig was started with `persist: true`. `downMs` keeps it down that long in between.
   */
  restart(options?: { downMs?: number }): Promise<void>;
  /** SIGKILL it and wait for it to exit (for tests that `start()` it again themselves). */
  kill(): Promise<void>;
  /** Start it again after `kill()`; resolves once it answers PING. */
  start(): Promise<void>;
  /** A fresh ioredis client on the socket; the caller quits it. */
  client(): Redis;
}

const MISSING = 'redis-server is not installed (Debian package redis-server)';

/** Why queue tests must skip, or `undefined` when redis-server is present. */
export const redisMissing: string | undefined = probeRedis();

/**
 * Runs `command --version`: `undefined` when it works, else the reason to skip, or a throw when
 * `COHORT_REQUIRE_REDIS=1` forbids skipping. Parameters only so a test can name a missing program.
 */
export function probeRedis(
  command = 'redis-server',
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  const probe = spawnSync(command, ['--version'], { stdio: 'ignore' });
  if (probe.error === undefined && probe.status === 0) return undefined;
  if (env.COHORT_REQUIRE_REDIS === '1') {
    throw new Error(
      'COHORT_REQUIRE_REDIS is set but redis-server is not installed (Debian package redis-server)',
    );
  }
  return MISSING;
}

const READY_WITHIN_MS = 10_000;
const POLL_MS = 25;
/** How much of redis-server's output an error message keeps (its last lines say why it died). */
const KEPT_OUTPUT_CHARS = 4000;

/** Every server still running, killed when the test process exits without stopping them. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Starts a private redis-server and resolves once it answers PING on its socket. */
export async function startRedis(options: { persist?: boolean } = {}): Promise<RedisRig> {
  // Short on purpose: a unix socket path must fit in about 100 bytes.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cr-'));
  const socket = path.join(dir, 'r.sock');
  const args = [
    '--port',
    '0',
    '--unixsocket',
    socket,
    '--unixsocketperm',
    '700',
    '--save',
    '',
    ...(options.persist
      ? ['--appendonly', 'yes', '--appendfsync', 'always']
      : ['--appendonly', 'no']),
    '--dir',
    dir,
  ];
  let child: ChildProcess | undefined;
  let stopped: Promise<void> | undefined;

  const start = async (): Promise<void> => {
    if (stopped) throw new Error(`this redis-server (${dir}) was stopped`);
    if (child) throw new Error(`redis-server is already running on ${socket}`);
    child = await launch(args, socket);
  };
  const kill = async (): Promise<void> => {
    const running = child;
    child = undefined;
    if (running) await end(running, 'SIGKILL');
  };
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      const running = child;
      child = undefined;
      if (running) await end(running, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  };

  try {
    await start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    dir,
    socket,
    url: socket,
    stop,
    kill,
    start,
    async restart(restartOptions = {}) {
      await kill();
      // A deliberate outage for the code under test to live through, not a wait for a state.
      if (restartOptions.downMs)
        await new Promise((done) => setTimeout(done, restartOptions.downMs));
      await start();
    },
    client: () => new Redis({ path: socket }),
  };
}

/** Spawns redis-server and waits until it answers PING, or fails with its output. */
async function launch(args: string[], socket: string): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-KEPT_OUTPUT_CHARS);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited: string | undefined;
  const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
    live.delete(child);
    exited = signal ? `was killed by ${signal}` : `exited with code ${code}`;
  };
  const onError = (error: Error) => {
    exited = `could not start (${error.message})`;
  };
  child.once('exit', onExit);
  // Stays on: an 'error' event without a listener would throw out of the test process.
  child.on('error', onError);
  const failure = (why: string) =>
    new Error(`redis-server ${why} before answering PING on ${socket}; its output:\n${output}`);
  const deadline = Date.now() + READY_WITHIN_MS;
  for (;;) {
    if (exited !== undefined) throw failure(exited);
    if (await answersPing(socket)) return child;
    if (exited !== undefined) throw failure(exited);
    if (Date.now() > deadline) {
      await end(child, 'SIGKILL');
      throw failure(`did not come up within ${READY_WITHIN_MS / 1000} s`);
    }
    await new Promise((done) => setTimeout(done, POLL_MS));
  }
}

/** Signals the process and resolves once it has exited. */
function end(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    child.once('exit', () => done());
    child.kill(signal);
  });
}
