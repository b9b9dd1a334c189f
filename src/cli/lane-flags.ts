import { ENGINE_FIELDS, type EngineOptions } from '../main/engine-options.js';
import { parseDuration } from '../shared/duration.js';
import { UsageError } from '../shared/errors.js';
import { deadlineMs } from '../shared/lane/lane.js';
import type { CliFlag, ParsedValues } from './flags.js';
import { choiceFlag, positiveDurationFlag } from './flags.js';

/** `cohort batch`'s lane flags (docs/LANES.md), in the order its help lists them. */
export const LANE_FLAGS: readonly CliFlag[] = [
  ENGINE_FIELDS.lane,
  ENGINE_FIELDS.batchWindowMs,
  ENGINE_FIELDS.batchPollMs,
  ENGINE_FIELDS.batchTurnaroundMs,
  {
    flag: '--deadline',
    arg: 'TIME',
    help: "the auto lane: every task's deadline unless its line has one: an ISO\ndate-time (2026-12-03T06:00:00Z), epoch ms, or a duration from now (8h)",
  },
];

/**
 * `--deadline` as epoch ms: an ISO 8601 date-time, epoch milliseconds, or a duration counted
 * from now. One already past exits 2: no lane can meet it.
 */
export function deadlineFlag(values: ParsedValues, now = Date.now()): number | undefined {
  const raw = values.deadline;
  if (raw === undefined) return undefined;
  const text = String(raw).trim();
  const ms = /^\d+$/.test(text)
    ? Number(text)
    : (deadlineMs(text) ??
      (/^\d/.test(text) ? now + parseDuration(text, '--deadline') : undefined));
  if (ms === undefined || ms <= now) {
    throw new UsageError(
      `Expected \`--deadline\` to be a time in the future (an ISO 8601 date-time like 2026-12-03T06:00:00Z, epoch ms, or a duration from now like 8h), got \`${text}\``,
    );
  }
  return ms;
}

/**
 * The engine options of `--lane`, `--batch-window` and `--batch-poll`. A window or a poll of 0
 * is refused: a batch of one step each, or a poll loop that never rests, is never what is meant.
 */
export function laneOptions(
  values: ParsedValues,
): Pick<EngineOptions, 'lane' | 'batchWindowMs' | 'batchPollMs' | 'batchTurnaroundMs'> {
  const lane = choiceFlag(values, ENGINE_FIELDS.lane);
  const batchWindowMs = positiveDurationFlag(values, ENGINE_FIELDS.batchWindowMs);
  const batchPollMs = positiveDurationFlag(values, ENGINE_FIELDS.batchPollMs);
  const batchTurnaroundMs = positiveDurationFlag(values, ENGINE_FIELDS.batchTurnaroundMs);
  return {
    ...(lane === undefined ? {} : { lane }),
    ...(batchTurnaroundMs === undefined ? {} : { batchTurnaroundMs }),
    ...(batchWindowMs === undefined ? {} : { batchWindowMs }),
    ...(batchPollMs === undefined ? {} : { batchPollMs }),
  };
}
