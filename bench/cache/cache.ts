/**
 * The `cache` part: prompt caching under a binding input-token limit. Every agent is given the
 * same long system prompt (20,000 tokens); three cases run the same agents at the same
 * concurrency: cohort with `cache: 'auto'` (its default), cohort with `cache: 'off'`, and the
 * hand-written loop on the official SDK (`sdk-loop`), which sends no `cache_control`, as a user
 * writes it. Each case runs in a fresh measuring process (the concurrency part's,
 * concurrency-case.ts) against a fresh scripted model in its own process (full buckets, an empty
 * cache), which caches as the API does and whose input-token limit counts uncached input and
 * cache writes, not reads. The ITPM is set from a probe agent so that the uncached cases are
 * bound by it for about a minute. The cases' order rotates each round; the figures are medians
 * over the rounds (cache-report.ts).
 */
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import { loadFlags, processCpuMs, startModelProcess } from '../common/model-process.js';
import type { BenchOptions } from '../common/options.js';
import type { BenchContext, BenchPart, PartReport } from '../common/part.js';
import { CHARS_PER_TOKEN } from '../common/scenario.js';
import { rotate } from '../concurrency/concurrency.js';
import { localModelEnv, measureInFreshProcess } from '../engines/fork.js';
import type { ConcurrencyJob, ConcurrencyMeasurement } from '../engines/jobs.js';
import {
  CACHE_CASES,
  CACHE_MODEL,
  CACHE_OFF,
  type CacheCase,
  type CacheLimits,
  type CachePartSettings,
  type CacheRun,
  SYSTEM_TOKENS,
} from './cache-cases.js';
import { cacheReport } from './cache-report.js';

/** The part's own defaults where no flag says otherwise. */
const DEFAULTS = { agents: 1000, concurrency: 200, ttftMs: 200, cpuMs: 0, bucketSeconds: 5 };

/** How long the default ITPM keeps the uncached cases bound, beyond the bucket's first burst. */
const BOUND_SECONDS = 60;

/**
 * The part's settings. `--ttft-ms` is the time before a response starts at all: its headers and
 * `message_start` wait that long (the script's `delayMs`), and the model's own ttft is 0. A real
 * API reads the prompt before its response starts, and its cache entry is readable only from
 * then; the scripted model sends `message_start` at once and waits its ttft before the first
 * token only, so with a ttft alone an entry would be readable at once and siblings that arrive
 * together would read it whatever the client did: warm-then-release would have nothing to do.
 */
export function cacheSettings(options: BenchOptions): CachePartSettings {
  const given = (flag: string) => options.given.includes(flag);
  return {
    scenario: {
      agents: given('agents') ? options.agents : DEFAULTS.agents,
      steps: options.steps,
      ttftMs: 0,
      responseDelayMs: given('ttft-ms') ? options.ttftMs : DEFAULTS.ttftMs,
      tps: options.tps,
      cpuMs: given('cpu-ms') ? options.cpuMs : DEFAULTS.cpuMs,
    },
    // One level: the highest of a list.
    concurrency: given('concurrency') ? Math.max(...options.concurrency) : DEFAULTS.concurrency,
    system: { chars: SYSTEM_TOKENS * CHARS_PER_TOKEN, prefixes: options.prefixes },
    bucketSeconds: given('bucket-seconds') ? options.bucketSeconds : DEFAULTS.bucketSeconds,
    rounds: options.runs,
    options,
  };
}

const roundUp = (value: number, step: number) => Math.max(step, Math.ceil(value / step) * step);

type Context = BenchContext & { startFailures: string[] };

function jobOf(
  settings: CachePartSettings,
  item: CacheCase,
  provider: Partial<ProviderConfig>,
  workload: { agents: number; concurrency: number },
): ConcurrencyJob {
  const { options } = settings;
  return {
    kind: 'concurrency',
    engine: item.engine,
    concurrency: workload.concurrency,
    scenario: { ...settings.scenario, agents: workload.agents },
    provider,
    system: settings.system,
    ...(item.cache === undefined ? {} : { cache: item.cache }),
    // cohort at its defaults: the governor on, learning the limits from the headers.
    ...(options.governor ? {} : { governorOff: true }),
    ...(item.engine === 'cohort' && options.threads !== undefined
      ? { threads: options.threads }
      : {}),
  };
}

/** Runs `item` against a fresh scripted model with these load flags; stops the model after. */
async function runCase(
  settings: CachePartSettings,
  item: CacheCase,
  input: { flags: string[]; agents: number; concurrency: number },
  context: Context,
): Promise<ConcurrencyMeasurement> {
  const { options } = settings;
  const server = await startModelProcess(input.flags);
  try {
    const provider: Partial<ProviderConfig> = {
      baseURL: server.url,
      model: CACHE_MODEL,
      maxRetries: options.maxRetries,
      transport: options.transport,
    };
    const before = processCpuMs(server.child.pid);
    const measurement = await measureInFreshProcess<ConcurrencyMeasurement>(
      jobOf(settings, item, provider, input),
      { env: localModelEnv(), log: context.log, startFailures: context.startFailures },
    );
    const after = processCpuMs(server.child.pid);
    measurement.modelCpuMs =
      before === undefined || after === undefined ? null : Math.max(0, after - before);
    return measurement;
  } finally {
    await server.stop();
  }
}

/**
 * The measured cases' limits. Unless `--itpm` is given, a probe agent (cohort, cache off, a
 * model without limits) reports its input; the ITPM is then set so that the whole run's uncached
 * input takes BOUND_SECONDS at the limit after the bucket's first burst:
 * `agents × tokens per agent × 60 / (BOUND_SECONDS + bucket seconds)`, rounded up to a thousand.
 */
async function limitsOf(settings: CachePartSettings, context: Context): Promise<CacheLimits> {
  const { options, bucketSeconds } = settings;
  const fixed = { rpm: options.rpm, otpm: options.otpm, bucketSeconds };
  if (options.itpm > 0) return { itpm: options.itpm, ...fixed, probeInputTokens: null };
  const probe = await runCase(
    settings,
    CACHE_OFF,
    { flags: loadFlags({}), agents: 1, concurrency: 1 },
    context,
  );
  const tokens = probe.inputTokens + probe.cacheReadTokens + probe.cacheWriteTokens;
  if (probe.outcomes.complete !== 1 || tokens === 0) {
    throw new Error(
      `Expected the probe agent to complete with its input tokens reported, got ${JSON.stringify(probe.outcomes)}: ${probe.failureReasons.join(' | ')}`,
    );
  }
  const demand = settings.scenario.agents * tokens;
  const itpm = roundUp((demand * 60) / (BOUND_SECONDS + bucketSeconds), 1000);
  return { itpm, ...fixed, probeInputTokens: tokens };
}

async function run(context: BenchContext): Promise<PartReport> {
  const settings = cacheSettings(context.options);
  const { scenario, concurrency, rounds, options } = settings;
  const withFailures: Context = { ...context, startFailures: [] };
  const limits = await limitsOf(settings, withFailures);
  context.log(
    `bench: cache: ${limits.probeInputTokens === null ? '' : `probe agent's input ${limits.probeInputTokens} tokens; `}` +
      `model: ITPM ${limits.itpm}${limits.rpm > 0 ? `, RPM ${limits.rpm}` : ''}${limits.otpm > 0 ? `, OTPM ${limits.otpm}` : ''}, ` +
      `${limits.bucketSeconds} s buckets, caching on`,
  );
  const flags = loadFlags({
    ttftMs: scenario.ttftMs,
    tps: scenario.tps,
    jitter: options.jitter,
    rpm: limits.rpm,
    itpm: limits.itpm,
    otpm: limits.otpm,
    bucketSeconds: limits.bucketSeconds,
  });
  const runs: CacheRun[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const item of rotate(CACHE_CASES, round)) {
      const measurement = await runCase(
        settings,
        item,
        { flags, agents: scenario.agents, concurrency },
        withFailures,
      );
      runs.push({ label: item.label, round, measurement });
      const minutes = measurement.makespanMs / 60_000;
      context.log(
        `bench: cache, ${item.label}, round ${round + 1}/${rounds}: ` +
          `${measurement.outcomes.complete}/${measurement.agents} complete in ${(minutes * 60).toFixed(1)} s ` +
          `(${(measurement.outcomes.complete / minutes).toFixed(0)} agents/min), ${measurement.rateLimited} × 429, ` +
          `cache read ${measurement.cacheReadTokens}, written ${measurement.cacheWriteTokens}, ` +
          `${measurement.prefixWriters ?? 0} prefix writer(s)`,
      );
    }
  }
  return cacheReport({ settings, limits, runs, startFailures: withFailures.startFailures });
}

/** The `cache` part of `npm run bench`. */
export const cachePart: BenchPart = {
  name: 'cache',
  description:
    'prompt caching under a binding input-token limit: cohort with cache auto and off, and the SDK loop, on a shared 20,000-token system prompt',
  run,
};
