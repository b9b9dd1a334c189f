/**
 * What the bench asks a fresh measuring process to do, and what it answers: plain data that
 * crosses the IPC channel of `child_process.fork`.
 */
import type { CacheMode } from '../../src/shared/provider/cache.js';
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import type { TransportName } from '../../src/shared/provider/transport/types.js';
import type { AgentOutcome } from '../../src/shared/result.js';
import type { Scenario } from '../common/scenario.js';
import type { Spread } from '../common/stats.js';
import type { GovernorJob, GovernorMeasurement } from '../governor/governor-jobs.js';
import type { EngineName } from './engines.js';

/** Run `scenario.agents` agents on `engine` with `concurrency` in flight. */
export interface ConcurrencyJob {
  kind: 'concurrency';
  engine: EngineName;
  concurrency: number;
  scenario: Scenario;
  provider: Partial<ProviderConfig>;
  threads?: number | undefined;
  /** Turns the engine's rate-limit governor off (cohort, thread-per-child). */
  governorOff?: boolean;
  /** Traces cohort's agents into a tracer provider whose exporter counts and drops spans. */
  tracing?: boolean;
  /** A long system prompt for every agent; unset, the agents have none of their own. */
  system?: SharedSystem;
  /** cohort's prompt-cache breakpoints (`EngineSetup.cache`); default: the engine's. */
  cache?: CacheMode;
}

/** The long system prompts of a job's agents (scenario.ts `sharedSystemPrompt`). */
export interface SharedSystem {
  /** Characters of each prompt. */
  chars: number;
  /** Distinct prompts: agent `i` is given prompt `i mod prefixes`. */
  prefixes: number;
}

export interface ConcurrencyMeasurement {
  engine: EngineName;
  concurrency: number;
  agents: number;
  /** Worker threads the engine ran (0 for in-process). */
  threads: number;
  outcomes: Record<AgentOutcome, number>;
  /** Up to five distinct reasons of agents that did not complete. */
  failureReasons: string[];
  /** Engine start (pool warm-up) before the first agent, ms. */
  startMs: number;
  /** First agent started → last agent settled, ms. */
  makespanMs: number;
  /** HTTP requests to the provider, retries included. */
  providerCalls: number;
  steps: number;
  /** Input that neither read from nor wrote to the prompt cache. */
  inputTokens: number;
  outputTokens: number;
  /** Input read back from, and written to, the prompt cache. */
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /**
   * With a `system`: agents whose cache writes reached 90% of the shared prompt's tokens, that
   * is, agents that wrote a shared prefix themselves instead of reading it.
   */
  prefixWriters?: number;
  /** Dollars the agents' results report (`usage.costUsd`); null when none has a price. */
  costUsd: number | null;
  /** Per agent, start → result, ms. */
  latencyMs: Spread;
  /** 429 answers: retried ones (provider-retry events) plus final ones (failed results). */
  rateLimited: number;
  /** 529 answers, counted the same way. */
  overloaded: number;
  eventLoopDelayMs: { p50: number; p99: number; max: number; samples: number };
  /** RSS just before the engine started, bytes. */
  baselineRssBytes: number;
  peakRssBytes: number;
  maxLive: number;
  /** CPU time of the measuring process (every thread), first agent → last result, ms. */
  processCpuMs: number;
  /** CPU time of the scripted model's process over the case, ms (the orchestrator adds it). */
  modelCpuMs?: number | null;
}

/**
 * Spawn `children` children that park in a slow provider call, `wave` at a time, each wave
 * waiting for its children's first request; measure, then close the engine (cancels them all).
 */
export interface SpawnJob {
  kind: 'spawn';
  engine: 'cohort' | 'thread-per-child';
  children: number;
  wave: number;
  provider: Partial<ProviderConfig>;
  threads?: number | undefined;
}

export interface SpawnMeasurement {
  engine: 'cohort' | 'thread-per-child';
  children: number;
  wave: number;
  threads: number;
  startMs: number;
  /** Spawn call → the child's `step-start` event (emitted right before its first request), ms. */
  firstRequestMs: Spread;
  /** First spawn → last child at its first request, ms. */
  spawnAllMs: number;
  baselineRssBytes: number;
  /** RSS after start and warm-up, before the measured children, bytes. */
  warmRssBytes: number;
  /** RSS with every measured child live (median of samples over a second), bytes. */
  liveRssBytes: number;
  peakRssBytes: number;
  /** engine.close() with every child live, ms. */
  closeMs: number;
  outcomes: Record<AgentOutcome, number>;
}

/**
 * Send `calls` streamed Messages requests through one transport, `concurrency` in flight, after
 * `warmUp` calls that are not measured; read every stream to its end.
 */
export interface TransportJob {
  kind: 'transport';
  transport: TransportName;
  calls: number;
  concurrency: number;
  warmUp: number;
  provider: Partial<ProviderConfig>;
}

export interface TransportMeasurement {
  transport: TransportName;
  calls: number;
  concurrency: number;
  /** Calls whose stream ended with `message_stop`. */
  completed: number;
  /** Up to five distinct reasons of calls that did not. */
  failureReasons: string[];
  /** Stream events read, over every measured call. */
  events: number;
  /** First measured call → last one settled, ms. */
  makespanMs: number;
  /** Per call, send → stream read to its end, ms. */
  latencyMs: Spread;
  /** CPU time of the measuring process over the measured calls, ms. */
  processCpuMs: number;
  /** CPU time of the scripted model's process over the case, ms (the orchestrator adds it). */
  modelCpuMs?: number | null;
}

export type Job = ConcurrencyJob | SpawnJob | GovernorJob | TransportJob;
export type JobReply =
  | {
      ok: true;
      measurement:
        | ConcurrencyMeasurement
        | SpawnMeasurement
        | GovernorMeasurement
        | TransportMeasurement;
    }
  | { ok: false; error: string; phase: 'start' | 'measure' };
