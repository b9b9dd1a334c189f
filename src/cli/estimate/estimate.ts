import { priceOf, priceTable, costUsd as priceUsage } from '../../shared/prices.js';
import { publicEndpoint } from '../../shared/provider/classify.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../../shared/provider/config.js';
import { resolveBaseURL } from '../../shared/provider/transport/endpoint.js';
import type { PreparedEngine } from '../commands/start.js';
import { type ParsedValues, wholeNumberFlag } from '../flags.js';
import { note, safeLabel } from '../output.js';
import { onCleanup } from '../process.js';
import { startProvider } from '../provider-select.js';
import type { BatchTask } from '../task-lines.js';
import { type InputSplit, splitInput } from './cached-input.js';
import { ASSUME_OUTPUT_FLAG, DEFAULT_ASSUMED_OUTPUT } from './estimate-flags.js';
import { requestBuilder, type TaskRequest } from './first-request.js';
import { modelLimits, pacedTime } from './rate-time.js';
import { type ModelEstimate, report } from './report.js';
import { countInputTokens } from './token-count.js';

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
  const build = await requestBuilder(
    prepared.check,
    prepared.options,
    config.model,
    prepared.mcp?.tools,
  );
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
