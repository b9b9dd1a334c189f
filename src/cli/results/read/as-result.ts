import type { BudgetKind } from '../../../shared/budget.js';
import type { FailureCode } from '../../../shared/failure.js';
import { type AgentResult, type AgentUsage, emptyUsage } from '../../../shared/result.js';
import type { ResultLine } from './reader.js';

/**
 * A result line as an `AgentResult` the views and the batch's tally can take. The line check
 * vouches only for `taskId` and `outcome`; a line written by hand, or by an older cohort, may
 * lack the rest or hold it in another type. A missing count is 0, and a field of the wrong type
 * is left out, so a stray string is never added to a token count.
 */
export function asResult(line: ResultLine): AgentResult {
  const record = line.record;
  const optional = {
    reason: text(record.reason),
    cancelReason: text(record.cancelReason),
    code: text(record.code) as FailureCode | undefined,
    logDir: text(record.logDir),
    replyFile: text(record.replyFile),
    budgetExceeded: text(record.budgetExceeded) as BudgetKind | undefined,
    host: text(record.host),
    worker: text(record.worker),
  };
  const result: AgentResult = {
    id: text(record.id) ?? '',
    title: text(record.title) ?? line.taskId,
    outcome: line.outcome,
    text: text(record.text) ?? '',
    truncated: record.truncated === true,
    elapsedMs: count(record.elapsedMs) ?? 0,
    generation: count(record.generation) ?? 0,
    usage: usageOf(record.usage),
    ...(Object.hasOwn(record, 'value') ? { value: record.value } : {}),
    ...(record.breakerOpen === true ? { breakerOpen: true } : {}),
  };
  for (const [key, value] of Object.entries(optional)) {
    if (value !== undefined) Object.assign(result, { [key]: value });
  }
  return result;
}

function usageOf(value: unknown): AgentUsage {
  const usage = emptyUsage();
  if (typeof value !== 'object' || value === null) return usage;
  const given = value as Record<string, unknown>;
  for (const key of Object.keys(usage) as (keyof AgentUsage)[]) {
    usage[key] = count(given[key]) ?? 0;
  }
  const cost = count(given.costUsd);
  if (cost !== undefined) usage.costUsd = cost;
  // Negative when the cache's writes outweighed its reads: any finite number.
  const saved = given.cacheSavedUsd;
  if (typeof saved === 'number' && Number.isFinite(saved)) usage.cacheSavedUsd = saved;
  const batchSaved = count(given.batchSavedUsd);
  if (batchSaved !== undefined) usage.batchSavedUsd = batchSaved;
  return usage;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}
