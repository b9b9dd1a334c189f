import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { parseNumber, ScriptedModelOptionError } from './load-model.js';

/** How many distinct request bodies the server remembers for clients that number nothing. */
const REMEMBERED_BODIES = 10_000;

/** The attempt number of a request, and how to say it succeeded (see `settle`). */
export interface Attempt {
  attempt: number;
  /** Set when the number came from counting: the digest to forget on success. */
  digest?: string;
}

/**
 * Numbers the attempts of one request, for `faultAttempts` and the random roll. A client
 * says which attempt it is making with `x-cohort-attempt` (cohort's own provider) or
 * `x-stainless-retry-count` (the official SDKs, and clients built on them). For a client
 * that sends neither, a retry is the same body sent again: the server counts the failed
 * tries of each body, per API key, and forgets them once one succeeds, so the next run
 * of the same conversation starts again at attempt 0.
 */
export class AttemptCounter {
  /** Digest of (key, body) → failed tries so far; a Map keeps insertion order, so the oldest goes first. */
  readonly #seen = new Map<string, number>();

  /** The attempt number of a request; throws ScriptedModelOptionError for a bad header. */
  attempt(headers: IncomingHttpHeaders, apiKey: string, body: string): Attempt {
    const stated =
      headerAttempt(headers, 'x-cohort-attempt') ??
      headerAttempt(headers, 'x-stainless-retry-count');
    if (stated !== undefined) return { attempt: stated };
    return this.counted(apiKey, body);
  }

  /**
   * The attempt number of a request by counting alone: how many failed tries of the same
   * body from the same key came before. A request of a Message Batch is numbered so, since
   * the headers of the batch's create say nothing of its requests.
   */
  counted(apiKey: string, body: string): Attempt {
    const digest = createHash('sha256')
      .update(apiKey)
      .update('\u0000')
      .update(body)
      .digest('base64');
    const seen = this.#seen.get(digest) ?? 0;
    this.#seen.delete(digest);
    this.#seen.set(digest, seen + 1);
    if (this.#seen.size > REMEMBERED_BODIES) {
      const oldest = this.#seen.keys().next();
      if (oldest.done !== true) this.#seen.delete(oldest.value);
    }
    return { attempt: seen, digest };
  }

  /** The request of `attempt` got a whole 200: its next sending is a new conversation. */
  settle(attempt: Attempt): void {
    if (attempt.digest !== undefined) this.#seen.delete(attempt.digest);
  }
}

function headerAttempt(headers: IncomingHttpHeaders, name: string): number | undefined {
  const raw = headers[name];
  const text = Array.isArray(raw) ? raw[0] : raw;
  if (text === undefined) return undefined;
  const value = parseNumber(`header \`${name}\``, text, 'integer');
  if (value < 0) {
    throw new ScriptedModelOptionError(
      `Expected header \`${name}\` to be a non-negative integer, got \`${text}\``,
    );
  }
  return value;
}
