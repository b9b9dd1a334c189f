import { createHash } from 'node:crypto';
import type { ModelPrice } from '../budget.js';
import { oneOf } from '../option-schema.js';

/**
 * How an agent's model calls reach the provider (docs/LANES.md). `realtime`: each step is one
 * streamed Messages request, paced by the governor. `batches`: the steps waiting at once go
 * together into one Message Batch, at half the price, answered when the batch ends.
 */
export type Lane = 'realtime' | 'batches';
export const LANES: readonly Lane[] = ['realtime', 'batches'];

/** A lane option, as the engine, a group and a spawn declare it. */
export const LANE = oneOf(LANES, LANES.join(' or '), {
  flag: '--lane',
  arg: LANES.join('|'),
  help: "how agents' model calls are sent (default realtime; batches gathers\nthe steps waiting at once into Message Batches at half the price)",
});

/** What a Message Batch request costs against the same request sent in real time. */
export const BATCH_PRICE_FACTOR = 0.5;

/**
 * A model's prices in the batches lane: every token price at `BATCH_PRICE_FACTOR`, the cache
 * prices included (an unset cache price is the input price's multiple, so it follows).
 */
export function batchPrice(price: ModelPrice): ModelPrice {
  const half = (value: number | undefined) =>
    value === undefined ? undefined : value * BATCH_PRICE_FACTOR;
  const out: ModelPrice = {
    inputPerMTok: price.inputPerMTok * BATCH_PRICE_FACTOR,
    outputPerMTok: price.outputPerMTok * BATCH_PRICE_FACTOR,
  };
  const read = half(price.cacheReadPerMTok);
  const write = half(price.cacheWritePerMTok);
  const write1h = half(price.cacheWrite1hPerMTok);
  if (read !== undefined) out.cacheReadPerMTok = read;
  if (write !== undefined) out.cacheWritePerMTok = write;
  if (write1h !== undefined) out.cacheWrite1hPerMTok = write1h;
  return out;
}

/** The API's rule for a request's `custom_id` in a batch. */
export const CUSTOM_ID_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The `custom_id` of an agent's step in a batch: the same for the same agent and step, so a
 * rerun finds the request a killed run submitted. An agent id the rule does not allow (or too
 * long to leave room for the step) is hashed; the collector maps the id back, never the text.
 */
export function customIdOf(agentId: string, step: number): string {
  const suffix = `-s${step}`;
  const plain = `${agentId}${suffix}`;
  if (CUSTOM_ID_PATTERN.test(plain)) return plain;
  const hash = createHash('sha256').update(agentId).digest('hex').slice(0, 40);
  return `h${hash}${suffix}`;
}
