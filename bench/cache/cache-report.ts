/**
 * The `cache` part's figures and report: per case (medians over the rounds) agents per minute,
 * input tokens by kind and their cost, the input-token rate charged against the limit, and the
 * agents that wrote a shared prefix; then cache auto against cache off, each ratio checked
 * against its target, as a table, rows and JSON data.
 */
import { costUsd, priceOf } from '../../src/shared/prices.js';
import type { BenchRow, PartReport } from '../common/part.js';
import { median } from '../common/stats.js';
import { formatCount, formatGrid, formatValue } from '../common/table.js';
import {
  CACHE_AUTO,
  CACHE_CASES,
  CACHE_MODEL,
  CACHE_OFF,
  CACHE_TARGETS,
  type CacheLimits,
  type CachePartSettings,
  type CacheRun,
  SDK_LOOP,
  SYSTEM_TOKENS,
} from './cache-cases.js';

/** The input price the cost is counted at, dollars per million tokens. */
function inputPrice() {
  const price = priceOf(CACHE_MODEL);
  if (price === undefined) throw new Error(`Expected a price for ${CACHE_MODEL}, found none`);
  return price;
}

/** One case of one round, or the medians of a case over the rounds. */
export interface CacheFigures {
  case: string;
  round: number | null;
  agents: number;
  completed: number;
  failed: number;
  /** First agent started → last agent settled. */
  wallSeconds: number;
  /** Completed agents / wall minutes. */
  agentsPerMinute: number;
  /** HTTP requests, retries included. */
  requests: number;
  rateLimited429: number;
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Input side only: uncached at the input price, reads at 0.1×, writes at 1.25×. */
  inputCostUsd: number;
  /** The same tokens, every one at the input price: what they cost without a cache. */
  uncachedInputCostUsd: number;
  inputCostPerAgentUsd: number | null;
  /** What the limit counts (uncached input + cache writes) per wall minute. */
  chargedItpm: number;
  /** The same as a percentage of the ITPM limit. */
  chargedPercent: number;
  /** Agents that wrote a shared prefix themselves. */
  prefixWriters: number;
  /** `prefixWriters` / distinct prefixes. */
  writesPerPrefix: number;
  /** CPU of the measuring process (every thread) and of the model's, per request, ms. */
  cpuPerCallMs: number;
  modelCpuPerCallMs: number | null;
  /**
   * CPU of the measuring process and the model's together / wall time: the cores the case kept
   * busy. Near the machine's cores, the case was bound by CPU, not by the limit.
   */
  coresBusy: number | null;
}

function figuresOf(run: CacheRun, settings: CachePartSettings, limits: CacheLimits): CacheFigures {
  const { measurement: m } = run;
  const price = inputPrice();
  const minutes = Math.max(1e-9, m.makespanMs / 60_000);
  const completed = m.outcomes.complete;
  const input = {
    inputTokens: m.inputTokens,
    outputTokens: 0,
    cacheReadTokens: m.cacheReadTokens,
    cacheWriteTokens: m.cacheWriteTokens,
  };
  const inputCostUsd = costUsd(input, price);
  const allInput = m.inputTokens + m.cacheReadTokens + m.cacheWriteTokens;
  const charged = (m.inputTokens + m.cacheWriteTokens) / minutes;
  const writers = m.prefixWriters ?? 0;
  return {
    case: run.label,
    round: run.round,
    agents: m.agents,
    completed,
    failed: m.agents - completed,
    wallSeconds: m.makespanMs / 1000,
    agentsPerMinute: completed / minutes,
    requests: m.providerCalls,
    rateLimited429: m.rateLimited,
    inputTokens: m.inputTokens,
    cacheReadTokens: m.cacheReadTokens,
    cacheWriteTokens: m.cacheWriteTokens,
    inputCostUsd,
    uncachedInputCostUsd: costUsd({ inputTokens: allInput, outputTokens: 0 }, price),
    inputCostPerAgentUsd: completed === 0 ? null : inputCostUsd / completed,
    chargedItpm: charged,
    chargedPercent: (100 * charged) / limits.itpm,
    prefixWriters: writers,
    writesPerPrefix: writers / settings.system.prefixes,
    cpuPerCallMs: m.processCpuMs / Math.max(1, m.providerCalls),
    modelCpuPerCallMs:
      m.modelCpuMs === null || m.modelCpuMs === undefined
        ? null
        : m.modelCpuMs / Math.max(1, m.providerCalls),
    coresBusy:
      m.modelCpuMs === null || m.modelCpuMs === undefined
        ? null
        : (m.processCpuMs + m.modelCpuMs) / Math.max(1, m.makespanMs),
  };
}

/** Each numeric field's median over the rounds of one case. */
function medians(items: CacheFigures[]): CacheFigures {
  const first = items[0] as CacheFigures;
  const of = (field: keyof CacheFigures): number | null => {
    const values = items
      .map((item) => item[field])
      .filter((value): value is number => typeof value === 'number');
    return values.length === 0 ? null : median(values);
  };
  const out: Record<string, unknown> = { case: first.case, round: null };
  for (const key of Object.keys(first) as (keyof CacheFigures)[]) {
    if (key !== 'case' && key !== 'round') out[key] = of(key);
  }
  return out as unknown as CacheFigures;
}

/** A target, what was measured against it, and the verdict. */
export interface CacheCheck {
  name: 'agents per minute' | 'input cost' | 'cache writes per prefix';
  target: string;
  value: number;
  measured: string;
  met: boolean;
}

/** The median over rounds of a per-round figure of cache auto against cache off. */
function paired(
  figures: CacheFigures[],
  settings: CachePartSettings,
  of: (auto: CacheFigures, off: CacheFigures) => number,
): number {
  const values: number[] = [];
  for (let round = 0; round < settings.rounds; round++) {
    const auto = figures.find((item) => item.case === CACHE_AUTO.label && item.round === round);
    const off = figures.find((item) => item.case === CACHE_OFF.label && item.round === round);
    if (auto && off) values.push(of(auto, off));
  }
  return median(values);
}

function checks(
  figures: CacheFigures[],
  summary: CacheFigures[],
  settings: CachePartSettings,
): CacheCheck[] {
  const auto = summary.find((item) => item.case === CACHE_AUTO.label);
  if (!auto) return [];
  const speedup = paired(
    figures,
    settings,
    (a, b) => a.agentsPerMinute / Math.max(1e-9, b.agentsPerMinute),
  );
  const saving = paired(
    figures,
    settings,
    (a, b) => 1 - a.inputCostUsd / Math.max(1e-12, b.inputCostUsd),
  );
  const { prefixes } = settings.system;
  return [
    {
      name: 'agents per minute',
      target: `cache auto ≥ ${CACHE_TARGETS.agentsPerMinuteRatio}× the agents per minute of cache off`,
      value: speedup,
      measured: `${speedup.toFixed(2)}×`,
      met: speedup >= CACHE_TARGETS.agentsPerMinuteRatio,
    },
    {
      name: 'input cost',
      target: `cache auto's input cost ≥ ${CACHE_TARGETS.inputCostSaving * 100}% lower than cache off's`,
      value: saving,
      measured: `${(saving * 100).toFixed(1)}% lower`,
      met: saving >= CACHE_TARGETS.inputCostSaving,
    },
    {
      name: 'cache writes per prefix',
      target: `cache auto writes each shared prefix ≤ ${CACHE_TARGETS.writesPerPrefix} times`,
      value: auto.writesPerPrefix,
      measured: `${formatValue(auto.writesPerPrefix)} (${formatCount(auto.prefixWriters)} writer(s) of ${prefixes} prefix(es))`,
      met: auto.writesPerPrefix <= CACHE_TARGETS.writesPerPrefix,
    },
  ];
}

const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
const dollars = (value: number | null) =>
  value === null ? '—' : value >= 1 ? `$${value.toFixed(2)}` : `$${value.toFixed(4)}`;
const tokens = (value: number) =>
  value >= 1e6 ? `${(value / 1e6).toFixed(2)} M` : formatCount(Math.round(value));

function grid(summary: CacheFigures[]): string {
  const header = [
    'case',
    'done',
    'failed',
    'wall s',
    'agents/min',
    'requests',
    '429',
    'uncached in',
    'cache read',
    'cache write',
    'input $',
    'input $/agent',
    'no-cache $',
    'ITPM charged',
    '% of limit',
    'prefix writers',
    'cpu ms/call',
    'cores busy',
  ];
  const cells = summary.map((item) => [
    item.case,
    `${formatCount(item.completed)}/${formatCount(item.agents)}`,
    formatCount(item.failed),
    formatValue(item.wallSeconds),
    formatValue(item.agentsPerMinute),
    formatCount(item.requests),
    formatCount(item.rateLimited429),
    tokens(item.inputTokens),
    tokens(item.cacheReadTokens),
    tokens(item.cacheWriteTokens),
    dollars(item.inputCostUsd),
    dollars(item.inputCostPerAgentUsd),
    dollars(item.uncachedInputCostUsd),
    tokens(item.chargedItpm),
    formatValue(item.chargedPercent),
    formatCount(item.prefixWriters),
    formatValue(item.cpuPerCallMs),
    formatValue(item.coresBusy),
  ]);
  return formatGrid(
    header,
    cells,
    Array.from({ length: header.length - 1 }, (_, index) => index + 1),
  );
}

function rowsOf(summary: CacheFigures[], found: CacheCheck[]): BenchRow[] {
  const rows: BenchRow[] = [];
  const add = (name: string, metric: string, value: number | null, unit: string, note?: string) => {
    if (value === null || !Number.isFinite(value)) return;
    rows.push({ part: 'cache', case: name, metric, value, unit, ...(note ? { note } : {}) });
  };
  for (const item of summary) {
    add(item.case, 'agents per minute', item.agentsPerMinute, 'agents/min');
    add(item.case, 'completed agents', item.completed, 'agents');
    add(item.case, 'failed agents', item.failed, 'agents');
    add(item.case, 'wall time', item.wallSeconds, 's');
    add(item.case, 'requests', item.requests, 'requests');
    add(item.case, 'requests answered 429', item.rateLimited429, 'requests');
    add(item.case, 'uncached input tokens', item.inputTokens, 'tokens');
    add(item.case, 'cache read tokens', item.cacheReadTokens, 'tokens');
    add(item.case, 'cache write tokens', item.cacheWriteTokens, 'tokens');
    add(item.case, 'input cost', item.inputCostUsd, 'USD');
    add(item.case, 'input cost per completed agent', item.inputCostPerAgentUsd, 'USD');
    add(item.case, 'input tokens charged to the limit', item.chargedItpm, 'tokens/min');
    add(item.case, 'agents that wrote a shared prefix', item.prefixWriters, 'agents');
    add(item.case, 'cpu per provider call', item.cpuPerCallMs, 'ms');
    add(item.case, 'model cpu per provider call', item.modelCpuPerCallMs, 'ms');
    add(item.case, 'cores busy (measuring process and model)', item.coresBusy, 'cores');
  }
  for (const check of found) {
    const unit =
      check.name === 'input cost'
        ? 'fraction lower'
        : check.name === 'agents per minute'
          ? '×'
          : 'writes/prefix';
    add(
      'cache auto vs off',
      check.name,
      check.value,
      unit,
      `target ${check.target}: ${verdict(check.met)}`,
    );
  }
  return rows;
}

/** cache auto against the SDK loop, beside the targets: no target of its own. */
function besideLines(summary: CacheFigures[]): string[] {
  const auto = summary.find((item) => item.case === CACHE_AUTO.label);
  const loop = summary.find((item) => item.case === SDK_LOOP.label);
  if (!auto || !loop) return [];
  const perAgent =
    auto.inputCostPerAgentUsd !== null && loop.inputCostPerAgentUsd !== null
      ? `, input cost per completed agent ${((1 - auto.inputCostPerAgentUsd / loop.inputCostPerAgentUsd) * 100).toFixed(1)}% lower`
      : '';
  return [
    `beside (no target): cache auto / sdk-loop agents per minute ${(auto.agentsPerMinute / Math.max(1e-9, loop.agentsPerMinute)).toFixed(2)}×${perAgent}; ` +
      `sdk-loop completed ${formatCount(loop.completed)} of ${formatCount(loop.agents)}`,
  ];
}

export function cacheReport(input: {
  settings: CachePartSettings;
  limits: CacheLimits;
  runs: CacheRun[];
  startFailures: string[];
}): PartReport {
  const { settings, limits, runs } = input;
  const { scenario, concurrency, system, options } = settings;
  const price = inputPrice();
  const figures = runs.map((item) => figuresOf(item, settings, limits));
  const summary = CACHE_CASES.flatMap((item) => {
    const of = figures.filter((figure) => figure.case === item.label);
    return of.length === 0 ? [] : [medians(of)];
  });
  const found = checks(figures, summary, settings);
  const model = [
    `responses start after ${scenario.responseDelayMs ?? 0} ms (headers and message_start; ttft ${scenario.ttftMs} ms after that)`,
    `ITPM ${limits.itpm}${limits.probeInputTokens === null ? ' (given)' : ` (from a probe agent's ${limits.probeInputTokens} uncached input tokens)`}`,
    limits.rpm > 0 ? `RPM ${limits.rpm}` : 'no RPM limit',
    ...(limits.otpm > 0 ? [`OTPM ${limits.otpm}`] : []),
    `${limits.bucketSeconds} s buckets`,
    'caching on',
  ].join(', ');
  const header = [
    `${scenario.agents} agents × ${scenario.steps} steps at concurrency ${concurrency}, each given a ` +
      `${SYSTEM_TOKENS}-token system prompt (${system.prefixes} distinct); cpu ${scenario.cpuMs} ms/tool call`,
    `scripted model (a fresh process per case): ${model}; model ${CACHE_MODEL}, input at $${price.inputPerMTok}/MTok ` +
      `(cache reads 0.1×, 5-minute writes 1.25×); transport ${options.transport}, governor ${options.governor ? 'on' : 'off'}, ` +
      `${options.maxRetries} retries; medians of ${settings.rounds} round(s), the cases' order rotated each round`,
  ];
  const failures = runs
    .filter((item) => item.measurement.failureReasons.length > 0)
    .map(
      (item) =>
        `not complete: ${item.label} (round ${item.round + 1}): ${item.measurement.failureReasons.join(' | ')}`,
    );
  const table = [
    ...header,
    '',
    grid(summary),
    '',
    ...found.map(
      (check) => `target: ${check.target}; measured ${check.measured}: ${verdict(check.met)}`,
    ),
    ...besideLines(summary),
    ...(failures.length > 0 ? ['', ...failures.slice(0, 10)] : []),
  ].join('\n');
  return {
    rows: rowsOf(summary, found),
    table,
    data: {
      scenario,
      concurrency,
      systemTokens: SYSTEM_TOKENS,
      prefixes: system.prefixes,
      rounds: settings.rounds,
      model: CACHE_MODEL,
      inputPerMTok: price.inputPerMTok,
      transport: options.transport,
      governor: options.governor,
      maxRetries: options.maxRetries,
      limits,
      targets: CACHE_TARGETS,
      summary,
      checks: found,
      figures,
      startFailures: input.startFailures,
      measurements: runs,
    },
  };
}
