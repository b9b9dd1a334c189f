import { UsageError } from '../shared/errors.js';
import type { ChildPrivate } from '../shared/protocol.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import { registerSecret } from '../shared/redact.js';
import type { AgentOptions, Carried, SpawnProvider } from './engine-options.js';

/** What of its engine decides how a spawn's carried values are checked. */
export interface CarriedRules {
  /** Its agents get tools that run in a worker (tool modules, workspace tools). */
  workerTools: boolean;
  /** Its children run as queue jobs, whose data Redis stores. */
  queued: boolean;
}

/**
 * What a spawn carries beside its spec (`ChildPrivate`): its tools' `context` and the API key
 * of its requests, each its own (`context`, `provider.apiKey`) or inherited from the agent that
 * spawned it. Checked here, before anything runs: in queue mode neither may be given (a job's
 * data is stored in Redis; a key must not be), and with worker tools the context must survive a
 * structured clone. A key is registered for redaction on this thread at once. Undefined when the
 * spawn carries nothing.
 */
export function carriedOf(
  agent: Pick<AgentOptions, 'context' | 'provider'>,
  inherited: Carried | undefined,
  rules: CarriedRules,
  prefix = '',
): Carried | undefined {
  const context = agent.context !== undefined ? agent.context : inherited?.context;
  const apiKey = agent.provider?.apiKey ?? inherited?.apiKey;
  if (context === undefined && apiKey === undefined) return undefined;
  if (rules.queued) {
    if (apiKey !== undefined) {
      throw new UsageError(
        `Expected no \`${prefix}provider.apiKey\` in queue mode, got one: a job's data is stored in Redis, and a key must not be; give each \`cohort worker\` its key in ANTHROPIC_API_KEY instead`,
      );
    }
    throw new UsageError(
      `Expected no \`${prefix}context\` in queue mode, got one: a job's data is stored in Redis, and a context may be large or private`,
    );
  }
  if (context !== undefined && rules.workerTools) checkClonable(`${prefix}context`, context);
  if (apiKey === undefined) return { context };
  registerSecret(apiKey);
  return context === undefined ? { apiKey } : { context, apiKey };
}

/**
 * What of `carried` goes to the child's worker: its key, and its context only when the worker
 * has tools that read it (host tools get it on main, where a context need not be clonable).
 */
export function privateOf(
  carried: Carried | undefined,
  rules: CarriedRules,
): ChildPrivate | undefined {
  if (carried === undefined || rules.workerTools) return carried;
  return carried.apiKey === undefined ? undefined : { apiKey: carried.apiKey };
}

/**
 * Objects already cloned once: a group's context, shared by its thousands of spawns (and
 * inherited by their own agents), is checked once. A value changed after its check to hold
 * something unclonable fails its child instead (the worker cannot be given it).
 */
const clonable = new WeakSet<object>();

/** Throws a UsageError naming `name` when `value` cannot cross to a worker thread. */
export function checkClonable(name: string, value: unknown): void {
  const isObject = (typeof value === 'object' && value !== null) || typeof value === 'function';
  if (isObject && clonable.has(value)) return;
  try {
    structuredClone(value);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UsageError(
      `Expected \`${name}\` to be a value a structured clone can copy (this engine's worker tools get a copy of it), got one that cannot be: ${why.slice(0, 200)}`,
    );
  }
  if (isObject) clonable.add(value);
}

/**
 * Provider settings with a spawn's or a group's own server and model over them (its key is not
 * among them: a `ProviderConfig` crosses threads and is journaled, and never holds one).
 */
export function withServer(
  provider: ProviderConfig,
  own: SpawnProvider | undefined,
): ProviderConfig {
  if (own?.baseURL === undefined && own?.model === undefined) return provider;
  return {
    ...provider,
    ...(own.baseURL === undefined ? {} : { baseURL: own.baseURL }),
    ...(own.model === undefined ? {} : { model: own.model }),
  };
}
