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
}

/** The governor's answer. `exhausted` means the provider said retrying is pointless. */
export type Admission =
  | { ok: true; permit: number }
  | { ok: false; reason: 'aborted' }
  | { ok: false; reason: 'exhausted'; message: string };

/** How an admitted attempt ended, as far as the governor cares. */
export type SettleOutcome =
  | 'ok'
  | 'rate_limited'
  | 'overloaded'
  /** A 429 that no retry can change (a spend limit, `x-should-retry: false`). */
  | 'exhausted'
  /** Any other failure: the request's cost is unknown and kept as estimated. */
  | 'failed'
  | 'aborted';

export interface SettleReport {
  outcome: SettleOutcome;
  /** What the response reported; zeros when it reported nothing. */
  usage: { inputTokens: number; outputTokens: number };
  /** `anthropic-ratelimit-*`, `retry-after` and `retry-after-ms`, lower-case, when present. */
  headers?: Record<string, string>;
  /** For `exhausted`: what the provider said. */
  message?: string;
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
}

/**
 * Where a provider asks for admission: the governor itself on the main thread, or its proxy in a
 * worker. Admission is awaitable and abortable and never throws.
 */
export interface Gate {
  /** How long one request may keep being answered 429 or 529 before it fails, in ms. */
  readonly patienceMs: number;
  admit(request: AdmitRequest, signal: AbortSignal): Promise<Admission>;
  settle(permit: number, report: SettleReport): void;
}
