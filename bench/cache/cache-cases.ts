/**
 * The `cache` part's cases, targets and shapes, shared by the runner (cache.ts) and the report
 * (cache-report.ts).
 */
import type { CacheMode } from '../../src/shared/provider/cache.js';
import type { BenchOptions } from '../common/options.js';
import type { Scenario } from '../common/scenario.js';
import type { ConcurrencyMeasurement, SharedSystem } from '../engines/jobs.js';

/** The shared system prompt's size, in the scripted model's tokens (4 characters each). */
export const SYSTEM_TOKENS = 20_000;

/**
 * The model name the cases send: the scripted model's own, which the price table prices like
 * the Sonnet line ($3 per million input tokens), so cohort's `costUsd` is set too.
 */
export const CACHE_MODEL = 'cohort-scripted';

/** One case of the part: an engine, and cohort's cache mode. */
export interface CacheCase {
  label: string;
  engine: 'cohort' | 'sdk-loop';
  cache?: CacheMode;
}

export const CACHE_AUTO: CacheCase = {
  label: 'cohort, cache auto',
  engine: 'cohort',
  cache: 'auto',
};
export const CACHE_OFF: CacheCase = { label: 'cohort, cache off', engine: 'cohort', cache: 'off' };
export const SDK_LOOP: CacheCase = { label: 'sdk-loop (no cache_control)', engine: 'sdk-loop' };
export const CACHE_CASES: readonly CacheCase[] = [CACHE_AUTO, CACHE_OFF, SDK_LOOP];

/** What the part runs, from its flags. */
export interface CachePartSettings {
  scenario: Scenario;
  concurrency: number;
  system: SharedSystem;
  bucketSeconds: number;
  rounds: number;
  options: BenchOptions;
}

/** The scripted model's limits of every measured case. */
export interface CacheLimits {
  itpm: number;
  /** 0: none. */
  rpm: number;
  otpm: number;
  bucketSeconds: number;
  /** A probe agent's input tokens, none of them cached; null when `--itpm` was given. */
  probeInputTokens: number | null;
}

/** One case of one round, with the model's CPU over it. */
export interface CacheRun {
  label: string;
  round: number;
  measurement: ConcurrencyMeasurement;
}

/** The targets for cache auto against cache off under the same limit. */
export const CACHE_TARGETS = {
  /** Agents per minute, cache auto / cache off: at least this. */
  agentsPerMinuteRatio: 5,
  /** 1 − input cost of cache auto / of cache off: at least this. */
  inputCostSaving: 0.8,
  /** Agents that wrote a shared prefix, per distinct prefix (cache auto): at most this. */
  writesPerPrefix: 1.05,
} as const;
