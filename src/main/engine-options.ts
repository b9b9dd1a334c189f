import type { Context, TracerProvider } from '@opentelemetry/api';
import type { Budget, PriceTable } from '../shared/budget.js';
import { checkBudget } from '../shared/budget-meter.js';
import { DEFAULT_MAX_DEPTH, DEFAULT_MAX_STEPS } from '../shared/child-spec.js';
import { formatDuration } from '../shared/duration.js';
import { UsageError } from '../shared/errors.js';
import type { AgentEvent } from '../shared/events.js';
import {
  checkGovernorOptions,
  type GovernorOptions,
  PATIENCE_MS,
} from '../shared/governor/options.js';
import { LOG_POLICY } from '../shared/journal/policy.js';
import { DEADLINE, DEFAULT_BATCH_TURNAROUND_MS, LANE, type Lane } from '../shared/lane/lane.js';
import {
  anyString,
  boolean,
  checkedBy,
  custom,
  type Defined,
  durationMs,
  type Fields,
  nested,
  nonEmptyString,
  type OptionsOf,
  oneOf,
  required,
  stringArray,
  wholeNumber,
} from '../shared/option-schema.js';
import { checkPriceTable } from '../shared/prices.js';
import { CACHE_MODES, CACHE_TTLS } from '../shared/provider/cache.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../shared/provider/config.js';
import { TRANSPORT_NAMES } from '../shared/provider/transport/types.js';
import type { MessageParam } from '../shared/provider/types.js';
import { DEFAULT_REPLY_CAP } from '../shared/render.js';
import { checkTool } from '../shared/tools/modules.js';
import { checkOutputSchema, type OutputSchema } from '../shared/tools/output-schema.js';
import { DEFAULT_TOOL_TIMEOUT_MS } from '../shared/tools/tool-timeout.js';
import type { AnyTool } from '../shared/tools/types.js';
import {
  DEFAULT_BATCH_POLL_MS,
  DEFAULT_BATCH_WINDOW_MS,
  type JournaledStep,
} from './lanes/collector-options.js';
import type { McpServerSet } from './mcp/config.js';
import { checkMcpServers } from './mcp/config-check.js';
import {
  DEFAULT_AGENTS_PER_THREAD,
  DEFAULT_CANCEL_GRACE_MS,
  DEFAULT_TOOL_GRACE_MS,
} from './runners/local/defaults.js';
import type { PoolOptions } from './runners/local/pool.js';
import { checkQueueMode, QUEUE_OPTION } from './runners/queue/options.js';
import type { TreeLedger } from './tree-budget.js';

// What an engine and each of its spawns are given: one schema per option set, from which the
// option types and their checks come (src/shared/option-schema.ts). A field's doc comment is the
// option's documentation; its bounds, default and CLI flag are written here once.

/** When a bad agent file is refused: before the engine starts, or at a spawn naming it. */
export type AgentFileCheck = 'start' | 'spawn';
export const AGENT_FILE_CHECKS: readonly AgentFileCheck[] = ['start', 'spawn'];

/** Most steps an agent may be given: far above any real need, far below a runaway bill. */
export const MAX_STEPS_LIMIT = 10_000;

/** How many steps a child may take (default 50); the same bounds hold everywhere it is set. */
export const MAX_STEPS = wholeNumber(1, MAX_STEPS_LIMIT, {
  default: DEFAULT_MAX_STEPS,
  flag: '--max-steps',
  arg: 'N',
  help: `steps the agent may take (default ${DEFAULT_MAX_STEPS})`,
});

/** A model name. */
export const MODEL = nonEmptyString();

/** Prompt-cache breakpoints on every request (docs/CACHING.md): `auto` (default) or `off`. */
export const CACHE = oneOf(CACHE_MODES, CACHE_MODES.join(' or '), {
  flag: '--cache',
  arg: CACHE_MODES.join('|'),
  help: 'prompt-cache breakpoints (default auto: the shared prefix and each\nconversation are written once and read back; off sends none)',
});

/** The shared prefix's cache lifetime after each use: `5m` (default) or `1h`. */
export const CACHE_TTL = oneOf(CACHE_TTLS, CACHE_TTLS.join(' or '), {
  flag: '--cache-ttl',
  arg: CACHE_TTLS.join('|'),
  help: "the shared prefix's cache lifetime (default 5m; 1h for long\nbatches: writes cost 2x instead of 1.25x the input price)",
});

/** Whether `text` is an http:// or https:// URL. */
export function isHttpUrl(text: string): boolean {
  try {
    const { protocol } = new URL(text);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}

/** A Messages API server, as a spawn or a group names one: an http:// or https:// URL. */
export const BASE_URL = custom<string>(
  'an http:// or https:// URL',
  (value) => typeof value === 'string' && isHttpUrl(value),
);

/**
 * An API key given in code: printable ASCII without spaces, as a header value must be. A refusal
 * says what arrived without showing it: a value given as a key may be one.
 */
export const API_KEY = custom<string>(
  'a non-empty string of printable characters without spaces',
  checkedBy(checkApiKey),
);

function checkApiKey(name: string, value: unknown): void {
  if (typeof value === 'string' && /^[\x21-\x7e]+$/.test(value)) return;
  const got =
    typeof value !== 'string'
      ? value === null
        ? 'null'
        : `a value of type ${typeof value}`
      : value === ''
        ? 'an empty string'
        : `a string of ${value.length} characters with a space, a control or a non-ASCII character in it (not shown: it may be a key)`;
  throw new UsageError(
    `Expected \`${name}\` to be a non-empty string of printable characters without spaces, got ${got}`,
  );
}

/**
 * A spawn's or a group's own credentials and server (docs/GROUPS.md): the key its requests carry
 * instead of the environment's, the server they go to, the model. The key never reaches a spec,
 * the journal, a result, an event, a trace or a message; it is redacted wherever it shows up.
 */
export const SPAWN_PROVIDER_FIELDS = {
  /** The API key its requests carry; default: its parent's, else `ANTHROPIC_API_KEY`. */
  apiKey: API_KEY,
  /** The Messages API server (http or https); default: its parent's, else the engine's. */
  baseURL: BASE_URL,
  /** The model; a spawn's own `model` wins over it. */
  model: MODEL,
} as const satisfies Fields;

/** A spawn's or a group's own credentials and server. */
export type SpawnProvider = OptionsOf<typeof SPAWN_PROVIDER_FIELDS>;

/**
 * A child's wall-clock limit, in whole ms from its spawn (queueing for a thread included): past
 * it, it is cancelled at once with reason `timeout` (docs/TOOLS.md, "Time limits").
 */
export const TIMEOUT = durationMs(1, {
  flag: '--timeout',
  arg: 'DURATION',
  help: "each child's wall-clock limit from its spawn (e.g. 30s, 10m); past it\nthe child is cancelled at once, reason timeout",
});

/**
 * What one child is asked to do, in the order `Engine.spawn` checks it (`agent` is checked, and
 * its file's fields filled in, before the rest).
 */
export const AGENT_FIELDS = {
  prompt: required(nonEmptyString()),
  title: nonEmptyString(),
  system: anyString(),
  maxSteps: MAX_STEPS,
  /** Model for this child; default: the engine's. */
  model: MODEL,
  /** Cancels the child (reason `user`, or the signal's reason when it is a cancel reason). */
  signal: custom<AbortSignal>('an AbortSignal', (value) => value instanceof AbortSignal),
  /** Live events of the child. */
  onEvent: custom<(event: AgentEvent) => void>(
    'a function',
    (value) => typeof value === 'function',
  ),
  /** Stream text deltas as events (default: only when `onEvent` is given). */
  streamText: boolean(),
  /**
   * The event types `onEvent` wants (default: all). Each event of a child crosses a thread, so
   * a listener that only counts retries (`['provider-retry', 'step-end']`) costs far less.
   */
  eventTypes: stringArray<AgentEvent['type']>(),
  /**
   * A JSON Schema the reply's `result` must match (a typed reply): the result then carries the
   * parsed `value`; replies that do not match are refused, and a few refusals fail it `bad_reply`.
   * Or a Standard Schema (zod 4, valibot, arktype) with a JSON Schema conversion: the model is
   * shown, and replies are checked against, the JSON Schema of its input; its own `validate` then
   * parses the value on main, so `value` is its output (transforms and defaults applied) and has
   * its type. A value the JSON Schema passes and `validate` refuses (a refinement JSON Schema
   * cannot state) fails the agent `bad_reply`. See `AgentOptions`.
   */
  outputSchema: custom<OutputSchema>(
    'a JSON Schema (an object) or a Standard Schema (zod, valibot, arktype) with a JSON Schema conversion',
    checkedBy(checkOutputSchema),
  ),
  /** This child's limits, field by field over its agent file's and the engine's. */
  budget: custom<Budget>('an object of budget limits', checkedBy(checkBudget)),
  /**
   * How long one of its provider requests may keep being refused (429/529) before it fails, in
   * ms. Default: its agent file's, else its parent's (an agent's own agents inherit it), else
   * the engine's `governor.patienceMs` (15 minutes). Only requests the governor paces wait.
   */
  patienceMs: PATIENCE_MS,
  /**
   * How its model calls are sent (docs/LANES.md): `realtime`, one streamed request per step, or
   * `batches`, its steps gathered with other agents' into Message Batches at half the price.
   * Default: its group's, else its parent's (an agent's own agents inherit it), else the
   * engine's. `auto`: in batches while the batch turnaround fits before its `deadline`, else
   * realtime (without a deadline, batches). Not in queue mode.
   */
  lane: LANE,
  /**
   * When its work must be done: an ISO 8601 date-time string, epoch ms or a `Date`, in the
   * future. It steers the `auto` lane (docs/LANES.md) and nothing else: it cancels nothing (that
   * is `timeout`).
   */
  deadline: DEADLINE,
  /**
   * Its wall-clock limit in ms, counted from this spawn (time spent queued for a thread
   * included). Past it the child is cancelled at once, with `cancelReason: 'timeout'`: its
   * provider request in flight and its running tools are aborted, and its own agents are
   * cancelled `parent`. Default: its agent file's, else none. Unlike `budget.timeMs`, which gives
   * the agent a last turn to reply, a timeout ends it with no text.
   */
  timeout: TIMEOUT,
  /** Names of the tools to give it; default: all it may have. */
  tools: stringArray(),
  /** Prompt-cache breakpoints (`auto` or `off`); default: its agent file's, else the engine's. */
  cache: CACHE,
  /** Its shared prefix's cache lifetime (`5m` or `1h`); default: its agent file's, else the engine's. */
  cacheTtl: CACHE_TTL,
  /**
   * Text its siblings share (a document, a codebase digest), sent before the prompt in its first
   * message and cached as a prefix of its own: many questions about one document pay for the
   * document once (docs/CACHING.md).
   */
  preamble: nonEmptyString(),
  /** A named agent (an agent file): its fields are the defaults of this spawn's. */
  agent: nonEmptyString(),
  /**
   * The caller's name for this spawn, journaled with it (its start record's `meta.key`): a
   * batch's task id and version, so a later run can find the task's records (docs/LOGS.md).
   */
  key: nonEmptyString(),
  /**
   * Go on from a transcript instead of the prompt: the committed messages of an earlier run of
   * this work, as the journal holds them (`AgentHistory.messages`). It restarts from its last
   * committed step: a response whose calls were not answered runs its tools, not its request;
   * an answered reply ends it at once. The prompt must still be given (it is checked).
   */
  resumeFrom: custom<{ messages: MessageParam[] }>(
    'an object with `messages`, an array of transcript messages',
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      Array.isArray((value as { messages?: unknown }).messages),
  ),
  /**
   * Any value its tools get as `ToolContext.context`: the request, tenant or user it works for.
   * Host tools get the value itself; worker tools (tool modules, workspace tools) a structured
   * clone, so with those it must be clonable (checked at spawn). Default: its group's, else its
   * parent's (an agent's own agents inherit it). Never journaled nor sent to the model.
   */
  context: custom<unknown>('any value', () => true),
  /**
   * Its own credentials and server (`apiKey`, `baseURL`, `model`), field by field over its
   * group's and its parent's (an agent's own agents inherit them). Refused in queue mode.
   */
  provider: nested<SpawnProvider>(SPAWN_PROVIDER_FIELDS),
} as const satisfies Fields;

/**
 * What one child is asked to do. `T` is the type of its result's `value`: a Standard Schema's
 * output type, inferred from `outputSchema`, or, for a JSON Schema, the type the caller names
 * (`engine.run<Risks>(…)`), which only the schema checks.
 */
export type AgentOptions<T = unknown> = Omit<OptionsOf<typeof AGENT_FIELDS>, 'outputSchema'> & {
  /** See `AGENT_FIELDS.outputSchema`. */
  outputSchema?: OutputSchema<T> | undefined;
};

/** Provider settings an engine may be given; unset fields take `DEFAULT_PROVIDER_CONFIG`'s. */
export const PROVIDER_FIELDS = {
  model: {
    ...MODEL,
    flag: '--model',
    arg: 'M',
    help: `model name (default ${DEFAULT_PROVIDER_CONFIG.model}; the built-in model: any)`,
  },
  baseURL: nonEmptyString({
    flag: '--base-url',
    arg: 'URL',
    help: 'a Messages API server (http or https)',
  }),
  maxTokens: wholeNumber(1, undefined, {
    flag: '--max-tokens',
    arg: 'N',
    help: `max_tokens of every request (default ${DEFAULT_PROVIDER_CONFIG.maxTokens})`,
  }),
  maxRetries: wholeNumber(0, 20),
  idleTimeoutMs: durationMs(1, {
    flag: '--idle-timeout',
    arg: 'DURATION',
    help: `wait between two stream events (default ${formatDuration(DEFAULT_PROVIDER_CONFIG.idleTimeoutMs)})`,
  }),
  requestTimeoutMs: durationMs(1, {
    flag: '--request-timeout',
    arg: 'DURATION',
    help: `wait for a response's headers (default ${formatDuration(DEFAULT_PROVIDER_CONFIG.requestTimeoutMs)}), per attempt`,
  }),
  backoffBaseMs: durationMs(0),
  backoffMaxMs: durationMs(0),
  transport: oneOf(TRANSPORT_NAMES, TRANSPORT_NAMES.join(' or '), {
    flag: '--transport',
    arg: TRANSPORT_NAMES.join('|'),
    help: 'how requests travel: undici (default; a keep-alive pool, least\nCPU) or sdk (the official SDK over fetch)',
  }),
  // No upper bound: a pool opens connections only as requests need them.
  connections: wholeNumber(1, undefined, {
    flag: '--connections',
    arg: 'N',
    help: "undici's connections per server per thread (default: as many\nas requests in flight)",
  }),
} as const satisfies Fields;

/** How long a tool module may take to import at start-up before the check gives up on it. */
export const DEFAULT_IMPORT_TIMEOUT_MS = 10_000;

/** Default lifetime ceiling of an async agent: one hour. */
export const DEFAULT_CEILING_MS = 3_600_000;

/** Every engine option, in the order `Engine.start` checks them. */
export const ENGINE_FIELDS = {
  /** Worker threads; default: the machine's available parallelism. */
  threads: wholeNumber(1, 256, {
    flag: '--threads',
    arg: 'N',
    help: 'worker threads (default: one per core)',
  }),
  /** Children one thread runs at once (piscina's concurrentTasksPerWorker). */
  agentsPerThread: wholeNumber(1, undefined, {
    flag: '--agents-per-thread',
    arg: 'N',
    help: `children per thread (default ${DEFAULT_AGENTS_PER_THREAD})`,
  }),
  /**
   * How long a cancelled child may ignore its cancel before its worker is terminated, in ms;
   * twice that when its worker still answers main (busy, not stuck).
   */
  cancelGraceMs: durationMs(0, {
    flag: '--cancel-grace',
    arg: 'DURATION',
    help: `how long a cancelled child may ignore it (default ${formatDuration(DEFAULT_CANCEL_GRACE_MS)}; twice that\nwhen its worker still answers)`,
  }),
  /** How long an idle worker lives, in ms. */
  idleTimeoutMs: durationMs(0),
  /** Per-worker V8 heap limit, in MB: one runaway child cannot take the process down. */
  maxOldGenerationSizeMb: wholeNumber(16, undefined, {
    flag: '--worker-heap-mb',
    arg: 'N',
    help: "each worker's heap limit",
  }),
  /**
   * Crashes of its worker a child may be blamed for (it was running a tool when the worker died)
   * before it settles `failed` instead of resuming (default 3).
   */
  maxCrashes: wholeNumber(1, 100),
  /** Steps a child may take (default 50). */
  maxSteps: MAX_STEPS,
  /** Characters of a reply kept in `AgentResult.text` (default 32,000). */
  replyCap: wholeNumber(100, undefined, { default: DEFAULT_REPLY_CAP }),
  /** Depth below which agents may spawn (default 1: the root spawns, children do not). */
  maxDepth: wholeNumber(0, 8, {
    default: DEFAULT_MAX_DEPTH,
    flag: '--max-depth',
    arg: 'N',
    help: `depth below which agents may spawn (default ${DEFAULT_MAX_DEPTH})`,
  }),
  /** Lifetime ceiling of async agents in ms (default one hour); sessions may override it. */
  ceilingMs: durationMs(1, {
    default: DEFAULT_CEILING_MS,
    flag: '--ceiling',
    arg: 'DURATION',
    help: `lifetime of an async agent (default ${formatDuration(DEFAULT_CEILING_MS)})`,
  }),
  /**
   * The run's folder: its journal and its reply spills; default: a fresh folder under the OS temp
   * dir. The CLI makes it from `--log-dir ROOT` (the root that holds run folders) and `--run ID`,
   * and lists those flags itself; the flag here names the option in the engine's messages.
   */
  logDir: nonEmptyString({ flag: '--log-dir' }),
  /**
   * Which agents' journal records outlive the run (default `all`): `failed` keeps only failed
   * agents', `none` keeps none; applied at close. A result names `logDir` only when kept.
   */
  logs: { ...LOG_POLICY, help: "which agents' journal records to keep at close" },
  /** Read-only folder the workspace tools read from. */
  workspace: nonEmptyString({
    flag: '--workspace',
    arg: 'DIR',
    help: 'folder read_file/list_files may read (default: none, no file tools)',
  }),
  /** ES module paths of tool modules given to every agent. */
  toolModules: stringArray({
    flag: '--tools',
    arg: 'MODULE',
    help: 'an ES module of tools (repeatable); checked before anything starts',
  }),
  /**
   * How long each tool module may take to import at start-up, in ms (default 10 s). The check
   * imports them in a throw-away worker: a module that never finishes importing is reported.
   */
  toolImportTimeoutMs: durationMs(1, { default: DEFAULT_IMPORT_TIMEOUT_MS }),
  /**
   * How long one tool call may run when its tool sets no `timeoutMs`, in ms (default 10 minutes).
   * Past it the call's signal aborts and the model gets an `is_error` result naming the tool and
   * the limit. The spawn family (`agent`, `agents`, `agent_cancel`) is never timed.
   */
  toolTimeoutMs: durationMs(1, {
    default: DEFAULT_TOOL_TIMEOUT_MS,
    flag: '--tool-timeout',
    arg: 'DURATION',
    help: `how long one tool call may run when its tool sets no timeoutMs\n(default ${formatDuration(DEFAULT_TOOL_TIMEOUT_MS)})`,
  }),
  /**
   * How long past its time limit a tool running in a worker thread may keep that thread from
   * answering main before the thread is terminated, in ms (default 1 s). The agent in that tool
   * fails `tool_timeout`; the thread's other agents resume on another thread from their last
   * committed step.
   */
  toolGraceMs: durationMs(0, {
    default: DEFAULT_TOOL_GRACE_MS,
    flag: '--tool-grace',
    arg: 'DURATION',
    help: `how long a tool past its time limit may block its worker thread\nbefore the thread is terminated (default ${formatDuration(DEFAULT_TOOL_GRACE_MS)})`,
  }),
  /**
   * Plain functions registered on the main thread. The root calls them directly; children in
   * workers call them through the host bridge.
   */
  hostTools: custom<AnyTool[]>('an array of tool definitions', (value, name) => {
    if (!Array.isArray(value)) return false;
    value.forEach((tool, index) => {
      checkTool(tool, `\`${name}[${index}]\``);
    });
    return true;
  }),
  /**
   * MCP servers by name, as the `mcpServers` object of a `.mcp.json` file: each
   * `{command, args?, env?, cwd?}` (stdio) or `{type: 'http', url, headers?}` (Streamable HTTP),
   * with `maxConcurrency?` and `startTimeoutMs?`; `${VAR}` is expanded from the environment.
   * Started once on the main thread before anything runs; their tools are `mcp__NAME__TOOL`
   * (docs/TOOLS.md, "MCP servers").
   */
  mcpServers: custom<McpServerSet>('an object of MCP servers by name', (value, name) => {
    checkMcpServers(value, `\`${name}\``);
    return true;
  }),
  /** `.mcp.json` files whose `mcpServers` join `mcpServers`; a name in two of them is refused. */
  mcpConfig: stringArray({
    flag: '--mcp-config',
    arg: 'FILE',
    help: 'a .mcp.json file of MCP servers (repeatable): started before anything\nruns, their tools offered as mcp__NAME__TOOL',
  }),
  /** Provider settings; unset fields take the defaults. The API key is read from the env. */
  provider: nested<Partial<ProviderConfig>>(PROVIDER_FIELDS),
  /**
   * The rate-limit governor every provider request of every thread passes through: starting
   * limits (`rpm`, `itpm`, `otpm`; the provider's headers take over), a per-key
   * `maxConcurrency`, and `enabled: false` to turn it off. See docs/GOVERNOR.md.
   */
  governor: custom<GovernorOptions>('an object', (value) => {
    checkGovernorOptions(value);
    return true;
  }),
  /**
   * Called with each warning: something the engine could not do and goes on without (the
   * governor's state file is corrupt, or cannot be written). Default: `process.emitWarning`
   * (type `CohortWarning`, the warning's `code`), which Node prints on stderr.
   */
  onWarning: custom<(warning: EngineWarning) => void>(
    'a function',
    (value) => typeof value === 'function',
  ),
  /**
   * Runs every child as a job on a BullMQ queue in Redis, taken by `cohort worker` processes on
   * any number of machines, instead of on this machine's threads (docs/SCALE-OUT.md).
   */
  queue: {
    ...QUEUE_OPTION,
    // What a queue cannot carry depends on other options (`hostTools`, `maxDepth`).
    test: (_value: unknown, _name: string, holder: Readonly<Record<string, unknown>>) => {
      checkQueueMode(holder);
      return true;
    },
  },
  /**
   * The folder of agent files (`NAME.md`, docs/AGENTS.md). Default: `.cohort/agents` under the
   * workspace, when it exists. Every file is checked at start; a malformed one stops the start,
   * or under `agentFileCheck: 'spawn'` only the spawns that name it.
   */
  agentsDir: nonEmptyString({
    flag: '--agents',
    arg: 'DIR',
    help: 'folder of agent files NAME.md (default: .cohort/agents under the\nworkspace, when it exists); run and agent check every file before\nanything starts, batch the ones its tasks name (cohort agents check)',
  }),
  /**
   * When a bad agent file is refused. `start` (default): every file of the folder is checked
   * before the engine starts, used or not, since an agent may name any of them; the first bad
   * one stops the start (an `AgentFolderError`). `spawn`: a bad file stops only the spawns that
   * name it, with its own `FILE:LINE:` message, and the `agent` tool does not offer it; for a
   * program that knows which agents it will spawn (`cohort batch` checks the ones its tasks name).
   */
  agentFileCheck: oneOf(
    AGENT_FILE_CHECKS,
    AGENT_FILE_CHECKS.map((mode) => `\`${mode}\``).join(' or '),
  ),
  /** The budget of every child, field by field under its agent file's and its spawn's. */
  budget: custom<Budget>('an object of budget limits', checkedBy(checkBudget), {
    flag: '--budget',
    arg: 'JSON',
    help: `every child agent's default budget, e.g. '{"usd":0.5,"time":"10m"}'\n(inputTokens, outputTokens, usd, steps, time, tree)`,
  }),
  /**
   * Prompt-cache breakpoints on every request (docs/CACHING.md): `auto` (default) places them at
   * the end of the shared prefix (tools and system) and of each conversation; `off` sends none.
   * A spawn, agent file or task line may set its own.
   */
  cache: CACHE,
  /** The shared prefix's cache lifetime after each use: `5m` (default) or `1h`. */
  cacheTtl: CACHE_TTL,
  /**
   * How every agent's model calls are sent unless a group or spawn says otherwise (default
   * `realtime`; docs/LANES.md). `batches` gathers the steps waiting at once into Message Batches:
   * half the price, answered when a batch ends (minutes to hours). Not with `queue`.
   */
  lane: LANE,
  /**
   * The batches lane: how long the first waiting step waits for others before its batch goes,
   * in ms (default 10 s). A batch goes at once when every agent of the lane is waiting.
   */
  batchWindowMs: durationMs(1, {
    flag: '--batch-window',
    arg: 'DURATION',
    help: `the batches lane: how long to gather waiting steps before a batch goes\n(default ${formatDuration(DEFAULT_BATCH_WINDOW_MS)}; at once when every agent of the lane waits)`,
  }),
  /**
   * The batches lane: the first wait between two polls of a batch, in ms (default 30 s); each
   * poll of the same batch waits longer, up to eight times this.
   */
  batchPollMs: durationMs(1, {
    flag: '--batch-poll',
    arg: 'DURATION',
    help: `the batches lane: the first wait between polls of a batch (default ${formatDuration(DEFAULT_BATCH_POLL_MS)};\nit grows up to eight times that)`,
  }),
  /**
   * The `auto` lane: what a Message Batch is taken to need, from its create to its end, until
   * this engine has seen batches end (default an hour); then the longest of the last ones it saw.
   * A step with a deadline goes into a batch only while this and the window fit before it.
   */
  batchTurnaroundMs: durationMs(1, {
    flag: '--batch-turnaround',
    arg: 'DURATION',
    help: `the auto lane: what a batch is taken to need before one has ended\n(default ${formatDuration(DEFAULT_BATCH_TURNAROUND_MS)}; then what the last ones took)`,
  }),
  /**
   * The batches lane: Message Batches an earlier, killed run of this work created and never read,
   * by the custom id of each request (a `Map`; the run journal's `batch` records hold them). A
   * step whose custom id is among them, sent to the same `endpoint` with the same request (its
   * `digest`), waits on that batch instead of being sent again. `cohort
   * batch` reads them from its earlier runs' journals.
   */
  batchesInFlight: custom<ReadonlyMap<string, JournaledStep>>(
    'a Map of custom ids to {batchId, endpoint, digest}',
    (value) =>
      value instanceof Map &&
      [...value].every(
        ([key, step]) =>
          typeof key === 'string' &&
          typeof step === 'object' &&
          step !== null &&
          typeof step.batchId === 'string' &&
          typeof step.endpoint === 'string' &&
          typeof step.digest === 'string',
      ),
  ),
  /** Prices by model (dollars per million tokens) over the built-in table, for `costUsd`. */
  prices: custom<PriceTable>('an object of model prefixes to prices', checkedBy(checkPriceTable), {
    flag: '--prices',
    arg: 'FILE',
    help: 'a JSON price table over the built-in one, for costUsd:\n{"MODEL-PREFIX":{"inputPerMTok":3,"outputPerMTok":15}}',
  }),
  /**
   * Traces every agent, provider attempt and tool call into this OpenTelemetry provider
   * (docs/TRACING.md). Unset, nothing is recorded.
   */
  tracerProvider: custom<TracerProvider>(
    'an OpenTelemetry TracerProvider',
    (value) => typeof (value as { getTracer?: unknown } | null)?.getTracer === 'function',
  ),
} as const satisfies Fields;

/** Something an engine could not do and went on without, for `onWarning`. */
export interface EngineWarning {
  /**
   * `governor_state`: the governor's state file (`governor.state`). `journal`: the `logs` policy
   * could not be applied to the run's journal at close (its records stay). `batches`: the batches
   * lane met something it went past (a results line for an unknown custom id, a line cut short, a
   * batch it could not cancel).
   */
  code: 'governor_state' | 'journal' | 'batches';
  /** What was expected, what was found, and what the engine does instead. Never an API key. */
  message: string;
}

/** The default `onWarning`: a process warning, which Node prints on stderr. */
export function emitEngineWarning(warning: EngineWarning): void {
  process.emitWarning(warning.message, { type: 'CohortWarning', code: warning.code });
}

/**
 * The engine's `onWarning` (default: a process warning) for the governor's state file, as a
 * function that never throws: a listener's fault must not stop a start or a close.
 */
export function warner(
  onWarning: ((warning: EngineWarning) => void) | undefined,
  code: EngineWarning['code'] = 'governor_state',
): (message: string) => void {
  const listener = onWarning ?? emitEngineWarning;
  return (message) => {
    try {
      listener({ code, message });
    } catch {
      // The warning is lost; the engine goes on.
    }
  };
}

/** What an engine is given. */
export type EngineOptions = OptionsOf<typeof ENGINE_FIELDS>;

// The pool is started with an engine's options (`defined(options)`): the pool's own are among
// them, so a pool option the schema lacks, or with another type, fails the typecheck here.
type Assignable<T extends U, U> = T;
export type EngineOptionsFitThePool = Assignable<Defined<EngineOptions>, PoolOptions>;

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
  /** Its parent's patience (`patienceMs`), which it inherits unless it has its own. */
  patienceMs?: number;
  /** Its parent's or group's lane, which it inherits unless it has its own. */
  lane?: Lane;
  /** Its parent's deadline (epoch ms), which it inherits unless it has its own. */
  deadline?: number;
  /**
   * Its queue job's id, in queue mode (default: its agent id): a batch derives it from its task,
   * so a rerun's add of a job still in Redis is the same job, not a second run.
   */
  jobId?: string;
  /** The agent that spawns it (`root` for a session's root), for its journal record. */
  parent?: string;
  /** The tool_use id of the call that spawns it, for its journal record. */
  callId?: string;
  /**
   * It goes on as the agent `id` of a run that stopped (`Session.resume`): same id, its next run
   * `inc`, from the transcript in `AgentOptions.resumeFrom`.
   */
  resumeOf?: { id: string; inc: number };
  /** Its id, given before it starts (a group's handle of a spawn it queued). */
  id?: string;
  /**
   * What its parent's tools saw as `context` and the key its parent's requests carried: it
   * inherits both unless its options give its own (`context`, `provider.apiKey`).
   */
  inherited?: Carried;
}

/** What a spawn carries beside its spec, to its tools and its provider: never journaled. */
export interface Carried {
  /** The value its tools get as `ToolContext.context`; `undefined` is none. */
  context?: unknown;
  /** The key its provider requests carry; unset, the environment's. */
  apiKey?: string;
}
