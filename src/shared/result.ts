import type { BudgetKind } from './budget.js';
import type { FailureCode } from './failure.js';
import { redactSecrets } from './redact.js';

/** What an agent's run came to. */
export type AgentOutcome = 'complete' | 'empty' | 'cancelled' | 'capped' | 'failed';

/**
 * Why an agent was cancelled: one of the engine's own reasons (`user`, `ceiling`, `clear`,
 * `shutdown`, `parent`, `timeout`), or any other text a caller gave (`group.cancel('client
 * disconnected')`), at most `MAX_CANCEL_REASON` characters.
 */
export type CancelReason = KnownCancelReason | (string & {});

/** The reasons the engine itself gives. */
export type KnownCancelReason = 'user' | 'ceiling' | 'clear' | 'shutdown' | 'parent' | 'timeout';

export const CANCEL_REASONS: readonly KnownCancelReason[] = [
  'user',
  'ceiling',
  'clear',
  'shutdown',
  'parent',
  'timeout',
];

/** The longest cancel reason kept; a longer one is clipped. */
export const MAX_CANCEL_REASON = 200;

/**
 * `value` as a cancel reason: a non-empty string, trimmed, clipped at `MAX_CANCEL_REASON` and
 * with any key removed; anything else (an Error, undefined) is `user`.
 */
export function toCancelReason(value: unknown): CancelReason {
  if (typeof value !== 'string') return 'user';
  const text = value.trim().slice(0, MAX_CANCEL_REASON);
  return text === '' ? 'user' : redactSecrets(text);
}

/** The cancel reason an aborted signal carries: its reason when that is text, else `user`. */
export function cancelReasonOf(signal: AbortSignal): CancelReason {
  return toCancelReason(signal.reason);
}

export interface AgentUsage {
  /** Input neither read from nor written to the prompt cache (the API's `input_tokens`). */
  inputTokens: number;
  outputTokens: number;
  /** Input read back from the prompt cache (docs/CACHING.md). */
  cacheReadTokens: number;
  /** Input written to the prompt cache. */
  cacheWriteTokens: number;
  /** HTTP requests made to the provider, retries included. */
  providerCalls: number;
  /** Steps taken (provider request + tool batch). */
  steps: number;
  /**
   * Dollars spent, priced by the price table (`prices.ts`, overridable); absent when the model
   * has no price.
   */
  costUsd?: number;
  /**
   * Dollars the prompt cache saved: what the same steps would have cost with every input token
   * at the input price, less `costUsd`. Absent when the model has no price or nothing was read
   * from or written to the cache. Negative when writes (1.25× or 2× the input price) outweighed
   * the reads (0.1×), as for an agent that wrote a prefix and never read it back.
   */
  cacheSavedUsd?: number;
  /**
   * Dollars the batches lane saved: what the steps Message Batches answered would have cost in
   * real time, less what they cost (docs/LANES.md). Absent when no priced step went by a batch.
   */
  batchSavedUsd?: number;
}

/**
 * The one result every spawned agent produces, exactly once.
 * Cancelled, capped and failed results carry no text.
 */
export interface AgentResult<T = unknown> {
  id: string;
  title: string;
  outcome: AgentOutcome;
  /** The rendered reply payload, clipped at the reply cap. Empty unless `complete`. */
  text: string;
  /**
   * Why it did not complete, for people: the cancel reason (`user`, `ceiling`, …), or what
   * failed. Decide on `outcome` and `code`, never on this text.
   */
  reason?: string;
  /**
   * Set exactly when `outcome` is `cancelled`: why, as given to `cancel` (`CancelReason`), so
   * a group's own reason (`'deadline'`, `'client gone'`) reaches every result it cancelled.
   */
  cancelReason?: CancelReason;
  /** Set exactly when `outcome` is `failed`: what failed, as a stable code. */
  code?: FailureCode;
  /**
   * Set on a `failed` result (code `connection` or `auth`) when the rate-limit governor's circuit
   * breaker for its model and key was open as it failed: the breaker refused its request, or its
   * refused API key opened it. Every other agent of that model and key fails at once too until a
   * probe finds the provider back (docs/GOVERNOR.md), so a caller can stop starting them:
   * `cohort batch` does, in queue mode too, where the breaker is in the worker that ran it.
   */
  breakerOpen?: true;
  /**
   * The agent's log folder (docs/LOGS.md). Present only when the folder exists: the engine's
   * `logs` policy (`all`, `failed`, `none`) removes the folders it does not keep.
   */
  logDir?: string;
  /** The full, unclipped reply payload on disk, inside `logDir`; absent when that is gone. */
  replyFile?: string;
  /** Whether `text` was clipped. */
  truncated: boolean;
  /**
   * The reply's `result` as parsed JSON, for an agent given an `outputSchema` (a typed reply): it
   * matched the schema. `text` is the value as the model gave it, rendered. For a Standard Schema
   * (zod, valibot, arktype) it is what the schema's own `validate` made of it: its output, of its
   * output type.
   */
  value?: T;
  /**
   * The budget the agent reached (`budget` option, agent file, task line or engine default): it
   * then had one last turn with only `reply`. Set on a `complete` result (it replied in that turn)
   * and an `empty` one (it did not).
   */
  budgetExceeded?: BudgetKind;
  elapsedMs: number;
  generation: number;
  usage: AgentUsage;
  /**
   * `batches` when its model calls went through Message Batches (the `lane` option,
   * docs/LANES.md): its `usage.costUsd` is at batch prices. Absent: the realtime lane.
   */
  lane?: 'batches';
  /**
   * The machine that ran it, in queue mode (`os.hostname()` of its `cohort worker`); its
   * `logDir` is on that machine.
   */
  host?: string;
  /** The worker process that ran it, in queue mode: `HOST/PID`. */
  worker?: string;
}

export function emptyUsage(): AgentUsage {
  return {
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    providerCalls: 0,
    steps: 0,
  };
}

/** The outcome tag a parent sees when a sync child produced no text (README, "The contracts"). */
export function outcomeTag(result: Pick<AgentResult, 'title' | 'outcome' | 'reason'>): string {
  const title = result.title;
  switch (result.outcome) {
    case 'complete':
    case 'empty':
      return `[agent '${title}' finished with no output]`;
    case 'cancelled':
      return `[agent '${title}' was cancelled: ${result.reason ?? 'user'}]`;
    case 'capped':
      return `[agent '${title}' hit its step cap]`;
    case 'failed':
      return `[agent '${title}' failed: ${result.reason ?? 'unknown'}]`;
  }
}

/** A count per outcome, all at zero. */
export function emptyOutcomeCounts(): Record<AgentOutcome, number> {
  return { complete: 0, empty: 0, cancelled: 0, capped: 0, failed: 0 };
}
