import { DEFAULT_TRANSPORT, type TransportName } from './transport/types.js';

/**
 * A provider's settings as plain, serialisable data. It crosses threads and may be logged, so it
 * never holds the API key: the key is read from the environment where the client is built.
 */
export interface ProviderConfig {
  /** Model name sent with every request. */
  model: string;
  /** Base URL of a Messages-API server; unset means the SDK's default (or ANTHROPIC_BASE_URL). */
  baseURL?: string;
  /** `max_tokens` of every request. */
  maxTokens: number;
  /** Time allowed until response headers arrive, in ms (the SDK's `timeout`). */
  requestTimeoutMs: number;
  /** Time allowed between two stream events before the stream counts as stalled, in ms. */
  idleTimeoutMs: number;
  /** Retries after the first attempt, for retryable failures. */
  maxRetries: number;
  /** First backoff step in ms; doubles each retry, with full jitter. */
  backoffBaseMs: number;
  /** Upper bound of one backoff wait in ms, retry-after included. */
  backoffMaxMs: number;
  /** How requests reach the server: `undici` (default) or `sdk` (transport/types.ts). */
  transport: TransportName;
  /**
   * Connections the `undici` transport keeps open per origin, per thread; unset means no limit
   * (as many as requests in flight). The `sdk` transport ignores it.
   */
  connections?: number;
  /**
   * Extra request headers (for example the scripted model's load controls, or `anthropic-beta`),
   * sent by both transports after their own, so they may override them. Never a secret.
   */
  headers?: Record<string, string>;
}

export const DEFAULT_PROVIDER_CONFIG: ProviderConfig = {
  model: 'claude-sonnet-5',
  maxTokens: 4096,
  requestTimeoutMs: 120_000,
  idleTimeoutMs: 60_000,
  maxRetries: 4,
  backoffBaseMs: 500,
  backoffMaxMs: 30_000,
  transport: DEFAULT_TRANSPORT,
};

/** The environment variable the API key is read from. */
export const API_KEY_ENV = 'ANTHROPIC_API_KEY';

/** The bearer token used when no API key is set, as the SDK uses it. */
export const AUTH_TOKEN_ENV = 'ANTHROPIC_AUTH_TOKEN';

/** Placeholder key used when none is set (the scripted model ignores keys). */
export const PLACEHOLDER_KEY = 'cohort-no-key';
