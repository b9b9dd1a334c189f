/**
 * The scripted model's spend cap: a limit on the tokens an API key may use over the
 * server's life, refused the way the real API refuses a request past an organization's
 * spend limit. Unlike a rate limit, it never refills, so retrying cannot help.
 */
import type { Refusal } from './requests.js';

/** The SDK's `errorCode` for a 429 past the enforced spend limit (`EnforcedSpendLimitReachedError`). */
export const ENFORCED_SPEND_LIMIT_REACHED = 'enforced_spend_limit_reached';

/** The 429 error codes that name a spend limit: the real API sends no `retry-after` with them. */
export const SPEND_LIMIT_CODES: ReadonlySet<string> = new Set([
  ENFORCED_SPEND_LIMIT_REACHED,
  'contract_spend_limit_reached',
]);

const thousands = new Intl.NumberFormat('en-US');

/**
 * Tokens used per API key, against one cap. The key is only a map key: it never appears
 * in a message. Totals are never forgotten, since a spend limit does not reset by itself;
 * a key costs one map entry.
 */
export class SpendCap {
  readonly #capTokens: number;
  readonly #used = new Map<string, number>();

  /** `capTokens` is at least 1; the server makes no SpendCap for 0 (no cap). */
  constructor(capTokens: number) {
    this.#capTokens = capTokens;
  }

  /**
   * The 429 for a request of `key` once its total has reached the cap, else undefined. It
   * is checked at admission only: a request admitted below the cap finishes normally,
   * even if it carries the total past it.
   */
  refusal(key: string): Refusal | undefined {
    const used = this.#used.get(key) ?? 0;
    if (used < this.#capTokens) return undefined;
    return {
      status: 429,
      type: 'rate_limit_error',
      message:
        `This request would exceed your organization's spend limit: this API key has used ` +
        `${thousands.format(used)} tokens of its limit of ${thousands.format(this.#capTokens)}. ` +
        'Retrying will not help; the spend limit must be raised before requests can succeed again.',
      // No retry-after and no x-should-retry, as the real API's spend-limit 429.
      details: { error_code: ENFORCED_SPEND_LIMIT_REACHED },
    };
  }

  /** Adds the tokens of an answered request: its usage's input plus output tokens. */
  charge(key: string, tokens: number): void {
    this.#used.set(key, (this.#used.get(key) ?? 0) + tokens);
  }
}
