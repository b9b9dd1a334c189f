import { defined } from '../option-schema.js';
import { BREAKER_FIRST_HOLD_MS } from './breaker.js';
import { KeyGovernor, type KeySettings } from './key-governor.js';
import { checkGovernorOptions, DEFAULT_PATIENCE_MS } from './options.js';
import { PrefixGate, type PrefixRole } from './prefix-gate.js';
import type { SharedBucketStore } from './shared-leases.js';
import type {
  Admission,
  AdmitRequest,
  Gate,
  GovernorMemory,
  GovernorOptions,
  GovernorState,
  SettleReport,
} from './types.js';

export const DEFAULT_INITIAL_CONCURRENCY = 4;
/** State updates are sent at most this often per key: a busy key changes thousands of times a second. */
const UPDATE_EVERY_MS = 250;

/**
 * The rate-limit governor: every provider attempt of every thread asks it for admission by key
 * (base URL, API key hash, model) and settles with what the response said. It lives on the main
 * thread; workers reach it over their children's ports (see docs/GOVERNOR.md for why).
 */
export class Governor implements Gate {
  readonly options: Readonly<GovernorOptions>;
  readonly #settings: KeySettings;
  readonly #keys = new Map<string, KeyGovernor>();
  #lastPermit = 0;
  /** Which key holds each permit: the governor numbers them, so they are unique across keys. */
  readonly #permits = new Map<number, KeyGovernor>();
  readonly #listeners = new Set<(state: GovernorState) => void>();
  readonly #dirty = new Set<KeyGovernor>();
  #flushTimer: NodeJS.Timeout | undefined;
  readonly #prefixes: PrefixGate;

  /**
   * `store`, in queue mode: the fleet's shared buckets (in Redis), which every admission of this
   * process must also fit, so that all workers together stay within the account's limits.
   * `memory`: what keys learned in earlier processes, and where to keep what they learn now.
   * `breakerHoldMs`: how long an open breaker waits before its first probe (tests shorten it).
   */
  constructor(
    options: GovernorOptions = {},
    {
      store,
      memory,
      breakerHoldMs,
      warmWaitMs,
    }: {
      store?: SharedBucketStore;
      memory?: GovernorMemory;
      breakerHoldMs?: number;
      warmWaitMs?: number;
    } = {},
  ) {
    this.#prefixes = new PrefixGate(warmWaitMs);
    this.options = checkGovernorOptions(options);
    const { rpm, itpm, otpm } = options;
    this.#settings = {
      store,
      memory,
      breakerHoldMs: breakerHoldMs ?? BREAKER_FIRST_HOLD_MS,
      ...defined({ rpm, itpm, otpm }),
      initialConcurrency: options.initialConcurrency ?? DEFAULT_INITIAL_CONCURRENCY,
      maxConcurrency: options.maxConcurrency ?? Number.POSITIVE_INFINITY,
      concurrencyControl: options.concurrencyControl ?? 'aimd',
      patienceMs: options.patienceMs ?? DEFAULT_PATIENCE_MS,
    };
  }

  get patienceMs(): number {
    return this.options.patienceMs ?? DEFAULT_PATIENCE_MS;
  }

  async admit(request: AdmitRequest, signal: AbortSignal): Promise<Admission> {
    const key = this.#key(request);
    const cache = request.cache;
    const shared = cache?.shared;
    // Warm, then release: a sibling of a request writing the same prefix waits for its start.
    const prefix = shared && `${request.key} ${shared.key}`;
    let role: PrefixRole | undefined;
    if (prefix !== undefined) {
      const entered = this.#prefixes.enter(prefix, (shared as { ttlMs: number }).ttlMs, signal);
      role = typeof entered === 'string' ? entered : await entered;
      if (role === 'aborted') return { ok: false, reason: 'aborted' };
    }
    const charged = cache ? cachedRequest(request, role) : request;
    const admission = await new Promise<Admission>((resolve) =>
      key.admit(charged, signal, resolve),
    );
    if (admission.ok) {
      this.#permits.set(admission.permit, key);
      if (prefix !== undefined)
        this.#prefixes.admitted(prefix, role as PrefixRole, admission.permit);
    } else if (prefix !== undefined && role === 'write') {
      this.#prefixes.writerGone(prefix);
    }
    return admission;
  }

  opened(permit: number, headers: Record<string, string>): void {
    this.#permits.get(permit)?.opened(permit, headers);
    this.#prefixes.opened(permit);
  }

  settle(permit: number, report: SettleReport): void {
    const key = this.#permits.get(permit);
    if (!key) return;
    this.#permits.delete(permit);
    key.settle(permit, report);
    this.#prefixes.settled(permit, report);
  }

  /** Prefixes the warm-then-release gate knows, and requests waiting for a sibling's write. */
  get prefixes(): { prefixes: number; waiting: number; waited: number } {
    return { ...this.#prefixes.size, waited: this.#prefixes.waited };
  }

  /** Every key's state now. */
  states(): GovernorState[] {
    return [...this.#keys.values()].map((key) => key.state());
  }

  /** Calls `listener` with a key's state when it changes, at most every 250 ms per key. */
  subscribe(listener: (state: GovernorState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Permits held now, over all keys: zero once every admitted attempt has settled. */
  get held(): number {
    return this.#permits.size;
  }

  #key(request: AdmitRequest): KeyGovernor {
    let key = this.#keys.get(request.key);
    if (!key) {
      const made: KeyGovernor = new KeyGovernor(request.key, request.label, this.#settings, {
        onChange: () => this.#changed(made),
        allocate: () => ++this.#lastPermit,
      });
      key = made;
      this.#keys.set(request.key, key);
    }
    return key;
  }

  #changed(key: KeyGovernor): void {
    if (this.#listeners.size === 0) return;
    this.#dirty.add(key);
    if (this.#flushTimer) return;
    this.#flushTimer = setTimeout(() => this.#flush(), UPDATE_EVERY_MS);
    // Updates are for onlookers: they never keep the process alive.
    this.#flushTimer.unref();
  }

  #flush(): void {
    this.#flushTimer = undefined;
    const keys = [...this.#dirty];
    this.#dirty.clear();
    for (const key of keys) {
      const state = key.state();
      for (const listener of this.#listeners) {
        try {
          listener(state);
        } catch {
          // An onlooker's fault is its own: the governor and the other listeners go on.
        }
      }
    }
  }
}

/**
 * The request as the input-token limit counts it: cache reads are not charged, so the history it
 * should read back, and a shared prefix a sibling has written, come off its estimate. The writer
 * of a shared prefix goes first among new requests: the others wait for it.
 */
function cachedRequest(request: AdmitRequest, role: PrefixRole | undefined): AdmitRequest {
  const cache = request.cache as NonNullable<AdmitRequest['cache']>;
  const read = role === 'read' ? (cache.shared?.tokens ?? 0) : 0;
  const inputTokens = Math.max(1, request.inputTokens - Math.max(cache.history, read));
  return { ...request, inputTokens, priority: request.priority || role === 'write' };
}
