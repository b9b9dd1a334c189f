import type { Budget, PriceTable } from './budget.js';
import type { LogPolicy } from './journal/policy.js';
import type { CacheSettings } from './provider/cache.js';
import type { ProviderConfig } from './provider/config.js';

/**
 * Everything a child agent needs, as plain data: it crosses to a worker thread as it is.
 * Never holds a secret.
 */
export interface ChildSpec {
  id: string;
  title: string;
  prompt: string;
  /** Text its siblings share, sent before the prompt in its first message (docs/CACHING.md). */
  preamble?: string;
  /** Its prompt-cache breakpoints and its shared prefix's lifetime; unset sends none. */
  cache?: CacheSettings;
  /** The caller's system prompt; the delivery-discipline block is appended to it. */
  system?: string;
  /** 1 for a child of the root. */
  depth: number;
  maxDepth: number;
  generation: number;
  provider: ProviderConfig;
  maxSteps: number;
  replyCap: number;
  /** The run folder whose journal it writes to, on the thread's segment (docs/LOGS.md). */
  logDir: string;
  /**
   * Whether its journal records outlive the run (default `all`). When they do not, they go when
   * the engine closes, and the result names no folder.
   */
  logs?: LogPolicy;
  workspace?: string;
  /** ES module paths of tool modules. */
  toolModules: string[];
  /** Names of the tools to give the child; unset gives it every tool it may have. */
  tools?: string[];
  /** Whether to stream text deltas as events (costly across threads for thousands of agents). */
  streamText: boolean;
  /**
   * Whether anyone listens to this child's events. When false the worker sends only what main
   * needs (tool calls and results, slim) and the result: port messages cost CPU at scale.
   */
  liveEvents?: boolean;
  /**
   * With `liveEvents`, only these event types are sent (default: all). A listener that only
   * counts retries should not pay a port message for every step and tool call.
   */
  eventTypes?: string[];
  /**
   * Whether the engine's rate-limit governor admits this child's provider requests: it then asks
   * main over its worker's uplink before each attempt.
   */
  governed?: { patienceMs: number };
  /**
   * Its model calls go through Message Batches: each is sent up the uplink to main's batch
   * collector instead of to the provider (`lane: 'batches'`, docs/LANES.md). `auto`: the same,
   * but main may send a step back to go in real time (its deadline nears), so the child is also
   * governed. Unset: realtime.
   */
  lane?: 'batches' | 'auto';
  /** The `auto` lane: its deadline (epoch ms), which its own agents inherit. */
  deadline?: number;
  /**
   * How long one of its requests may keep being refused (429/529) before it fails, in ms: its
   * spawn's, its agent file's, its parent's or its engine's `governor.patienceMs`. Unset, the
   * governor that admits it decides (`governed.patienceMs`; in queue mode, the worker's).
   */
  patienceMs?: number;
  /**
   * Resume after the worker it ran on died: from its records in these journal segments (the
   * threads it ran on), or from these transcript lines (a queue job's checkpoint).
   */
  resume?: { segments: string[] } | { lines: string };
  /** Its run: 0 for the first, one more for each resume (journal records carry it). */
  inc?: number;
  /** The caller's name for the spawn (a batch's task id), journaled in its start's meta. */
  key?: string;
  /**
   * Who spawned it (an agent id, or `root` for a session's root), the tool_use id of the call
   * that did, and how: journaled in its start's meta, so a resumed run re-attaches each child to
   * its parent instead of spawning it again.
   */
  parent?: string;
  call?: string;
  mode?: 'sync' | 'async';
  /**
   * The time limit of a tool call whose tool sets none (`timeoutMs`), in ms: the engine's
   * `toolTimeoutMs`. Unset: ten minutes (`DEFAULT_TOOL_TIMEOUT_MS`).
   */
  toolTimeoutMs?: number;
  /** Names of host tools registered on the main thread, reached through the host bridge. */
  hostTools?: HostToolInfo[];
  /** The agent file it was made from (`agent: NAME`), for its meta and its trace. */
  agentName?: string;
  /** The named agents a child that may spawn can pick from, for its `agent` tool's description. */
  agents?: AgentSummary[];
  /** A JSON Schema the reply's `result` must match: a typed reply (docs/AGENTS.md). */
  outputSchema?: Record<string, unknown>;
  /** Its own limits; `tree` is handled on main, which says when a tree budget is spent. */
  budget?: Budget;
  /**
   * It belongs to a tree budget held on main: it reports each step's spend over the uplink, and
   * main tells it when the tree is spent.
   */
  inTree?: boolean;
  /** Price overrides over the built-in table (only when the engine was given some). */
  prices?: PriceTable;
  /** Its spans are recorded and replayed on main (the engine has a tracer provider). */
  traced?: boolean;
  /**
   * Every committed transcript write is also sent on the uplink (`checkpoint`), for a step
   * checkpoint held elsewhere (queue mode keeps it in Redis).
   */
  checkpoint?: boolean;
}

/** A named agent as a spawning agent's `agent` tool lists it. */
export interface AgentSummary {
  name: string;
  description: string;
}

/** How many replies that do not match `outputSchema` a child may make before it fails. */
export const MAX_BAD_REPLIES = 3;

/** A host tool as the child sees it: its advertisement, without its function. */
export interface HostToolInfo {
  name: string;
  description: string;
  inputSchema: { type: 'object'; [keyword: string]: unknown };
  parallel?: boolean;
}

export const DEFAULT_MAX_STEPS = 50;

/** Depth below which agents may spawn by default: the root spawns, its children do not. */
export const DEFAULT_MAX_DEPTH = 1;
