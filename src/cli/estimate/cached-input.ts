import { minimumCacheable } from '../../shared/provider/cache-minimums.js';
import type { TaskRequest } from './first-request.js';

/** How one request's input would be billed with the prompt cache. The four add up to its input. */
export interface InputSplit {
  uncached: number;
  /** Read back from an entry a sibling wrote (0.1× the input price). */
  read: number;
  /** Written with the 5-minute lifetime (1.25×). */
  write5m: number;
  /** Written with the one-hour lifetime (2×): a shared prefix under `--cache-ttl 1h`. */
  write1h: number;
}

/**
 * How each task's first request would be billed with the prompt cache on, as cohort places the
 * breakpoints (docs/CACHING.md) and the API bills them, the tasks taken in order:
 * - below the model's minimum (or with `cache: off`) nothing is cached: all of it is input;
 * - else the moving breakpoint at the end of the request writes what is not read: a one-step
 *   task writes its own prompt, which no later step reads back;
 * - a prefix its siblings share (the system prompt and tools, and a `preamble`) is written once,
 *   by the first of them (the governor holds the others until it has been), and read by each
 *   later one. Its size is the client's estimate of it, scaled by how the count of the whole
 *   request compares with the client's estimate of that.
 */
export function splitInput(
  requests: readonly TaskRequest[],
  tokens: readonly number[],
): InputSplit[] {
  const written = new Set<string>();
  return requests.map((request, index) => {
    const total = tokens[index] ?? 0;
    const minimum = minimumCacheable(request.model);
    if (request.cache.mode === 'off' || total < minimum || request.localTokens < minimum) {
      return { uncached: total, read: 0, write5m: 0, write1h: 0 };
    }
    const { shared } = request;
    const prefix =
      shared === undefined
        ? 0
        : Math.min(total, Math.round((shared.tokens * total) / Math.max(1, request.localTokens)));
    if (shared === undefined || prefix < minimum) {
      return { uncached: 0, read: 0, write5m: total, write1h: 0 };
    }
    const rest = total - prefix;
    if (written.has(shared.key)) return { uncached: 0, read: prefix, write5m: rest, write1h: 0 };
    written.add(shared.key);
    const hour = request.cache.ttl === '1h';
    return {
      uncached: 0,
      read: 0,
      write5m: rest + (hour ? 0 : prefix),
      write1h: hour ? prefix : 0,
    };
  });
}
