/**
 * The `governor` part's scenarios: what each one runs, against which scripted model, and the
 * target of issue 27 (or 13) it is checked against. Plain data, so `--scenarios` can name them
 * and the report can print them. The cases of a scenario are the governor on and off; the
 * `rate-limit` scenario adds the governor told the limits.
 */
import type { GovernorOptions } from '../../src/shared/governor/types.js';
import type { ScriptedModelOptions } from '../../src/testing/index.js';

export const GOVERNOR_SCENARIO_NAMES = [
  'rate-limit',
  'random-529-1',
  'random-529-5',
  'random-529-20',
  'max-streams',
  'cold-start',
  'unreachable',
] as const;

export type GovernorScenarioName = (typeof GOVERNOR_SCENARIO_NAMES)[number];

/** Tasks, provider requests per task, tasks in flight at once, and the model's time to first token. */
export interface Workload {
  agents: number;
  steps: number;
  concurrency: number;
  ttftMs: number;
}

/** What a scenario's cases are held to. */
export type ScenarioTarget =
  /** The governor's wall time at most `maxRatio` × the wall time without it; with `allComplete`, no task of the governor's failed. */
  | { kind: 'ratio'; maxRatio: number; allComplete: boolean }
  /** Issue 13's: the governor sustains the binding limit, with few 429s and no failed task. */
  | { kind: 'binding'; bindingPercent: number; rateLimitedPercent: number; failed: number }
  /** `cohort batch` exits within `seconds` with `messages` distinct error message(s). */
  | { kind: 'exit'; seconds: number; messages: number }
  /** Measured and reported, held to nothing. */
  | { kind: 'none' };

export interface EngineCase {
  label: string;
  governor: GovernorOptions;
}

export const GOVERNOR_ON: EngineCase = { label: 'governor', governor: {} };
export const GOVERNOR_OFF: EngineCase = { label: 'no governor', governor: { enabled: false } };

/** A scenario whose cases run agents on an engine in a measuring process. */
export interface EngineScenario {
  name: Exclude<GovernorScenarioName, 'unreachable'>;
  /** What it stands for, in one line. */
  summary: string;
  workload: Workload;
  /** The scripted model beyond the workload's ttft (rate limits, overload); `seed` is the round's. */
  model: Omit<ScriptedModelOptions, 'ttftMs' | 'seed'>;
  target: ScenarioTarget;
}

/** The target of issue 27 for random 529s and the cold burst. */
const NO_SLOWER = { kind: 'ratio', maxRatio: 1.1, allComplete: true } as const;

/** The measurement of random overload: 1,000 one-step tasks at concurrency 100. */
const RANDOM_529_WORKLOAD: Workload = { agents: 1000, steps: 1, concurrency: 100, ttftMs: 200 };

function random529(percent: 1 | 5 | 20): EngineScenario {
  return {
    name: `random-529-${percent}`,
    summary: `${percent}% of requests answered 529 at random, without retry-after, whatever the load`,
    workload: RANDOM_529_WORKLOAD,
    model: { overloadProbability: percent / 100 },
    target: NO_SLOWER,
  };
}

/**
 * The engine scenarios but `rate-limit`, whose model limits are set from a probe at run time
 * (governor.ts). `max-streams`: 48 streams of ~0.2 s serve ~240 requests a second, and twice
 * as many tasks in flight overload it. `cold-start`: no rate-limit headers, a fresh engine.
 */
export const OVERLOAD_SCENARIOS: EngineScenario[] = [
  random529(1),
  random529(5),
  random529(20),
  {
    name: 'max-streams',
    summary:
      'a server past 48 responses at once answers 529 at once: overload that depends on load',
    workload: { agents: 1000, steps: 1, concurrency: 100, ttftMs: 200 },
    model: { maxStreams: 48 },
    target: { kind: 'none' },
  },
  {
    name: 'cold-start',
    summary: 'a cold burst on a fresh engine against a server that sends no rate-limit headers',
    workload: { agents: 400, steps: 1, concurrency: 200, ttftMs: 200 },
    model: {},
    target: NO_SLOWER,
  },
];

/** The binding input-token limit of issue 13 (its model limits come from a probe, governor.ts). */
export const RATE_LIMIT_SCENARIO = {
  name: 'rate-limit',
  summary: 'a binding input-token limit, learned from the anthropic-ratelimit-* headers',
  workload: { agents: 1000, steps: 3, concurrency: 200, ttftMs: 200 },
  bucketSeconds: 10,
  target: { kind: 'binding', bindingPercent: 95, rateLimitedPercent: 1, failed: 0 },
} as const;

/** A dead provider: `cohort batch`, the real CLI, against a closed port and a refusing key. */
export const UNREACHABLE_SCENARIO = {
  name: 'unreachable',
  summary:
    '`cohort batch` against a closed port, and against a server that answers 401 to every request',
  /** `cohort batch`'s own default concurrency; steps and ttft do not apply. */
  workload: { agents: 5000, steps: 1, concurrency: 50, ttftMs: 0 },
  /** A run still going after this long is stopped and reported as "> cap". */
  capSeconds: 60,
  target: { kind: 'exit', seconds: 10, messages: 1 },
} as const;

/** A one-line description of a target, for the table. */
export function describeTarget(target: ScenarioTarget): string {
  switch (target.kind) {
    case 'ratio':
      return `on/off ≤ ${target.maxRatio}×${target.allComplete ? ', all complete' : ''}`;
    case 'binding':
      return `≥ ${target.bindingPercent}% of the limit, ≤ ${target.rateLimitedPercent}% 429, ${target.failed} failed`;
    case 'exit':
      return `exits ≤ ${target.seconds} s, ${target.messages} message`;
    case 'none':
      return '—';
  }
}
