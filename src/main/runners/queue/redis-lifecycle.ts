import type { Redis } from 'ioredis';
import { CohortError } from '../../../shared/errors.js';

/** A BullMQ part: a queue, its events, or a worker. */
interface Closable {
  close(): Promise<void>;
  disconnect(): Promise<void>;
}

/**
 * Closes BullMQ parts gracefully for at most `graceMs`, then cuts every connection. A close waits
 * on Redis; with Redis away (or never reached) it would wait forever and hold the process open.
 */
export async function closeWithin(
  parts: Closable[],
  clients: Redis[],
  graceMs: number,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  // A part still connecting is stopped by its close (not by a disconnect, which waits for the
  // connection first): always asked, awaited only for the grace.
  const closing = Promise.allSettled(parts.map((part) => part.close()));
  if (graceMs > 0) {
    await Promise.race([
      closing,
      new Promise((resolve) => {
        timer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(timer);
  }
  // Not awaited: a part that never connected waits for a connection before it lets go. The
  // clients passed are the parts' own connections; cutting them is what ends the wait.
  void Promise.allSettled(parts.map((part) => part.disconnect()));
  for (const client of clients) client.disconnect();
}

/**
 * Waits for `connecting` (a connection being made) for at most `timeoutMs`; after that, rejects
 * with a plain `queue_unreachable` error naming where Redis was looked for and the last error
 * seen. Redis clients retry forever on their own: this is where someone decides to stop.
 */
export async function reachRedis(
  connecting: Promise<unknown>,
  where: string,
  timeoutMs: number,
  lastError: () => string | undefined,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const why = lastError();
      reject(
        new CohortError(
          'queue_unreachable',
          `Could not reach Redis at ${where} within ${timeoutMs} ms${why ? `: ${why}` : ''}`,
        ),
      );
    }, timeoutMs);
  });
  try {
    await Promise.race([connecting, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Quits a client politely within `graceMs`, else cuts it: a quit waits behind queued commands. */
export async function quitWithin(client: Redis, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    client.quit().catch(() => {}),
    new Promise((resolve) => {
      timer = setTimeout(resolve, graceMs);
    }),
  ]);
  clearTimeout(timer);
  client.disconnect();
}
