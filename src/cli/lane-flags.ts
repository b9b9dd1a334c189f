import { ENGINE_FIELDS, type EngineOptions } from '../main/engine-options.js';
import { UsageError } from '../shared/errors.js';
import type { CliFlag, ParsedValues } from './flags.js';
import { choiceFlag, durationFlag } from './flags.js';

/** `cohort batch`'s lane flags (docs/LANES.md), in the order its help lists them. */
export const LANE_FLAGS: readonly CliFlag[] = [
  ENGINE_FIELDS.lane,
  ENGINE_FIELDS.batchWindowMs,
  ENGINE_FIELDS.batchPollMs,
];

/**
 * The engine options of `--lane`, `--batch-window` and `--batch-poll`. A window or a poll of 0
 * is refused: a batch of one step each, or a poll loop that never rests, is never what is meant.
 */
export function laneOptions(
  values: ParsedValues,
): Pick<EngineOptions, 'lane' | 'batchWindowMs' | 'batchPollMs'> {
  const lane = choiceFlag(values, ENGINE_FIELDS.lane);
  const batchWindowMs = positiveDuration(values, ENGINE_FIELDS.batchWindowMs);
  const batchPollMs = positiveDuration(values, ENGINE_FIELDS.batchPollMs);
  return {
    ...(lane === undefined ? {} : { lane }),
    ...(batchWindowMs === undefined ? {} : { batchWindowMs }),
    ...(batchPollMs === undefined ? {} : { batchPollMs }),
  };
}

function positiveDuration(values: ParsedValues, field: CliFlag): number | undefined {
  const ms = durationFlag(values, field);
  const flag = field.flag!;
  if (ms === 0) {
    throw new UsageError(
      `Expected \`${flag}\` to be a duration above 0 (like 500ms, 30s, 5m), got \`${String(values[flag.slice(2)])}\``,
    );
  }
  return ms;
}
