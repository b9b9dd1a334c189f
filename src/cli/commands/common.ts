import { readFileSync } from 'node:fs';
import { budgetFromData } from '../../main/agents/load.js';
import type { EngineOptions } from '../../main/engine.js';
import { ENGINE_FIELDS, PROVIDER_FIELDS } from '../../main/engine-options.js';
import type { QueueOptions } from '../../main/runners/queue/options.js';
import { checkLogPolicy } from '../../shared/agent-log.js';
import type { Budget, PriceTable } from '../../shared/budget.js';
import { parseDuration } from '../../shared/duration.js';
import { UsageError } from '../../shared/errors.js';
import type { GovernorOptions } from '../../shared/governor/types.js';
import { checkPriceTable } from '../../shared/prices.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import { TRANSPORT_NAMES, type TransportName } from '../../shared/provider/transport/types.js';
import { durationFlag, intFlag, type ParsedValues, stringFlag, wholeNumberFlag } from '../flags.js';

/** Engine options from the common flags. */
export function engineOptionsFrom(
  values: ParsedValues,
  provider: Partial<ProviderConfig>,
): EngineOptions {
  const threads = wholeNumberFlag(values, ENGINE_FIELDS.threads);
  const agentsPerThread = wholeNumberFlag(values, ENGINE_FIELDS.agentsPerThread);
  const maxDepth = wholeNumberFlag(values, ENGINE_FIELDS.maxDepth);
  const ceilingMs = durationFlag(values, 'ceiling');
  const logDir = stringFlag(values, 'log-dir');
  const logs = checkLogPolicy('--logs', values.logs);
  const workspace = stringFlag(values, 'workspace');
  const tools = values.tools as string[] | undefined;
  const heap = wholeNumberFlag(values, ENGINE_FIELDS.maxOldGenerationSizeMb);
  const grace = durationFlag(values, 'cancel-grace');
  const agentsDir = stringFlag(values, 'agents');
  const budget = budgetFlag(values);
  const prices = pricesFlag(values);
  const queue = queueFlags(values);
  return {
    provider: { ...provider, ...providerFlagsFrom(values) },
    ...(threads === undefined ? {} : { threads }),
    ...(agentsPerThread === undefined ? {} : { agentsPerThread }),
    ...(maxDepth === undefined ? {} : { maxDepth }),
    ...(ceilingMs === undefined ? {} : { ceilingMs }),
    ...(logDir === undefined ? {} : { logDir }),
    ...(logs === undefined ? {} : { logs }),
    ...(workspace === undefined ? {} : { workspace }),
    ...(tools === undefined ? {} : { toolModules: tools }),
    ...(heap === undefined ? {} : { maxOldGenerationSizeMb: heap }),
    ...(grace === undefined ? {} : { cancelGraceMs: grace }),
    ...(agentsDir === undefined ? {} : { agentsDir }),
    ...(budget === undefined ? {} : { budget }),
    ...(prices === undefined ? {} : { prices }),
    ...(queue === undefined ? {} : { queue }),
    ...governorFlagsFrom(values),
  };
}

/** `--queue REDIS` and `--queue-name NAME`: children run on `cohort worker` processes. */
function queueFlags(values: ParsedValues): QueueOptions | undefined {
  const url = stringFlag(values, 'queue');
  const name = stringFlag(values, 'queue-name');
  const rate = stringFlag(values, 'queue-rate');
  if (url === undefined) {
    if (name !== undefined || rate !== undefined) {
      const flag = name !== undefined ? '--queue-name' : '--queue-rate';
      throw new UsageError(`Expected \`--queue REDIS\` with \`${flag}\`, got no --queue`);
    }
    return undefined;
  }
  return {
    url,
    ...(name === undefined ? {} : { name }),
    ...(rate === undefined ? {} : { rateLimit: queueRate(rate) }),
  };
}

/** `--queue-rate N/DURATION`: at most N jobs start per DURATION across the fleet. */
function queueRate(text: string): { max: number; durationMs: number } {
  const match = /^\s*(\d+)\s*\/\s*(\S+)\s*$/.exec(text);
  const max = match ? Number(match[1]) : 0;
  if (!match || max < 1 || !Number.isSafeInteger(max)) {
    throw new UsageError(
      `Expected \`--queue-rate\` to be N/DURATION such as 600/1m (at most N tasks start per DURATION), got \`${text}\``,
    );
  }
  const durationMs = parseDuration(match[2]!, '--queue-rate');
  if (durationMs < 1) {
    throw new UsageError(
      `Expected \`--queue-rate\`'s DURATION to be at least 1ms, got \`${text}\``,
    );
  }
  return { max, durationMs };
}

/** `--budget JSON`: every agent's default budget, in the agent files' form. */
function budgetFlag(values: ParsedValues): Budget | undefined {
  const text = stringFlag(values, 'budget');
  if (text === undefined) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UsageError(
      `Expected \`--budget\` to be a JSON object such as '{"usd":0.5,"time":"10m"}', got \`${text}\` (${why})`,
    );
  }
  return budgetFromData(data, '`--budget`');
}

/** `--prices FILE`: a JSON price table over the built-in one. */
function pricesFlag(values: ParsedValues): PriceTable | undefined {
  const file = stringFlag(values, 'prices');
  if (file === undefined) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UsageError(
      `Expected \`--prices\` to be a readable JSON file of prices, got \`${file}\`: ${why}`,
    );
  }
  return checkPriceTable('--prices', data);
}

/** `--governor`, `--rpm`, `--itpm`, `--otpm` and `--max-concurrency`, as the `governor` option. */
export function governorFlagsFrom(values: ParsedValues): { governor?: GovernorOptions } {
  const mode = values.governor;
  if (mode !== undefined && mode !== 'on' && mode !== 'off') {
    throw new UsageError(`Expected \`--governor\` to be on or off, got \`${String(mode)}\``);
  }
  const governor: GovernorOptions = {};
  const limits = { rpm: 'rpm', itpm: 'itpm', otpm: 'otpm', maxConcurrency: 'max-concurrency' };
  for (const [option, flag] of Object.entries(limits)) {
    const value = intFlag(values, flag, 1);
    if (value === undefined) continue;
    if (mode === 'off') {
      throw new UsageError(
        `Expected either \`--governor off\` or \`--${flag}\`, got both: the limits are the governor's`,
      );
    }
    governor[option as keyof typeof limits] = value;
  }
  if (mode === 'off') governor.enabled = false;
  return Object.keys(governor).length === 0 ? {} : { governor };
}

/**
 * The provider's two waits, `max_tokens` and how requests travel, from `--request-timeout`,
 * `--idle-timeout`, `--max-tokens`, `--transport` and `--connections`.
 */
export function providerFlagsFrom(values: ParsedValues): Partial<ProviderConfig> {
  const requestTimeoutMs = positiveDurationFlag(values, 'request-timeout');
  const idleTimeoutMs = positiveDurationFlag(values, 'idle-timeout');
  const maxTokens = intFlag(values, 'max-tokens', 1, MAX_TOKENS_LIMIT);
  const transport = transportFlag(values);
  const connections = wholeNumberFlag(values, PROVIDER_FIELDS.connections);
  return {
    ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
    ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(transport === undefined ? {} : { transport }),
    ...(connections === undefined ? {} : { connections }),
  };
}

/** `--transport undici|sdk`. */
export function transportFlag(values: ParsedValues): TransportName | undefined {
  const raw = values.transport;
  if (raw === undefined) return undefined;
  const name = TRANSPORT_NAMES.find((known) => known === raw);
  if (name === undefined) {
    throw new UsageError(
      `Expected \`--transport\` to be ${TRANSPORT_NAMES.join(' or ')}, got \`${String(raw)}\``,
    );
  }
  return name;
}

/** The largest `--max-tokens`: far above any model's, so the provider, not cohort, says no. */
const MAX_TOKENS_LIMIT = 10_000_000;

// A zero wait would fail every request at once, so it is refused here, named by its flag.
function positiveDurationFlag(values: ParsedValues, name: string): number | undefined {
  const ms = durationFlag(values, name);
  if (ms === 0) {
    throw new UsageError(
      `Expected \`--${name}\` to be a duration of at least 1ms, got \`${String(values[name])}\``,
    );
  }
  return ms;
}
