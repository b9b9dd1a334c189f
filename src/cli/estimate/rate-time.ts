import { readGovernorMemory } from '../../main/governor-state.js';
import { defaultGovernorStatePath } from '../../main/governor-state-path.js';
import type { GovernorOptions } from '../../shared/governor/options.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { accountKey, governorKey } from '../../shared/provider/provider.js';
import { resolveBaseURL, resolveCredential } from '../../shared/provider/transport/endpoint.js';

/** The per-minute limits the governor would pace one model's requests by. */
export type LimitName = 'rpm' | 'itpm' | 'otpm';

export interface AssumedLimit {
  name: LimitName;
  perMinute: number;
  /** `learned`: the provider's headers, kept in the governor's state file; `configured`: a flag. */
  source: 'learned' | 'configured';
}

/** What one model's requests would wait for: its limits, or why there are none to go by. */
export type ModelLimits =
  | { kind: 'limits'; limits: AssumedLimit[] }
  /** The governor is off (`--governor off`): nothing paces the requests. */
  | { kind: 'off' }
  /** The provider sent no rate-limit headers when this key was last used. */
  | { kind: 'unlimited' }
  /** No flag sets one, and the state file has nothing for this key. */
  | { kind: 'unknown' };

/**
 * The limits the governor would start from for `model`: what the provider's headers taught it
 * for this key (base URL, API key and model), kept in its state file for a day, over the
 * `--rpm`, `--itpm` and `--otpm` flags (a learned limit replaces the configured one, as in a run).
 * The state file is only read (docs/GOVERNOR.md, "Start warm").
 */
export function modelLimits(
  model: string,
  governor: GovernorOptions | undefined,
  config: ProviderConfig,
): ModelLimits {
  if (governor?.enabled === false) return { kind: 'off' };
  const file =
    governor?.state === false ? undefined : (governor?.state ?? defaultGovernorStatePath());
  const key = governorKey(accountKey(resolveBaseURL(config), resolveCredential()), model);
  const learned = file === undefined ? undefined : readGovernorMemory(file, key);
  const limits: AssumedLimit[] = [];
  for (const name of ['rpm', 'itpm', 'otpm'] as const) {
    const fromHeaders = learned?.[name];
    const configured = governor?.[name];
    if (fromHeaders !== undefined) limits.push({ name, perMinute: fromHeaders, source: 'learned' });
    else if (configured !== undefined) {
      limits.push({ name, perMinute: configured, source: 'configured' });
    }
  }
  if (limits.length > 0) return { kind: 'limits', limits };
  return learned?.unlimited ? { kind: 'unlimited' } : { kind: 'unknown' };
}

/** What one model's tasks ask of its limits. */
export interface ModelDemand {
  requests: number;
  /** The input the input-token limit counts: uncached input and cache writes, not reads. */
  chargedInputTokens: number;
  outputTokens: number;
}

/** How long the limits make the requests take at the least, and which limit binds. */
export interface PacedTime {
  seconds: number;
  binding: AssumedLimit;
}

/**
 * The least time the limits allow for `demand`: each limit's share is its demand over its rate,
 * and the largest share binds. The time the responses themselves take (and the slow start of a
 * cold key) comes on top; with limits that do not bind, that is all the time there is.
 */
export function pacedTime(demand: ModelDemand, limits: readonly AssumedLimit[]): PacedTime {
  const need: Record<LimitName, number> = {
    rpm: demand.requests,
    itpm: demand.chargedInputTokens,
    otpm: demand.outputTokens,
  };
  let best: PacedTime | undefined;
  for (const limit of limits) {
    const seconds = (60 * need[limit.name]) / limit.perMinute;
    if (best === undefined || seconds > best.seconds) best = { seconds, binding: limit };
  }
  return best as PacedTime;
}
