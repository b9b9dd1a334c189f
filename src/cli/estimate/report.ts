import { clockText } from '../../shared/duration.js';
import type { ParsedValues } from '../flags.js';
import { safeLabel, stdout } from '../output.js';
import type { BatchTask } from '../task-lines.js';
import type { InputSplit } from './cached-input.js';
import type { ModelLimits, PacedTime } from './rate-time.js';
import type { CountMethod } from './token-count.js';

/**
 * What `cohort batch --estimate` prints: the figures added up over the models, worded for a
 * person or as one JSON object (`--json`). The figures themselves come from estimate.ts.
 */

/** What one model's tasks would take. */
export interface ModelEstimate {
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

export interface Report {
  tasks: readonly BatchTask[];
  badLines: number;
  perTask: number;
  method: CountMethod;
  fallback: string | undefined;
  endpoint: string;
  models: ModelEstimate[];
}

export function report(values: ParsedValues, estimate: Report): number {
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
        `  time:    ${label}at least ${clockText(Math.max(1, model.time.seconds))} at ${assumed}; ${binding.name} binds, ${source}`,
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
    lines.push(
      `  time:    at least ${clockText(Math.max(1, seconds))} in all (the models are paced apart)`,
    );
  }
  return lines;
}
