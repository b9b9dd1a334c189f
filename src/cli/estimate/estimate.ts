import { wholeNumber } from '../../shared/option-schema.js';
import { priceOf, priceTable, costUsd as priceUsage } from '../../shared/prices.js';
import { publicEndpoint } from '../../shared/provider/classify.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../../shared/provider/config.js';
import { resolveBaseURL } from '../../shared/provider/transport/endpoint.js';
import type { PreparedEngine } from '../commands/start.js';
import { type CliFlag, type ParsedValues, wholeNumberFlag } from '../flags.js';
import { note, safeLabel, stdout } from '../output.js';
import { onCleanup } from '../process.js';
import { startProvider } from '../provider-select.js';
import type { BatchTask } from '../task-lines.js';
import { type InputSplit, splitInput } from './cached-input.js';
import { requestBuilder, type TaskRequest } from './first-request.js';
import { type ModelLimits, modelLimits, type PacedTime, pacedTime } from './rate-time.js';
import { type CountMethod, countInputTokens } from './token-count.js';

/** Output tokens a task is assumed to write when `--assume-output` does not say. */
export const DEFAULT_ASSUMED_OUTPUT = 500;

export const ESTIMATE_FLAG: CliFlag = {
  flag: '--estimate',
  help: 'check every task and print what the batch would take (tasks,\ntokens, dollars, time) without sending a message (no --out needed)',
};
export const ASSUME_OUTPUT_FLAG = wholeNumber(0, 10_000_000, {
  flag: '--assume-output',
  arg: 'TOKENS',
  help: `with --estimate: output tokens per task (default ${DEFAULT_ASSUMED_OUTPUT})`,
});

/** The estimate's flags, in the order the batch help lists them. */
export const ESTIMATE_FLAGS: readonly CliFlag[] = [ESTIMATE_FLAG, ASSUME_OUTPUT_FLAG];

/** What one model's tasks would take. */
interface ModelEstimate {
  model: string;
  tasks: number;
  inputTokens: number;
  outputTokens: number;
  split: InputSplit;
  /** Without the prompt cache, and with it as cohort would use it; absent without a price. */
  costUsd?: number;
  cachedCostUsd?: number;
  limits: ModelLimits;
  time?: PacedTime;
}

/**
 * `cohort batch --estimate`: the checked tasks' first requests, built as their agents would send
 * them, counted by the provider's count_tokens (or locally when it has none), priced with and
 * without the prompt cache, and timed at the rate limits the governor would go by. Nothing is
 * sent to the Messages endpoint, and no results file is touched. Exit 0, or 1 when some task
 * was bad (as a run would end).
 */
export async function estimateBatch(
  values: ParsedValues,
  prepared: PreparedEngine,
  tasks: readonly BatchTask[],
  badLines: number,
): Promise<number> {
  const perTask = wholeNumberFlag(values, ASSUME_OUTPUT_FLAG) ?? DEFAULT_ASSUMED_OUTPUT;
  const common = { tasks, badLines, perTask };
  // No good task: nothing to count, so no model is started (as a run starts none).
  if (tasks.length === 0) {
    return report(values, {
      ...common,
      method: 'local',
      fallback: undefined,
      endpoint: '',
      models: [],
    });
  }
  const provider = await startProvider(prepared.choice, { notice: note });
  onCleanup(() => provider.close());
  const config: ProviderConfig = {
    ...DEFAULT_PROVIDER_CONFIG,
    ...prepared.options.provider,
    ...provider.config,
  };
  const endpoint = publicEndpoint(resolveBaseURL(config));
  const build = await requestBuilder(prepared.check, prepared.options, config.model);
  const requests = tasks.map(build);
  const { method, tokens, fallback } = await countInputTokens(requests, config);
  await provider.close();
  if (fallback !== undefined) {
    note(
      `cohort batch: count_tokens failed at ${endpoint}/count_tokens (${safeLabel(fallback)}): input tokens are estimated locally instead, as characters / 4 of each request's JSON`,
    );
  }
  const models = byModel(requests, tokens, perTask, prepared, config);
  return report(values, { ...common, method, fallback, endpoint, models });
}

function byModel(
  requests: readonly TaskRequest[],
  tokens: readonly number[],
  perTask: number,
  prepared: PreparedEngine,
  config: ProviderConfig,
): ModelEstimate[] {
  const splits = splitInput(requests, tokens);
  const table = priceTable(prepared.options.prices);
  const models = new Map<string, ModelEstimate>();
  requests.forEach((request, index) => {
    let model = models.get(request.model);
    if (model === undefined) {
      model = {
        model: request.model,
        tasks: 0,
        inputTokens: 0,
        outputTokens: 0,
        split: { uncached: 0, read: 0, write5m: 0, write1h: 0 },
        limits: modelLimits(request.model, prepared.options.governor, config),
      };
      models.set(request.model, model);
    }
    const split = splits[index] as InputSplit;
    model.tasks++;
    model.inputTokens += tokens[index] ?? 0;
    model.outputTokens += perTask;
    model.split.uncached += split.uncached;
    model.split.read += split.read;
    model.split.write5m += split.write5m;
    model.split.write1h += split.write1h;
  });
  for (const model of models.values()) {
    const price = priceOf(model.model, table);
    if (price !== undefined) {
      model.costUsd = priceUsage(
        { inputTokens: model.inputTokens, outputTokens: model.outputTokens },
        price,
      );
      model.cachedCostUsd = priceUsage(
        {
          inputTokens: model.split.uncached,
          outputTokens: model.outputTokens,
          cacheReadTokens: model.split.read,
          cacheWriteTokens: model.split.write5m + model.split.write1h,
          cacheWrite1hTokens: model.split.write1h,
        },
        price,
      );
    }
    if (model.limits.kind === 'limits') {
      model.time = pacedTime(
        {
          requests: model.tasks,
          // The input-token limit counts cache writes and uncached input, not reads.
          chargedInputTokens: model.inputTokens - model.split.read,
          outputTokens: model.outputTokens,
        },
        model.limits.limits,
      );
    }
  }
  return [...models.values()];
}

interface Report {
  tasks: readonly BatchTask[];
  badLines: number;
  perTask: number;
  method: CountMethod;
  fallback: string | undefined;
  endpoint: string;
  models: ModelEstimate[];
}

function report(values: ParsedValues, estimate: Report): number {
  const { models } = estimate;
  const sum = (of: (model: ModelEstimate) => number) =>
    models.reduce((total, model) => total + of(model), 0);
  const priced = models.filter((model) => model.costUsd !== undefined);
  const unpriced = models.filter((model) => model.costUsd === undefined).map((m) => m.model);
  const cacheUsed = models.some((model) => model.split.uncached < model.inputTokens);
  const timed = models.filter((model) => model.time !== undefined);
  const seconds = timed.length === 0 ? undefined : Math.max(...timed.map((m) => m.time!.seconds));
  const inputTokens = sum((model) => model.inputTokens);
  const outputTokens = sum((model) => model.outputTokens);
  const costUsd = priced.length === 0 ? undefined : sum((model) => model.costUsd ?? 0);
  const cachedCostUsd = priced.length === 0 ? undefined : sum((model) => model.cachedCostUsd ?? 0);
  if (values.json) {
    const object = {
      type: 'estimate',
      tasks: estimate.tasks.length,
      badLines: estimate.badLines,
      inputTokens,
      inputCounted: estimate.method,
      ...(estimate.fallback === undefined ? {} : { countTokensError: estimate.fallback }),
      outputTokens,
      outputTokensPerTask: estimate.perTask,
      ...(costUsd === undefined ? {} : { costUsd }),
      ...(cacheUsed && cachedCostUsd !== undefined ? { cachedCostUsd } : {}),
      ...(cacheUsed
        ? {
            cache: {
              readTokens: sum((model) => model.split.read),
              writeTokens: sum((model) => model.split.write5m + model.split.write1h),
              uncachedTokens: sum((model) => model.split.uncached),
            },
          }
        : {}),
      ...(unpriced.length === 0 ? {} : { unpriced }),
      ...(seconds === undefined ? {} : { seconds: Math.round(seconds) }),
      models: models.map((model) => ({
        model: model.model,
        tasks: model.tasks,
        inputTokens: model.inputTokens,
        outputTokens: model.outputTokens,
        ...(model.costUsd === undefined ? {} : { costUsd: model.costUsd }),
        ...(cacheUsed && model.cachedCostUsd !== undefined
          ? { cachedCostUsd: model.cachedCostUsd }
          : {}),
        limits: limitsJson(model.limits),
        ...(model.time === undefined
          ? {}
          : { seconds: Math.round(model.time.seconds), binding: model.time.binding.name }),
      })),
    };
    stdout().write(`${JSON.stringify(object)}\n`);
  } else {
    stdout().write(
      `${textLines(estimate, { inputTokens, outputTokens, costUsd, cachedCostUsd, cacheUsed, unpriced, seconds }).join('\n')}\n`,
    );
  }
  return estimate.badLines > 0 ? 1 : 0;
}

function limitsJson(limits: ModelLimits): Record<string, unknown> {
  if (limits.kind !== 'limits') return { kind: limits.kind };
  return {
    kind: 'limits',
    ...Object.fromEntries(
      limits.limits.map((limit) => [
        limit.name,
        { perMinute: limit.perMinute, source: limit.source },
      ]),
    ),
  };
}

const count = (value: number) => Math.round(value).toLocaleString('en-US');
const dollars = (value: number) => `$${value.toFixed(value >= 100 ? 2 : 4)}`;

function textLines(
  estimate: Report,
  totals: {
    inputTokens: number;
    outputTokens: number;
    costUsd: number | undefined;
    cachedCostUsd: number | undefined;
    cacheUsed: boolean;
    unpriced: string[];
    seconds: number | undefined;
  },
): string[] {
  const { models } = estimate;
  const bad = estimate.badLines > 0 ? ` (${estimate.badLines} bad, not counted)` : '';
  const lines = [
    `cohort batch --estimate: ${estimate.tasks.length} task(s)${bad}; no message was sent`,
  ];
  if (models.length === 0) return lines;
  if (models.length > 1) {
    lines.push(`  models:  ${models.map((m) => `${safeLabel(m.model)} (${m.tasks})`).join(', ')}`);
  }
  const how =
    estimate.method === 'count_tokens'
      ? `counted by count_tokens at ${estimate.endpoint}/count_tokens`
      : 'estimated locally as characters / 4 (no count_tokens)';
  lines.push(`  input:   ${count(totals.inputTokens)} tokens (every task's first request), ${how}`);
  lines.push(
    `  output:  ${count(totals.outputTokens)} tokens, assumed: ${count(estimate.perTask)} per task (--assume-output)`,
  );
  if (totals.costUsd !== undefined) {
    const partly =
      totals.unpriced.length > 0
        ? ` (no price for ${totals.unpriced.map(safeLabel).join(', ')}: --prices FILE)`
        : '';
    lines.push(`  cost:    ${dollars(totals.costUsd)} without the prompt cache${partly}`);
    if (totals.cacheUsed && totals.cachedCostUsd !== undefined) {
      const read = models.reduce((total, model) => total + model.split.read, 0);
      const written = models.reduce((t, m) => t + m.split.write5m + m.split.write1h, 0);
      // A one-step task writes its own prompt to the cache and never reads it back.
      const more =
        totals.cachedCostUsd > totals.costUsd
          ? 'more: what a one-step task writes is not read back; '
          : '';
      lines.push(
        `           ${dollars(totals.cachedCostUsd)} with it, as cohort caches (${count(read)} tokens read back, ${count(written)} written; ${more}--cache off sends no breakpoints)`,
      );
    }
  } else {
    lines.push(
      `  cost:    unknown: no price for ${totals.unpriced.map(safeLabel).join(', ')} (--prices FILE)`,
    );
  }
  lines.push(...timeLines(models, totals.seconds));
  return lines;
}

function timeLines(models: readonly ModelEstimate[], seconds: number | undefined): string[] {
  const lines: string[] = [];
  for (const model of models) {
    const label = models.length > 1 ? `${safeLabel(model.model)}: ` : '';
    const { limits } = model;
    if (model.time !== undefined) {
      const { binding } = model.time;
      const source =
        binding.source === 'learned'
          ? "learned from the provider's headers (governor state file)"
          : `set by --${binding.name}`;
      const assumed =
        limits.kind === 'limits'
          ? limits.limits.map((l) => `${count(l.perMinute)} ${l.name}`).join(', ')
          : '';
      lines.push(
        `  time:    ${label}at least ${formatSeconds(model.time.seconds)} at ${assumed}; ${binding.name} binds, ${source}`,
      );
    } else if (limits.kind === 'off') {
      lines.push(`  time:    ${label}not paced (--governor off): as fast as the provider answers`);
    } else if (limits.kind === 'unlimited') {
      lines.push(
        `  time:    ${label}no rate limit: the provider sent no rate-limit headers last time; as fast as it answers`,
      );
    } else {
      lines.push(
        `  time:    ${label}unknown: no limit is set (--rpm, --itpm, --otpm) or learned for this key yet`,
      );
    }
  }
  if (seconds !== undefined && models.length > 1) {
    lines.push(`  time:    at least ${formatSeconds(seconds)} in all (the models are paced apart)`);
  }
  return lines;
}

function formatSeconds(seconds: number): string {
  const total = Math.max(1, Math.round(seconds));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const rest = total % 60;
  if (hours > 0) return `${hours}h ${minutes}m`;
  if (minutes > 0) return `${minutes}m ${rest}s`;
  return `${rest}s`;
}

/** The batch help's paragraph on `--estimate`. */
export const ESTIMATE_USAGE = `--estimate checks every task the same way and prints, without sending a message: the number of
tasks; the input tokens of each task's first request, built as its agent would send it and counted
by the provider's POST /v1/messages/count_tokens (8 at a time), or as characters / 4 when the
provider has none (it says so); the output tokens assumed by --assume-output (default ${DEFAULT_ASSUMED_OUTPUT} a task);
the dollars at the price table (--prices), without and with the prompt cache as cohort uses it;
and the least time the rate limits allow: those the governor learned for this key (its state
file) over --rpm, --itpm and --otpm. --json prints it as one object.`;
