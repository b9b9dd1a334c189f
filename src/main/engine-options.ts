import type { Context, TracerProvider } from '@opentelemetry/api';
import type { LogPolicy } from '../shared/agent-log.js';
import type { Budget, PriceTable } from '../shared/budget.js';
import type { AgentEvent } from '../shared/events.js';
import type { GovernorOptions } from '../shared/governor/types.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import type { AnyTool } from '../shared/tools/types.js';
import type { PoolOptions } from './runners/local/pool.js';
import type { QueueOptions } from './runners/queue/options.js';
import type { TreeLedger } from './tree-budget.js';

// What an engine and each of its spawns are given: the library's option types.

export interface EngineOptions extends PoolOptions {
  /** Provider settings; unset fields take the defaults. The API key is read from the env. */
  provider?: Partial<ProviderConfig>;
  /**
   * The rate-limit governor every provider request of every thread passes through: starting
   * limits (`rpm`, `itpm`, `otpm`; the provider's headers take over), a per-key
   * `maxConcurrency`, and `enabled: false` to turn it off. See docs/GOVERNOR.md.
   */
  governor?: GovernorOptions;
  /** Root folder of agents' log folders; default: a fresh folder under the OS temp dir. */
  logDir?: string;
  /**
   * Which agents' folders outlive them (default `all`): `failed` keeps only failed agents',
   * `none` keeps none. A result names its folder only when the folder is kept.
   */
  logs?: LogPolicy;
  /** Steps a child may take (default 50). */
  maxSteps?: number;
  /** Characters of a reply kept in `AgentResult.text` (default 32,000). */
  replyCap?: number;
  /** Depth below which agents may spawn (default 1: the root spawns, children do not). */
  maxDepth?: number;
  /** Read-only folder the workspace tools read from. */
  workspace?: string;
  /** ES module paths of tool modules given to every agent. */
  toolModules?: string[];
  /**
   * How long each tool module may take to import at start-up, in ms (default 10 s). The check
   * imports them in a throw-away worker: a module that never finishes importing is reported.
   */
  toolImportTimeoutMs?: number;
  /** Lifetime ceiling of async agents in ms (default one hour); sessions may override it. */
  ceilingMs?: number;
  /**
   * Plain functions registered on the main thread. The root calls them directly; children in
   * workers call them through the host bridge.
   */
  hostTools?: AnyTool[];
  /**
   * The folder of agent files (`NAME.md`, docs/AGENTS.md). Default: `.cohort/agents` under the
   * workspace, when it exists. Every file is checked at start; a malformed one stops the start.
   */
  agentsDir?: string;
  /** The budget of every child, field by field under its agent file's and its spawn's. */
  budget?: Budget;
  /** Prices by model (dollars per million tokens) over the built-in table, for `costUsd`. */
  prices?: PriceTable;
  /**
   * Traces every agent, provider attempt and tool call into this OpenTelemetry provider
   * (docs/TRACING.md). Unset, nothing is recorded.
   */
  tracerProvider?: TracerProvider;
  /**
   * Runs every child as a job on a BullMQ queue in Redis, taken by `cohort worker` processes on
   * any number of machines, instead of on this machine's threads (docs/SCALE-OUT.md).
   */
  queue?: QueueOptions;
}

/** What one child is asked to do. */
export interface AgentOptions {
  prompt: string;
  title?: string;
  system?: string;
  maxSteps?: number;
  /** Names of the tools to give it; default: all it may have. */
  tools?: string[];
  /** Model for this child; default: the engine's. */
  model?: string;
  /** A named agent (an agent file): its fields are the defaults of this spawn's. */
  agent?: string;
  /**
   * A JSON Schema the reply's `result` must match (a typed reply): the result then carries the
   * parsed `value`; replies that do not match are refused, and a few refusals fail it `bad_reply`.
   */
  outputSchema?: Record<string, unknown>;
  /** This child's limits, field by field over its agent file's and the engine's. */
  budget?: Budget;
  /** Cancels the child (reason `user`, or the signal's reason when it is a cancel reason). */
  signal?: AbortSignal;
  /** Live events of the child. */
  onEvent?: (event: AgentEvent) => void;
  /** Stream text deltas as events (default: only when `onEvent` is given). */
  streamText?: boolean;
  /**
   * The event types `onEvent` wants (default: all). Each event of a child crosses a thread, so
   * a listener that only counts retries (`['provider-retry', 'step-end']`) costs far less.
   */
  eventTypes?: AgentEvent['type'][];
}

/** Spawn-time details the session fills in. */
export interface SpawnContext {
  depth?: number;
  generation?: number;
  provider?: ProviderConfig;
  /** How the parent started it, for its trace. */
  mode?: 'sync' | 'async';
  /** The trace context to hang its `invoke_agent` span under (default: the active one). */
  traceParent?: Context;
  /** The tree budget its parent belongs to. */
  tree?: TreeLedger;
  /**
   * Its queue job's id, in queue mode (default: its agent id): a batch derives it from its task,
   * so a rerun's add of a job still in Redis is the same job, not a second run.
   */
  jobId?: string;
}
