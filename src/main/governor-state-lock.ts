/**
 * The lock that processes sharing one governor state file take around a save's read, merge and
 * write (`PATH.lock`, made exclusively). Without it, two processes closing at once (a fleet's
 * workers drained together) would each read the file before the other's rename, and the last
 * rename would drop the other's keys.
 */
import { open, rm, stat } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';

/** How long a save waits for another process's lock before it writes without. */
const LOCK_WAIT_MS = 2000;

/** A lock older than this was left by a process that died while it held it. */
const STALE_LOCK_MS = 10_000;

/**
 * Takes the lock of the state file at `file`. A lock older than `STALE_LOCK_MS` is a dead
 * process's and is taken over; after `LOCK_WAIT_MS` the save goes on without it, as a hint may.
 * Resolves with the unlock, or undefined without one; rejects only when the lock file cannot be
 * made for another reason than that it exists (the save then reports the path unusable).
 */
export async function lockStateFile(file: string): Promise<(() => Promise<void>) | undefined> {
  const lock = `${file}.lock`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      await (await open(lock, 'wx', 0o600)).close();
      return () => rm(lock, { force: true }).catch(() => {});
    } catch (error) {
      if ((error as NodeJS.ErrnoException | null)?.code !== 'EEXIST') throw error;
    }
    const since = (await stat(lock).catch(() => undefined))?.mtimeMs;
    if (since !== undefined && Date.now() - since > STALE_LOCK_MS) {
      await rm(lock, { force: true }).catch(() => {});
      continue;
    }
    if (Date.now() >= deadline) return undefined;
    // Jittered, so two waiters do not retry in step; ref'd, so a close waits for it.
    await delay(5 + Math.random() * 20);
  }
}
