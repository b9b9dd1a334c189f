/**
 * The scripted model's prompt cache, as the real API's behaves: entries keyed by the hash of
 * a prompt prefix, per API key (the real cache is per organization) and per model, written at
 * `cache_control` breakpoints and read back by later requests that share the prefix.
 *
 * `lookup` decides, before admission and without changing anything, what a request reads and
 * writes and so what its usage says; `commit` carries it out once the response has started,
 * so an entry becomes readable only then, and a request that fails writes nothing.
 */
import { minimumCacheable } from '../shared/provider/cache-minimums.js';
import type { MessagesRequest } from './messages-api.js';
import { CHARS_PER_TOKEN } from './output-shaping.js';
import type { CacheTtl, PromptBlocks } from './prompt-blocks.js';

/** How many block boundaries before a breakpoint the lookup also tries, as the real API does. */
export const LOOKBACK_BLOCKS = 20;

const TTL_MS: Readonly<Record<CacheTtl, number>> = { '5m': 5 * 60_000, '1h': 60 * 60_000 };

/** Entries held at most; past it the least recently written or read one goes. */
const MAX_ENTRIES = 100_000;

/** How often (in clock time) expired entries are swept out, besides being dropped when met. */
const SWEEP_EVERY_MS = 60_000;

/** The input side of a response's usage. The first three add up to the request's input tokens. */
export interface InputUsage {
  /** `input_tokens`: the tokens after the last breakpoint that was written or read. */
  inputTokens: number;
  /** `cache_creation_input_tokens`: the tokens written to the cache. */
  cacheCreationInputTokens: number;
  /** `cache_read_input_tokens`: the tokens read from the cache. */
  cacheReadInputTokens: number;
  /** `cache_creation.ephemeral_5m_input_tokens`: the writes that live 5 minutes. */
  ephemeral5mInputTokens: number;
  /** `cache_creation.ephemeral_1h_input_tokens`: the writes that live an hour. */
  ephemeral1hInputTokens: number;
}

/** The usage of a request that reads and writes nothing: all of it is input. */
export function uncachedUsage(inputTokens: number): InputUsage {
  return {
    inputTokens,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 0,
    ephemeral5mInputTokens: 0,
    ephemeral1hInputTokens: 0,
  };
}

/** What a request reads and writes, decided by `lookup`; `commit` stores it. */
export interface CacheDecision {
  usage: InputUsage;
  /** The entries to write, or refresh, when the response starts. */
  entries: Array<{ key: string; ttlMs: number }>;
}

interface Entry {
  expiresAt: number;
  ttlMs: number;
}

export class PromptCache {
  /** `apiKey \0 model \0 digest` → entry; a Map keeps the order entries were last touched in. */
  readonly #entries = new Map<string, Entry>();
  #sweepAt = 0;

  /**
   * What `request` (of `apiKey`, at `now`, whose input is `totalTokens`) reads and writes,
   * or undefined when it has no breakpoint, or is a `thread` request (whose conversation the
   * server holds, so it has no prompt of its own to cache). Nothing changes until `commit`.
   *
   * Each breakpoint whose prefix reaches the model's minimum is looked up at its own block
   * and at the LOOKBACK_BLOCKS boundaries before it; the longest prefix found over all of
   * them is read. Every such breakpoint after it is written, each with its ttl.
   */
  lookup(
    apiKey: string,
    request: MessagesRequest,
    totalTokens: number,
    now: number,
  ): CacheDecision | undefined {
    const { prompt } = request;
    if (prompt === undefined || request.thread !== undefined) return undefined;
    if (prompt.breakpoints.length === 0) return undefined;
    const minimum = minimumCacheable(request.model);
    const scope = `${apiKey}\u0000${request.model}\u0000`;
    let hit = -1;
    let hitTtlMs = 0;
    const effective = prompt.breakpoints.filter(
      (point) => tokensAt(prompt, point.block) >= minimum,
    );
    for (const { block } of effective) {
      const lowest = Math.max(hit + 1, block - LOOKBACK_BLOCKS);
      for (let boundary = block; boundary >= lowest; boundary--) {
        const entry = this.#live(scope + prompt.digests[boundary], now);
        if (entry !== undefined) {
          hit = boundary;
          hitTtlMs = entry.ttlMs;
          break;
        }
      }
    }
    const usage = uncachedUsage(0);
    const entries: CacheDecision['entries'] = [];
    const read = hit < 0 ? 0 : tokensAt(prompt, hit);
    if (hit >= 0) entries.push({ key: scope + prompt.digests[hit], ttlMs: hitTtlMs });
    let written = read;
    for (const { block, ttl } of effective) {
      const key = scope + prompt.digests[block];
      if (block < hit) {
        // A shorter prefix of what was read: it was used too, so it lives on if it is there.
        const entry = this.#live(key, now);
        if (entry !== undefined) entries.push({ key, ttlMs: entry.ttlMs });
        continue;
      }
      if (block === hit) continue;
      const tokens = tokensAt(prompt, block);
      if (ttl === '1h') usage.ephemeral1hInputTokens += tokens - written;
      else usage.ephemeral5mInputTokens += tokens - written;
      written = tokens;
      entries.push({ key, ttlMs: TTL_MS[ttl] });
    }
    usage.cacheReadInputTokens = read;
    usage.cacheCreationInputTokens = written - read;
    usage.inputTokens = totalTokens - written;
    return { usage, entries };
  }

  /**
   * Stores what `lookup` decided, when the response starts: each entry written or refreshed
   * lives its ttl from `now` (an entry that is already there keeps the longer of the two).
   */
  commit(decision: CacheDecision, now: number): void {
    const entries = this.#entries;
    for (const { key, ttlMs } of decision.entries) {
      const held = entries.get(key);
      let entry: Entry = { expiresAt: now + ttlMs, ttlMs };
      if (held !== undefined) {
        entries.delete(key); // re-inserted below, as the most recently used
        if (held.expiresAt > now) {
          entry = {
            expiresAt: Math.max(held.expiresAt, entry.expiresAt),
            ttlMs: Math.max(held.ttlMs, ttlMs),
          };
        }
      }
      entries.set(key, entry);
    }
    while (entries.size > MAX_ENTRIES) {
      const oldest = entries.keys().next();
      if (oldest.done === true) break;
      entries.delete(oldest.value);
    }
    if (now >= this.#sweepAt) this.#sweep(now);
  }

  /** The entry under `key` if it has not expired; an expired one is dropped. */
  #live(key: string, now: number): Entry | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined || entry.expiresAt > now) return entry;
    this.#entries.delete(key);
    return undefined;
  }

  #sweep(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt <= now) this.#entries.delete(key);
    }
    this.#sweepAt = now + SWEEP_EVERY_MS;
  }
}

/**
 * The input tokens of the prefix that ends with `block`: its characters / 4, rounded up, plus
 * its media tokens, as the request's input tokens are counted, so the prefix of the last block
 * is never more than the whole.
 */
function tokensAt(prompt: PromptBlocks, block: number): number {
  return Math.ceil((prompt.endChars[block] ?? 0) / CHARS_PER_TOKEN) + (prompt.endMedia[block] ?? 0);
}
