import type { SettleReport } from './types.js';

/** How long a sibling waits for another to warm their shared prefix before it goes anyway. */
export const WARM_WAIT_MS = 30_000;
/** Prefixes remembered before expired ones are swept. */
const SWEEP_ABOVE = 1024;

/**
 * What `enter` says: `write` (this request writes the prefix: no one has, or the writer gave
 * up), `read` (it is written, or being written and now readable), `late` (the writer took longer
 * than the bounded wait: go, and maybe write it too) or `aborted`.
 */
export type PrefixRole = 'write' | 'read' | 'late' | 'aborted';

interface Prefix {
  /** `writing` while one request's response has not started yet; `uncached` when the provider ignored the breakpoint. */
  state: 'cold' | 'writing' | 'warm' | 'uncached';
  /** Epoch ms until which a warm entry is readable: its lifetime from its last use. */
  warmUntil: number;
  ttlMs: number;
  waiters: Set<Waiter>;
}

interface Waiter {
  settle(role: PrefixRole): void;
}

interface Held {
  prefix: Prefix;
  writer: boolean;
}

/**
 * Warm, then release: when siblings share a cacheable prefix that is not cached yet, the first
 * request writes it and the others wait until its response has started (the entry is readable
 * from then), so one write serves them all instead of each paying its own. It sits in front of
 * the governor's queue on the main thread: the waiting requests hold no slot and no tokens.
 * Every wait is bounded (`warmWaitMs`) and abortable; a writer that fails or is aborted before
 * its response started hands the write to the next waiter.
 */
export class PrefixGate {
  readonly #prefixes = new Map<string, Prefix>();
  /** Admitted requests that carry a shared prefix, by governor permit. */
  readonly #held = new Map<number, Held>();
  readonly #warmWaitMs: number;
  /** Requests that waited for a sibling's write, and writes handed on: for state and tests. */
  waited = 0;

  constructor(warmWaitMs = WARM_WAIT_MS) {
    this.#warmWaitMs = warmWaitMs;
  }

  /** Asks to go with the shared prefix `key`, whose cache entry lives `ttlMs` after each use. */
  enter(key: string, ttlMs: number, signal: AbortSignal): Promise<PrefixRole> | PrefixRole {
    if (signal.aborted) return 'aborted';
    const now = Date.now();
    let prefix = this.#prefixes.get(key);
    if (prefix === undefined) {
      if (this.#prefixes.size >= SWEEP_ABOVE) this.#sweep(now);
      prefix = { state: 'cold', warmUntil: 0, ttlMs, waiters: new Set() };
      this.#prefixes.set(key, prefix);
    }
    prefix.ttlMs = Math.max(prefix.ttlMs, ttlMs);
    if (prefix.state === 'uncached') return 'read';
    if (prefix.state === 'warm' && now < prefix.warmUntil) return 'read';
    if (prefix.state !== 'writing') {
      prefix.state = 'writing';
      return 'write';
    }
    const waiting = prefix;
    this.waited++;
    return new Promise<PrefixRole>((resolve) => {
      const waiter: Waiter = {
        settle: (role) => {
          waiting.waiters.delete(waiter);
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve(role);
        },
      };
      const onAbort = () => waiter.settle('aborted');
      const timer = setTimeout(() => waiter.settle('late'), this.#warmWaitMs);
      timer.unref();
      signal.addEventListener('abort', onAbort, { once: true });
      waiting.waiters.add(waiter);
    });
  }

  /** The request that entered as `role` was admitted with `permit`. */
  admitted(key: string, role: PrefixRole, permit: number): void {
    const prefix = this.#prefixes.get(key);
    if (prefix) this.#held.set(permit, { prefix, writer: role === 'write' });
  }

  /** The writer of `key` was not admitted (aborted, refused): the next waiter writes. */
  writerGone(key: string): void {
    const prefix = this.#prefixes.get(key);
    if (prefix?.state === 'writing') this.#handOn(prefix);
  }

  /** The response of `permit` started: its prefix is readable; the waiters go. */
  opened(permit: number): void {
    const held = this.#held.get(permit);
    if (!held) return;
    const { prefix } = held;
    if (prefix.state === 'uncached') return;
    // A read refreshes the entry's lifetime as a write starts it.
    prefix.state = 'warm';
    prefix.warmUntil = Date.now() + prefix.ttlMs;
    this.#release(prefix, 'read');
  }

  /** The attempt of `permit` ended. */
  settled(permit: number, report: SettleReport): void {
    const held = this.#held.get(permit);
    if (!held) return;
    this.#held.delete(permit);
    const { prefix } = held;
    const { usage } = report;
    if (
      report.outcome === 'ok' &&
      !(usage.cacheReadTokens ?? 0) &&
      !(usage.cacheWriteTokens ?? 0) &&
      held.writer
    ) {
      // The provider neither read nor wrote: it ignores breakpoints (a proxy, an older server).
      // Holding siblings back for it would only slow them down.
      prefix.state = 'uncached';
      this.#release(prefix, 'read');
      return;
    }
    if (held.writer && prefix.state === 'writing') this.#handOn(prefix);
  }

  /** Prefixes known now, and requests waiting on one. */
  get size(): { prefixes: number; waiting: number } {
    let waiting = 0;
    for (const prefix of this.#prefixes.values()) waiting += prefix.waiters.size;
    return { prefixes: this.#prefixes.size, waiting };
  }

  #handOn(prefix: Prefix): void {
    const next = prefix.waiters.values().next();
    if (next.done) {
      prefix.state = 'cold';
      return;
    }
    // Still `writing`: the promoted waiter writes.
    next.value.settle('write');
  }

  #release(prefix: Prefix, role: PrefixRole): void {
    for (const waiter of [...prefix.waiters]) waiter.settle(role);
  }

  #sweep(now: number): void {
    for (const [key, prefix] of this.#prefixes) {
      const idle = prefix.state === 'cold' || (prefix.state === 'warm' && now >= prefix.warmUntil);
      if (idle && prefix.waiters.size === 0) this.#prefixes.delete(key);
    }
  }
}
