import { ENGINE_FIELDS, type EngineOptions } from '../main/engine-options.js';
import type { CliFlag, ParsedValues } from './flags.js';
import { choiceFlag, positiveDurationFlag } from './flags.js';

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
  const batchWindowMs = positiveDurationFlag(values, ENGINE_FIELDS.batchWindowMs);
  const batchPollMs = positiveDurationFlag(values, ENGINE_FIELDS.batchPollMs);
  return {
    ...(lane === undefined ? {} : { lane }),
    ...(batchWindowMs === undefined ? {} : { batchWindowMs }),
    ...(batchPollMs === undefined ? {} : { batchPollMs }),
  };
}
