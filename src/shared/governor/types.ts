/**
 * The rate-limit governor's contract, as plain data: what crosses between a worker and the main
 * thread's governor is exactly these shapes.
 */

/** Per-minute limits of one account and model: starting values until the headers say. */
export interface GovernorLimits {
  /** Requests per minute. */
  rpm?: number;
  /** Input tokens per minute. */
  itpm?: number;
  /** Output tokens per minute. */
  otpm?: number;
}

/** Declared with its check, as a schema: `GOVERNOR_FIELDS` in options.ts. */
export type { GovernorOptions } from './options.js';

/** What one provider attempt asks the governor for. */
export interface AdmitRequest {
  /** The governor key: base URL, a hash of the API key, and the model. Never the key itself. */
  key: string;
  /** The key as people may see it: model and endpoint. */
  label: string;
  /** The request's input tokens as the client estimates them; the governor scales it. */
  inputTokens: number;
  /** The request's `max_tokens`: the most output it can cost. */
  maxTokens: number;
  /** A retry, or a later step of an agent already running: goes before new agents. */
  priority: boolean;
  /** Set when the request carries prompt-cache breakpoints. */
  cache?: AdmitCache;
}

/** What an admission knows of the prompt cache, so that it charges what the provider will. */
export interface AdmitCache {
  /**
   * Tokens of the request's own earlier steps it should read back from the cache: not charged
   * against the input-token limit, which counts cache writes and uncached input only.
   */
  history: number;
  /**
   * The prefix an agent's first request shares with its siblings: while one sibling writes it,
   * the others wait until its response has started (warm, then release).
   */
  shared?: { key: string; tokens: number; ttlMs: number };
}

/** The governor's answer. `exhausted` means the provider said retrying is pointless. */
export type Admission =
  | { ok: true; permit: number }
  | { ok: false; reason: 'aborted' }
  | { ok: false; reason: 'exhausted'; message: string }
  /** The key's circuit breaker is open: the provider is unreachable or refuses the key. */
  | { ok: false; reason: 'breaker'; code: BreakerCode; message: string };

/** Why a key's circuit breaker opened: connection failures in a row, or a refused API key. */
export type BreakerCode = 'connection' | 'auth';

/** How an admitted attempt ended, as far as the governor cares. */
export type SettleOutcome =
  | 'ok'
  | 'rate_limited'
  | 'overloaded'
  /** A 429 that no retry can change (a spend limit, `x-should-retry: false`). */
  | 'exhausted'
  /** The provider could not be reached (a connection failure): counts toward the breaker. */
  | 'unreachable'
  /** The provider refused the API key (401/403): opens the breaker at once. */
  | 'auth'
  /** Any other failure: the request's cost is unknown and kept as estimated. */
  | 'failed'
  | 'aborted';

/**
 * Whether settling an attempt with `outcome` leaves its key's circuit breaker open whatever came
 * before: a refused API key opens it at once, and keeps an open one open. The attempt's own
 * failure is then one the open breaker stands behind (`ProviderError.breakerOpen`).
 */
export function opensBreaker(outcome: SettleOutcome): boolean {
  return outcome === 'auth';
}

export interface SettleReport {
  outcome: SettleOutcome;
  /** What the response reported; zeros when it reported nothing. */
  usage: {
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens?: number;
    cacheWriteTokens?: number;
  };
  /** `anthropic-ratelimit-*`, `retry-after` and `retry-after-ms`, lower-case, when present. */
  headers?: Record<string, string>;
  /** For `exhausted`, `unreachable` and `auth`: what the provider said, or why none answered. */
  message?: string;
  /** The provider answered with a status (even a failure): it is reachable. */
  answered?: boolean;
}

/** A limit as the governor holds it, and where it came from. */
export interface LimitState {
  limit: number;
  /** Requests or tokens left now, by the governor's own accounting. */
  remaining: number;
  source: 'configured' | 'learned';
}

/** One key's state, for events, progress displays and bench reports. */
export interface GovernorState {
  key: string;
  label: string;
  /** Requests the key may have in flight now (adaptive). */
  limit: number;
  inFlight: number;
  queued: number;
  /** Epoch ms until which every request of the key waits, when paused. */
  pausedUntil?: number;
  /** Set when the provider said retrying is pointless: why. */
  exhausted?: string;
  requests?: LimitState;
  inputTokens?: LimitState;
  outputTokens?: LimitState;
  /** Attempts admitted, and how many came back 429 or 529, since the key was first used. */
  admitted: number;
  rateLimited: number;
  overloaded: number;
  /** Share of the recent attempts the provider refused (429 or 529), 0 to 1. */
  refusalRate: number;
  /** Set while the key's circuit breaker is not closed. */
  breaker?: BreakerState;
}

/** An open (or half-open, probing) circuit breaker: what tripped it and until when. */
export interface BreakerState {
  state: 'open' | 'half-open';
  code: BreakerCode;
  /** One sentence: the endpoint, the cause and what to check. Never the API key. */
  message: string;
  /** Epoch ms at which an open breaker lets one probe through. */
  probeAt?: number;
}

/**
 * What one key learned that a later process may start from: the window it reached and the
 * limits the headers taught. Plain data; the key it belongs to is a hash, never the API key.
 */
export interface KeyMemory {
  /** The window the key reached: a later process starts there instead of the slow start. */
  window: number;
  /** Per-minute limits the provider's headers reported. */
  rpm?: number;
  itpm?: number;
  otpm?: number;
  /** The provider sent no rate-limit headers: it has no limits to respect. */
  unlimited?: boolean;
}

/**
 * Where a governor keeps what its keys learned across processes (`governor.state`, a file under
 * the user's cache folder by default). `recall` is called once when a key is first used;
 * `remember` whenever what the key learned changes, and must be cheap (the store writes later).
 */
export interface GovernorMemory {
  recall(key: string): KeyMemory | undefined;
  remember(key: string, memory: KeyMemory): void;
}

/**
 * Where a provider asks for admission: the governor itself on the main thread, or its proxy in a
 * worker. Admission is awaitable and abortable and never throws.
 */
export interface Gate {
  /** How long one request may keep being answered 429 or 529 before it fails, in ms. */
  readonly patienceMs: number;
  admit(request: AdmitRequest, signal: AbortSignal): Promise<Admission>;
  /** The admitted attempt's response began (status 200): its rate-limit headers, lower-case. */
  opened(permit: number, headers: Record<string, string>): void;
  settle(permit: number, report: SettleReport): void;
}
