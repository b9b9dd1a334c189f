import { createHash } from 'node:crypto';
import type { ModelPrice } from '../budget.js';
import { custom, oneOf } from '../option-schema.js';

/**
 * How an agent's model calls reach the provider (docs/LANES.md). `realtime`: each step is one
 * streamed Messages request, paced by the governor. `batches`: the steps waiting at once go
 * together into one Message Batch, at half the price, answered when the batch ends. `auto`: an
 * agent with a `deadline` is in the batches lane while the batch turnaround leaves room before
 * it, and in real time when it does not; without a deadline, `auto` is `batches`.
 */
export type Lane = 'realtime' | 'batches' | 'auto';
export const LANES: readonly Lane[] = ['realtime', 'batches', 'auto'];

/** A lane option, as the engine, a group and a spawn declare it. */
export const LANE = oneOf(LANES, 'realtime, batches or auto', {
  flag: '--lane',
  arg: LANES.join('|'),
  help: "how agents' model calls are sent (default realtime; batches gathers\nthe steps waiting at once into Message Batches at half the price; auto\nis batches while the batch turnaround fits before a task's deadline)",
});

/**
 * What the `auto` lane assumes a batch takes, from its create to its end, before it has seen one
 * end (default): the hour most batches end within. After that it goes by what it saw.
 */
export const DEFAULT_BATCH_TURNAROUND_MS = 60 * 60 * 1000;

/**
 * A deadline as epoch ms: an ISO 8601 date-time string (`2026-12-03T06:00:00Z`), epoch
 * milliseconds, or a `Date`; `undefined` for anything else.
 */
export function deadlineMs(value: unknown): number | undefined {
  const ms =
    value instanceof Date
      ? value.getTime()
      : typeof value === 'number'
        ? value
        : typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(value)
          ? Date.parse(value)
          : Number.NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * A spawn's or a task's `deadline`: when its work must be done, as an absolute time. A deadline
 * already past is refused: no lane can meet it.
 */
export const DEADLINE = custom<string | number | Date>(
  'a time in the future (an ISO 8601 date-time like 2026-12-03T06:00:00Z, or epoch ms)',
  (value) => {
    const ms = deadlineMs(value);
    return ms !== undefined && ms > Date.now();
  },
);

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
