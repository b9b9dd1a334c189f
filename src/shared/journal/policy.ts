import { checkOption, oneOf } from '../option-schema.js';
import type { AgentOutcome, AgentResult } from '../result.js';

/**
 * Which agents' journal records outlive their run: `all` (the default), `failed` (only agents
 * whose outcome is `failed`), or `none`. Every agent is journaled while it runs either way (a
 * child resumed after a worker crash reads its steps back); the policy is applied at close.
 */
export type LogPolicy = 'all' | 'failed' | 'none';

export const LOG_POLICIES: readonly LogPolicy[] = ['all', 'failed', 'none'];

/** The `logs` option: which agents' records the journal keeps at close (default `all`). */
export const LOG_POLICY = oneOf(LOG_POLICIES, `one of ${LOG_POLICIES.join(', ')}`, {
  default: 'all',
  flag: '--logs',
  arg: LOG_POLICIES.join('|'),
});

/** Checks an optional log policy; `name` is how the caller knows the option (`logs`, `--logs`). */
export function checkLogPolicy(name: string, value: unknown): LogPolicy | undefined {
  return checkOption(name, LOG_POLICY, value);
}

/** Whether an agent that ended with `outcome` keeps its records under `policy`. */
export function keepsLog(policy: LogPolicy | undefined, outcome: AgentOutcome): boolean {
  if (policy === 'none') return false;
  if (policy === 'failed') return outcome === 'failed';
  return true;
}

/** A result whose records go at close: no `logDir`, and no `replyFile`, which goes with them. */
export function withoutLog(result: AgentResult): AgentResult {
  const { logDir: _logDir, replyFile: _replyFile, ...rest } = result;
  return rest;
}
