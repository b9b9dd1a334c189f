/**
 * What the `governor` part sends its processes and what they answer, as plain data: a case for a
 * fresh measuring process (engine-process.ts), and the report of the model's own process.
 */
import type {
  GovernorOptions,
  GovernorState,
  LimitState,
} from '../../src/shared/governor/types.js';
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import type { AgentOutcome } from '../../src/shared/result.js';
import type { ScriptedModelStats } from '../../src/testing/index.js';
import type { Scenario } from '../common/scenario.js';

/** Run `scenario.agents` cohort agents, `concurrency` at a time, with these governor options. */
export interface GovernorJob {
  kind: 'governor';
  /** The case's name, for logs. */
  label: string;
  governor: GovernorOptions;
  concurrency: number;
  scenario: Scenario;
  provider: Partial<ProviderConfig>;
  threads?: number | undefined;
  /** After this long, the agents still running are cancelled and the case is `capped`. */
  capMs: number;
}

/** The governor's state of the run's one key, sampled once a second. */
export interface GovernorSample {
  /** Epoch ms. */
  at: number;
  /** Requests the governor lets be in flight now (its adaptive window). */
  limit: number;
  inFlight: number;
  queued: number;
  paused: boolean;
  requests?: LimitState;
  inputTokens?: LimitState;
}

export interface GovernorMeasurement {
  label: string;
  concurrency: number;
  agents: number;
  outcomes: Record<AgentOutcome, number>;
  /** Up to five distinct reasons of agents that did not complete. */
  failureReasons: string[];
  /** Engine start (pool warm-up) before the first agent, ms. */
  startMs: number;
  /** Epoch ms: the first agent started, the last agent started, the last agent settled. */
  firstStartAt: number;
  lastStartAt: number;
  endAt: number;
  /** The case ran into `capMs`: the agents still running then were cancelled. */
  capped: boolean;
  /** HTTP requests to the provider, retries included, as the agents counted them. */
  providerCalls: number;
  /** CPU time of the measuring process (every thread), first agent → last result, ms. */
  processCpuMs: number;
  inputTokens: number;
  /**
   * Mean input tokens the provider reported for a step, by step (index 0 is step 1). A request's
   * input grows with its step, and every retry of a step sends the same input.
   */
  inputTokensByStep: number[];
  /** `provider-retry` events by code: retries the SDK or the governor made. */
  retries: { rateLimited: number; overloaded: number };
  samples: GovernorSample[];
  /** The governor's state when the last agent settled; absent when it was off. */
  finalState?: GovernorState;
}

/** What the model's process saw: every admitted request and every 429, with its time. */
export interface ModelReport {
  /** Per admitted request (it passed the rate limits): [epoch ms, turn]; turn 0 is step 1. */
  admissions: [number, number][];
  /** 429 answers, polled every 100 ms: [epoch ms, answers since the previous poll]. */
  refusals: [number, number][];
  stats: ScriptedModelStats;
}
