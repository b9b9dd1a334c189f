import { readFileSync } from 'node:fs';
import { budgetFromData } from '../../main/agents/load.js';
import type { EngineOptions, EngineWarning } from '../../main/engine.js';
import { ENGINE_FIELDS, PROVIDER_FIELDS } from '../../main/engine-options.js';
import { QUEUE_FIELDS, type QueueOptions } from '../../main/runners/queue/options.js';
import type { Budget, PriceTable } from '../../shared/budget.js';
import { parseDuration } from '../../shared/duration.js';
import { UsageError } from '../../shared/errors.js';
import { GOVERNOR_FIELDS, type GovernorOptions } from '../../shared/governor/options.js';
import { checkLogPolicy } from '../../shared/journal/policy.js';
import { defined, oneOf, wholeNumber } from '../../shared/option-schema.js';
import { checkPriceTable } from '../../shared/prices.js';
import type { ProviderConfig } from '../../shared/provider/config.js';
import type { TransportName } from '../../shared/provider/transport/types.js';
import {
  type CliFlag,
  choiceFlag,
  durationFlag,
  flagOf,
  HELP_FLAG,
  type HelpRow,
  type ParsedValues,
  stringFlag,
  wholeNumberFlag,
} from '../flags.js';
import { LOG_ROOT_FLAG, newRunFolder, RUN_FLAG } from '../logs/run-folders.js';
import { flagMessage } from '../option-flags.js';
import { note, safeText } from '../output.js';
import { PROVIDER_FLAG } from '../provider-select.js';

/** The largest `--max-tokens`: far above any model's, so the provider, not cohort, says no. */
const MAX_TOKENS_LIMIT = 10_000_000;

/**
 * `--max-tokens`: the library takes any safe integer (`provider.maxTokens`); the CLI refuses
 * one no model has, in its own words.
 */
const MAX_TOKENS_FLAG = { ...PROVIDER_FIELDS.maxTokens, ...wholeNumber(1, MAX_TOKENS_LIMIT) };

/** `--governor on|off`: the CLI's words for the governor's `enabled`. */
const GOVERNOR_SWITCH = oneOf(['on', 'off'], 'on or off', {
  flag: '--governor',
  arg: 'on|off',
  help: "the rate-limit governor (default on; off sends every request at\nonce and leaves 429s to each agent's own retries)",
});

/** The governor's limits as flags, as `governorFlags` reads them. */
const GOVERNOR_LIMITS = ['rpm', 'itpm', 'otpm', 'maxConcurrency'] as const;

/** The account's three limits share one line of help. */
const ACCOUNT_LIMITS = {
  flags: [GOVERNOR_FIELDS.rpm, GOVERNOR_FIELDS.itpm, GOVERNOR_FIELDS.otpm],
  help: "the account's requests, input and output tokens per minute: the\ngovernor's starting values until the provider's headers say",
} as const satisfies HelpRow;

/** The governor's flags as one row, for a command that lists them together. */
export function governorRow(help: string): HelpRow {
  return {
    flags: [
      ...ACCOUNT_LIMITS.flags,
      GOVERNOR_FIELDS.maxConcurrency,
      GOVERNOR_FIELDS.patienceMs,
      GOVERNOR_SWITCH,
    ],
    help,
  };
}

/**
 * The engine's warnings (`onWarning`), as the CLI prints its own: one line on stderr, naming
 * flags rather than the library's options.
 */
export function noteWarning(warning: EngineWarning): void {
  note(`cohort: warning: ${safeText(flagMessage(warning.message))}`);
}

export const OTEL_ENDPOINT_FLAG: CliFlag = {
  flag: '--otel-endpoint',
  arg: 'URL',
  help: 'send OpenTelemetry traces over OTLP/HTTP to this collector',
};

export const TRACE_FILE_FLAG: CliFlag = {
  flag: '--trace-file',
  arg: 'FILE',
  help: 'write every span to FILE, one OTLP-shaped JSON object per line',
};

/**
 * The flags every engine command takes, in the order its help lists them: each is the field of
 * the option it sets, so its parsing, its check and its help come from one declaration.
 */
export const ENGINE_FLAGS: readonly HelpRow[] = [
  PROVIDER_FLAG,
  PROVIDER_FIELDS.model,
  PROVIDER_FIELDS.baseURL,
  PROVIDER_FIELDS.requestTimeoutMs,
  PROVIDER_FIELDS.idleTimeoutMs,
  MAX_TOKENS_FLAG,
  PROVIDER_FIELDS.transport,
  PROVIDER_FIELDS.connections,
  ACCOUNT_LIMITS,
  GOVERNOR_FIELDS.maxConcurrency,
  GOVERNOR_FIELDS.patienceMs,
  GOVERNOR_SWITCH,
  GOVERNOR_FIELDS.state,
  ENGINE_FIELDS.workspace,
  ENGINE_FIELDS.toolModules,
  ENGINE_FIELDS.mcpConfig,
  ENGINE_FIELDS.threads,
  ENGINE_FIELDS.agentsPerThread,
  ENGINE_FIELDS.maxDepth,
  ENGINE_FIELDS.ceilingMs,
  ENGINE_FIELDS.cancelGraceMs,
  ENGINE_FIELDS.toolTimeoutMs,
  ENGINE_FIELDS.toolGraceMs,
  ENGINE_FIELDS.maxOldGenerationSizeMb,
  LOG_ROOT_FLAG,
  RUN_FLAG,
  ENGINE_FIELDS.logs,
  ENGINE_FIELDS.agentsDir,
  ENGINE_FIELDS.budget,
  ENGINE_FIELDS.prices,
  ENGINE_FIELDS.cache,
  ENGINE_FIELDS.cacheTtl,
  QUEUE_FIELDS.url,
  QUEUE_FIELDS.name,
  QUEUE_FIELDS.rateLimit,
  OTEL_ENDPOINT_FLAG,
  TRACE_FILE_FLAG,
  HELP_FLAG,
];

/**
 * Engine options from the common flags, read in the order their mistakes are reported; `over`
 * is what a command sets itself (the demo's folder), over its flag.
 */
export function engineOptionsFrom(
  values: ParsedValues,
  over: { workspace?: string | undefined } = {},
): EngineOptions {
  const threads = wholeNumberFlag(values, ENGINE_FIELDS.threads);
  const agentsPerThread = wholeNumberFlag(values, ENGINE_FIELDS.agentsPerThread);
  const maxDepth = wholeNumberFlag(values, ENGINE_FIELDS.maxDepth);
  const ceilingMs = durationFlag(values, ENGINE_FIELDS.ceilingMs);
  // The engine's `logDir` is the run's folder: `--log-dir` is the root that holds it.
  const logDir = newRunFolder(values);
  const logs = checkLogPolicy('--logs', values.logs);
  const workspace = stringFlag(values, ENGINE_FIELDS.workspace);
  const tools = values.tools as string[] | undefined;
  const mcpConfig = values['mcp-config'] as string[] | undefined;
  const heap = wholeNumberFlag(values, ENGINE_FIELDS.maxOldGenerationSizeMb);
  const grace = durationFlag(values, ENGINE_FIELDS.cancelGraceMs);
  const toolTimeoutMs = durationFlag(values, ENGINE_FIELDS.toolTimeoutMs);
  const toolGraceMs = durationFlag(values, ENGINE_FIELDS.toolGraceMs);
  const agentsDir = stringFlag(values, ENGINE_FIELDS.agentsDir);
  const budget = budgetFlag(values);
  const prices = pricesFlag(values);
  const cache = choiceFlag(values, ENGINE_FIELDS.cache);
  const cacheTtl = choiceFlag(values, ENGINE_FIELDS.cacheTtl);
  const queue = queueFlags(values);
  // Unset options are left out (not set to undefined), so the options can be spread over others.
  return defined({
    provider: providerFlagsFrom(values),
    threads,
    agentsPerThread,
    maxDepth,
    ceilingMs,
    logDir,
    logs,
    workspace: over.workspace ?? workspace,
    toolModules: tools,
    mcpConfig,
    maxOldGenerationSizeMb: heap,
    cancelGraceMs: grace,
    toolTimeoutMs,
    toolGraceMs,
    agentsDir,
    budget,
    prices,
    cache,
    cacheTtl,
    queue,
    governor: governorFlags(values),
  });
}

/** `--queue REDIS` and `--queue-name NAME`: children run on `cohort worker` processes. */
function queueFlags(values: ParsedValues): QueueOptions | undefined {
  const url = stringFlag(values, QUEUE_FIELDS.url);
  const name = stringFlag(values, QUEUE_FIELDS.name);
  const rate = stringFlag(values, QUEUE_FIELDS.rateLimit);
  if (url === undefined) {
    if (name !== undefined || rate !== undefined) {
      const flag = name !== undefined ? '--queue-name' : '--queue-rate';
      throw new UsageError(`Expected \`--queue REDIS\` with \`${flag}\`, got no --queue`);
    }
    return undefined;
  }
  return defined({ url, name, rateLimit: rate === undefined ? undefined : queueRate(rate) });
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
  const text = stringFlag(values, ENGINE_FIELDS.budget);
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
  const file = stringFlag(values, ENGINE_FIELDS.prices);
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

/**
 * `--governor`, `--rpm`, `--itpm`, `--otpm`, `--max-concurrency`, `--patience` and
 * `--governor-state`, as the
 * `governor` option; none of them gives none.
 */
export function governorFlags(values: ParsedValues): GovernorOptions | undefined {
  const mode = choiceFlag(values, GOVERNOR_SWITCH);
  const governor: GovernorOptions = {};
  const refuseWhenOff = (flag: string | undefined, what: string) => {
    if (mode !== 'off') return;
    throw new UsageError(`Expected either \`--governor off\` or \`${flag}\`, got both: ${what}`);
  };
  for (const option of GOVERNOR_LIMITS) {
    const field = GOVERNOR_FIELDS[option];
    const value = wholeNumberFlag(values, field);
    if (value === undefined) continue;
    refuseWhenOff(field.flag, "the limits are the governor's");
    governor[option] = value;
  }
  const patienceMs = durationFlag(values, GOVERNOR_FIELDS.patienceMs);
  if (patienceMs !== undefined) {
    // Without the governor nothing is paced: each 429 and 529 counts against maxRetries.
    refuseWhenOff(GOVERNOR_FIELDS.patienceMs.flag, 'only requests the governor paces wait');
    governor.patienceMs = patienceMs;
  }
  // `off` keeps nothing; any other value is the file's path (`./off` for a file named so).
  const state = stringFlag(values, GOVERNOR_FIELDS.state);
  if (state !== undefined) {
    refuseWhenOff(GOVERNOR_FIELDS.state.flag, "the state file is the governor's");
    governor.state = state === 'off' ? false : state;
  }
  if (mode === 'off') governor.enabled = false;
  return Object.keys(governor).length === 0 ? undefined : governor;
}

/**
 * The provider's two waits, `max_tokens` and how requests travel, from `--request-timeout`,
 * `--idle-timeout`, `--max-tokens`, `--transport` and `--connections`.
 */
export function providerFlagsFrom(values: ParsedValues): Partial<ProviderConfig> {
  const requestTimeoutMs = positiveDurationFlag(values, PROVIDER_FIELDS.requestTimeoutMs);
  const idleTimeoutMs = positiveDurationFlag(values, PROVIDER_FIELDS.idleTimeoutMs);
  const maxTokens = wholeNumberFlag(values, MAX_TOKENS_FLAG);
  const transport: TransportName | undefined = choiceFlag(values, PROVIDER_FIELDS.transport);
  const connections = wholeNumberFlag(values, PROVIDER_FIELDS.connections);
  return defined({ requestTimeoutMs, idleTimeoutMs, maxTokens, transport, connections });
}

// A zero wait would fail every request at once, so it is refused here, named by its flag.
function positiveDurationFlag(values: ParsedValues, field: CliFlag): number | undefined {
  const ms = durationFlag(values, field);
  if (ms === 0) {
    const flag = flagOf(field);
    throw new UsageError(
      `Expected \`${flag}\` to be a duration of at least 1ms, got \`${String(values[flag.slice(2)])}\``,
    );
  }
  return ms;
}
