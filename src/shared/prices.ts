/**
 * What a model's tokens cost, so a `usd` budget can be held. Prices are keyed by model-name
 * prefix: a dated release (`claude-sonnet-4-5-20250929`) matches its family's entry without the
 * table having to list every release.
 */
import type { ModelPrice, PriceTable } from './budget.js';
import { expected, UsageError } from './errors.js';

/**
 * List prices per model family, dollars per million tokens. These are the public list prices
 * when this table was written; they change, and negotiated prices differ, so users override
 * entries with `priceTable` (library option or JSON file) rather than trust them blindly.
 */
export const DEFAULT_PRICES: Readonly<Record<string, Readonly<ModelPrice>>> = Object.freeze({
  'claude-opus-4-5': price(5, 25),
  'claude-opus-4-1': price(15, 75),
  'claude-opus-4': price(15, 75),
  // Opus lines after 4.5 are priced like it.
  'claude-opus': price(5, 25),
  'claude-sonnet': price(3, 15),
  'claude-haiku-4-5': price(1, 5),
  'claude-3-5-haiku': price(0.8, 4),
  'claude-3-haiku': price(0.25, 1.25),
  'claude-haiku': price(1, 5),
  // The built-in scripted model, priced like the Sonnet line so costs and `usd` budgets can be
  // tried offline on the same numbers a real run would show.
  'cohort-scripted': price(3, 15),
});

function price(inputPerMTok: number, outputPerMTok: number): Readonly<ModelPrice> {
  return Object.freeze({ inputPerMTok, outputPerMTok });
}

/**
 * The price of `model`: the entry whose key is the longest prefix of `model`; undefined if none.
 * Longest wins so `claude-opus-4-1-…` takes its own entry over the broader `claude-opus-4`.
 */
export function priceOf(
  model: string,
  table: Readonly<PriceTable> = DEFAULT_PRICES,
): ModelPrice | undefined {
  let best: string | undefined;
  // Own keys only: a model named `constructor` must not find Object.prototype's.
  for (const key of Object.keys(table)) {
    if (model.startsWith(key) && (best === undefined || key.length > best.length)) best = key;
  }
  return best === undefined ? undefined : table[best];
}

/** The prompt cache's prices as multiples of the input price, when an entry does not set them. */
export const CACHE_READ_FACTOR = 0.1;
export const CACHE_WRITE_FACTOR = 1.25;
export const CACHE_WRITE_1H_FACTOR = 2;

/** What `costUsd` prices: a response's usage, the cache fields optional. */
export interface PricedUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  /** Of `cacheWriteTokens`, those written with the one-hour lifetime. */
  cacheWrite1hTokens?: number;
}

/**
 * Dollars for `usage` at `price`: uncached input and output at their prices, cache reads and
 * writes at the entry's cache prices, else at the documented multiples of the input price.
 */
export function costUsd(usage: PricedUsage, price: ModelPrice): number {
  const input = price.inputPerMTok;
  const read = usage.cacheReadTokens ?? 0;
  const hour = usage.cacheWrite1hTokens ?? 0;
  const minutes = Math.max(0, (usage.cacheWriteTokens ?? 0) - hour);
  return (
    (usage.inputTokens * input +
      usage.outputTokens * price.outputPerMTok +
      read * (price.cacheReadPerMTok ?? input * CACHE_READ_FACTOR) +
      minutes * (price.cacheWritePerMTok ?? input * CACHE_WRITE_FACTOR) +
      hour * (price.cacheWrite1hPerMTok ?? input * CACHE_WRITE_1H_FACTOR)) /
    1e6
  );
}

/** What `usage` would have cost with no prompt cache: every input token at the input price. */
export function uncachedCostUsd(usage: PricedUsage, price: ModelPrice): number {
  const input = usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
  return costUsd({ inputTokens: input, outputTokens: usage.outputTokens }, price);
}

/**
 * Merges overrides over DEFAULT_PRICES (an override replaces that key only), so a user who
 * prices one model keeps the defaults for the rest.
 */
export function priceTable(overrides?: Readonly<PriceTable>): PriceTable {
  // Spread defines own properties, so a `__proto__` key from JSON stays a plain entry.
  return { ...DEFAULT_PRICES, ...overrides };
}

/**
 * Checks a price table given by a user (library option or JSON file): an object of model-name
 * prefixes to `{ inputPerMTok, outputPerMTok }`, each a finite number from 0 up. Returns a copy,
 * so later changes to the caller's object cannot reach a running budget. Throws UsageError.
 */
export function checkPriceTable(name: string, value: unknown): PriceTable | undefined {
  if (value === undefined) return undefined;
  if (!isPlainRecord(value)) throw expected(name, 'an object of model prefixes to prices', value);
  const entries: [string, ModelPrice][] = [];
  for (const [key, entry] of Object.entries(value)) {
    if (key === '') {
      throw new UsageError(
        `Expected \`${name}\` to have non-empty model prefixes as keys, got an empty key`,
      );
    }
    entries.push([key, checkPrice(`${name}.${key}`, entry)]);
  }
  return Object.fromEntries(entries);
}

const PRICE_KEYS = ['inputPerMTok', 'outputPerMTok'] as const;
const CACHE_PRICE_KEYS = ['cacheReadPerMTok', 'cacheWritePerMTok', 'cacheWrite1hPerMTok'] as const;
const ALL_PRICE_KEYS: readonly string[] = [...PRICE_KEYS, ...CACHE_PRICE_KEYS];

function checkPrice(name: string, value: unknown): ModelPrice {
  if (!isPlainRecord(value)) {
    throw expected(name, 'an object with `inputPerMTok` and `outputPerMTok`', value);
  }
  const unknown = Object.keys(value).filter((key) => !ALL_PRICE_KEYS.includes(key));
  if (unknown.length > 0) {
    throw new UsageError(
      `Expected \`${name}\` to have only the keys ${ALL_PRICE_KEYS.map((key) => `\`${key}\``).join(', ')}, got ${unknown.map((key) => `\`${key}\``).join(', ')}`,
    );
  }
  const amountOf = (key: string): number | undefined => {
    const amount = value[key];
    if (amount === undefined && !(PRICE_KEYS as readonly string[]).includes(key)) return undefined;
    if (typeof amount !== 'number' || !Number.isFinite(amount) || amount < 0) {
      throw expected(
        `${name}.${key}`,
        'a finite number of dollars per million tokens from 0 up',
        amount,
      );
    }
    return amount;
  };
  const price: ModelPrice = {
    inputPerMTok: amountOf('inputPerMTok') as number,
    outputPerMTok: amountOf('outputPerMTok') as number,
  };
  for (const key of CACHE_PRICE_KEYS) {
    const amount = amountOf(key);
    if (amount !== undefined) price[key] = amount;
  }
  return price;
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
