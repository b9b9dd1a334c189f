import { UsageError } from '../../../shared/errors.js';
import type { AgentUsage } from '../../../shared/result.js';
import { safeLabel } from '../../output.js';
import type { BatchResultLine } from '../file.js';

/**
 * The fields `cohort results … export --fields` may name: a result line's own (the AgentResult
 * plus `taskId` and `taskHash`), `usage.X` for a usage count, and anything under `value` (a typed reply's
 * shape is the task's schema, not ours). Declared against the line's type, so a field added to
 * `BatchResultLine` fails to compile here until export knows it too.
 */
const LINE_FIELDS = {
  taskId: true,
  taskHash: true,
  settledAt: true,
  id: true,
  title: true,
  outcome: true,
  text: true,
  reason: true,
  cancelReason: true,
  code: true,
  breakerOpen: true,
  logDir: true,
  replyFile: true,
  truncated: true,
  value: true,
  budgetExceeded: true,
  elapsedMs: true,
  generation: true,
  usage: true,
  host: true,
  worker: true,
  lane: true,
} as const satisfies Record<keyof BatchResultLine, true>;

const USAGE_FIELDS = {
  inputTokens: true,
  outputTokens: true,
  cacheReadTokens: true,
  cacheWriteTokens: true,
  providerCalls: true,
  steps: true,
  costUsd: true,
  cacheSavedUsd: true,
  batchSavedUsd: true,
} as const satisfies Record<keyof AgentUsage, true>;

/** What export writes without --fields: who, how it ended, what it said, what it cost. */
export const DEFAULT_FIELDS =
  'taskId,outcome,code,reason,text,value,usage.inputTokens,usage.outputTokens,usage.costUsd';

/** A chosen field: its name as given (the column's header) and its path into a line. */
export interface FieldPath {
  name: string;
  path: readonly string[];
}

/** `--fields a,b.c`: each name checked against what a result line holds. */
export function parseFields(list: string): FieldPath[] {
  return list.split(',').map((raw) => {
    const name = raw.trim();
    const path = name.split('.');
    const [head, ...rest] = path;
    const known =
      head !== undefined &&
      Object.hasOwn(LINE_FIELDS, head) &&
      (rest.length === 0 ||
        head === 'value' ||
        (head === 'usage' && rest.length === 1 && Object.hasOwn(USAGE_FIELDS, rest[0]!)));
    if (!known || rest.some((part) => part === '')) {
      throw new UsageError(
        `Expected --fields to be names of a result line's fields, comma-separated (${Object.keys(LINE_FIELDS).join(', ')}; usage.X for X in ${Object.keys(USAGE_FIELDS).join(', ')}; value.X for a typed reply's X), got \`${safeLabel(name)}\`${name === '' ? ' (an empty name)' : ''}`,
      );
    }
    return { name, path };
  });
}

/**
 * The value at `path` in `record`, or undefined where the line has none. Own properties only, so
 * a path such as `value.constructor` finds nothing rather than a prototype's function; an array
 * is indexed by number (`value.items.0`).
 */
export function valueAt(record: Record<string, unknown>, path: readonly string[]): unknown {
  let current: unknown = record;
  for (const key of path) {
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, key)) {
      return undefined;
    }
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}
