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

/** Dollars for `usage` at `price`. */
export function costUsd(
  usage: { inputTokens: number; outputTokens: number },
  price: ModelPrice,
): number {
  return (usage.inputTokens * price.inputPerMTok + usage.outputTokens * price.outputPerMTok) / 1e6;
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

function checkPrice(name: string, value: unknown): ModelPrice {
  if (!isPlainRecord(value)) {
    throw expected(name, 'an object with `inputPerMTok` and `outputPerMTok`', value);
  }
  const unknown = Object.keys(value).filter(
    (key) => !(PRICE_KEYS as readonly string[]).includes(key),
  );
  if (unknown.length > 0) {
    throw new UsageError(
      `Expected \`${name}\` to have only the keys \`inputPerMTok\`, \`outputPerMTok\`, got ${unknown.map((key) => `\`${key}\``).join(', ')}`,
    );
  }
  for (const key of PRICE_KEYS) {
    const amount = value[key];
    if (typeof amount !== 'number' || !Number.isFinite(amount) || amount < 0) {
      throw expected(
        `${name}.${key}`,
        'a finite number of dollars per million tokens from 0 up',
        amount,
      );
    }
  }
  return {
    inputPerMTok: value.inputPerMTok as number,
    outputPerMTok: value.outputPerMTok as number,
  };
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
