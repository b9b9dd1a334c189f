import { mkdirSync, readdirSync, rmdirSync } from 'node:fs';
import path from 'node:path';
import { context as otelContext, type Tracer } from '@opentelemetry/api';
import type { Budget, PriceTable } from '../shared/budget.js';
import { mergeBudgets } from '../shared/budget-meter.js';
import type { ChildSpec, HostToolInfo } from '../shared/child-spec.js';
import { DEFAULT_MAX_DEPTH, DEFAULT_MAX_STEPS } from '../shared/child-spec.js';
import { expected, UsageError } from '../shared/errors.js';
import type { AgentEvent } from '../shared/events.js';
import { Governor } from '../shared/governor/governor.js';
import { newAgentId } from '../shared/ids.js';
import type { LogPolicy } from '../shared/journal/policy.js';
import { transcriptText } from '../shared/journal/reader.js';
import { compactJournal } from '../shared/journal/retention.js';
import { closeJournals } from '../shared/journal/writer.js';
import { DEFAULT_BATCH_TURNAROUND_MS, deadlineMs, type Lane } from '../shared/lane/lane.js';
import { checkOption, defined, durationMs } from '../shared/option-schema.js';
import { priceTable } from '../shared/prices.js';
import {
  type CacheMode,
  type CacheSettings,
  type CacheTtl,
  DEFAULT_CACHE_MODE,
  DEFAULT_CACHE_TTL,
} from '../shared/provider/cache.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../shared/provider/config.js';
import { redactSecrets } from '../shared/redact.js';
import { DEFAULT_REPLY_CAP } from '../shared/render.js';
import type { AgentResult } from '../shared/result.js';
import { jsonOutputSchema } from '../shared/tools/output-schema.js';
import type { AnyTool } from '../shared/tools/types.js';
import type { AgentDefinition } from './agents/definition.js';
import { engineAgents } from './agents/resolve.js';
import { type CarriedRules, carriedOf, privateOf, withServer } from './carried.js';
import {
  agentCheck,
  checkPricedBudget,
  DEFAULT_IMPORT_TIMEOUT_MS,
  type EngineCheck,
  engineTools,
  queueLaneRefusal,
  validateEngineOptions,
} from './engine-check.js';
import {
  type AgentOptions,
  type Carried,
  DEFAULT_CEILING_MS,
  type EngineOptions,
  MODEL,
  type SpawnContext,
  warner,
} from './engine-options.js';
import { type GovernorStateFile, openGovernorState } from './governor-state.js';
import { checkGroup, Group, type GroupEngine, type GroupOptions } from './group.js';
import { HostBridge } from './host-bridge.js';
import type { BatchCollector } from './lanes/batch-collector.js';
import { engineCollector } from './lanes/engine-collector.js';
import { hasMcpServers } from './mcp/config.js';
import type { McpServers } from './mcp/servers.js';
import { defaultLogRoot, runFolderName } from './run-folder.js';
import { type ChildCapabilities, capabilityFlags } from './runners/capabilities.js';
import { type ChildHandle, ChildPool, type PoolStats } from './runners/local/pool.js';
import type { ChildRunner } from './runners/types.js';
import { type Adoption, AgentScope } from './scope.js';
import { eventFilter, SignalWatch } from './signal-watch.js';
import { type SpawnObserver, SpawnObservers, stepEvents, withStepTap } from './spawn-observer.js';
import { spawnStandard } from './standard-output.js';
import { ChildTrace } from './tracing/agent-trace.js';
import { cohortTracer } from './tracing/otel-spans.js';
import { TreeLedger } from './tree-budget.js';

export type {
  AgentOptions,
  EngineOptions,
  EngineWarning,
  SpawnContext,
  SpawnProvider,
} from './engine-options.js';
export { DEFAULT_CEILING_MS } from './engine-options.js';
export type { Group, GroupOptions, GroupState, GroupTotals } from './group.js';

/**
 * The engine: a warm pool of worker threads running child agents, many to a thread.
 * Start it with `Engine.start`, close it with `close()`; the process then exits by itself.
 */
export class Engine {
  readonly logDir: string;
  readonly maxDepth: number;
  /** Where children run: this machine's pool, or the queue (`queue`). */
  readonly #pool: ChildRunner;
  /** Admits every provider request of the engine's agents; unset when turned off. */
  readonly governor: Governor | undefined;
  /** Where the governor keeps what its keys learned (`governor.state`); written at close. */
  readonly #governorState: GovernorStateFile | undefined;
  readonly #options: EngineOptions;
  readonly #hostTools: ReadonlyMap<string, AnyTool>;
  /** The MCP servers, started before the engine, closed after its children. */
  readonly #mcp: McpServers | undefined;
  /**
   * What every spec says of the host tools, the tool modules and the workspace, made once: a
   * spawn used to rebuild them, and a burst of spawns paid for it on main (docs/BENCHMARKS.md,
   * "Spawn burst"). Specs share these arrays; nothing changes them once made.
   */
  readonly #hostToolInfo: HostToolInfo[] | undefined;
  readonly #toolModules: string[];
  readonly #workspace: string | undefined;
  /** The start-up check's result: every spawn passes its `checkAgent`. */
  readonly #check: EngineCheck;
  #provider: ProviderConfig;
  #closing: Promise<void> | undefined;
  /** Whether this engine made `logDir` (and so may remove it when it is left empty). */
  readonly #madeLogDir: boolean;
  /** cohort's tracer from `tracerProvider`; unset, nothing is traced. */
  readonly tracer: Tracer | undefined;
  /** How a spawn's `context` and `provider.apiKey` are checked (worker tools, queue mode). */
  readonly #carriedRules: CarriedRules;
  /** Children spawned and not settled, for `drain`. */
  #live = 0;
  /** Set by `drain`: spawns from outside the engine's agents are refused. */
  #draining: Promise<void> | undefined;
  /** Resolves `drain`'s wait when the last live child settles. */
  #idle: (() => void) | undefined;
  /** Top-level groups with agents queued or running: `drain` and `close` reach them. */
  readonly #busyGroups = new Set<Group>();
  /** What the engine gives its groups (`group`). */
  readonly #groupSide: GroupEngine;
  /** The batches lane's collector, made at the lane's first spawn. */
  #collector: BatchCollector | undefined;

  private constructor(
    options: EngineOptions,
    pool: ChildRunner,
    check: EngineCheck,
    {
      governor,
      state,
      mcp,
    }: {
      governor?: Governor | undefined;
      state?: GovernorStateFile | undefined;
      mcp?: McpServers | undefined;
    },
  ) {
    this.#mcp = mcp;
    this.#options = options;
    this.#pool = pool;
    this.governor = governor;
    this.#governorState = state;
    this.#check = check;
    // An MCP server's tools are host tools: children reach them through their bridges.
    const hostTools = [...(options.hostTools ?? []), ...(mcp?.tools ?? [])];
    this.#hostTools = new Map(hostTools.map((tool) => [tool.name, tool]));
    this.#hostToolInfo = this.#hostTools.size === 0 ? undefined : hostToolInfo(this.#hostTools);
    this.#toolModules = (options.toolModules ?? []).map((modulePath) => path.resolve(modulePath));
    this.#workspace = options.workspace === undefined ? undefined : path.resolve(options.workspace);
    this.#provider = { ...DEFAULT_PROVIDER_CONFIG, ...options.provider };
    this.maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
    this.logDir = options.logDir ?? path.join(defaultLogRoot(), runFolderName());
    this.#madeLogDir = mkdirSync(this.logDir, { recursive: true }) !== undefined;
    this.tracer = options.tracerProvider ? cohortTracer(options.tracerProvider) : undefined;
    this.#carriedRules = {
      workerTools: (options.toolModules ?? []).length > 0 || options.workspace !== undefined,
      queued: options.queue !== undefined,
    };
    this.#groupSide = this.#makeGroupSide();
  }

  /**
   * Starts an engine and waits until its worker threads are warm, or, with `queue`, until Redis
   * answers (its children then run on `cohort worker` processes).
   */
  static async start(
    options: EngineOptions = {},
    /**
     * The MCP servers of `options`, when the caller started them already to check its input
     * (`startMcpServers`, as the CLI does): the engine uses them instead of starting its own, and
     * closes them. Unset, it starts its own.
     */
    started: { mcp?: McpServers | undefined } = {},
  ): Promise<Engine> {
    // Everything is checked before the first worker starts: a bad option never leaves a pool
    // behind to close. The MCP servers start first, once: the check needs their tools' names.
    // From here on, every way out but success closes them: a server left running would keep
    // this process alive, and its own process would outlive it.
    let mcp = started.mcp;
    let pool: ChildRunner | undefined;
    let state: ReturnType<typeof openGovernorState> | undefined;
    try {
      validateEngineOptions(options);
      mcp ??= await startMcpServers(options);
      const check = await checkEngine(options, {}, mcp);
      if (options.queue && options.lane !== undefined && options.lane !== 'realtime') {
        throw queueLaneRefusal(options.lane);
      }
      // In queue mode each worker process has its own governor (docs/SCALE-OUT.md).
      const governed = options.governor?.enabled !== false && !options.queue;
      state = governed
        ? openGovernorState(options.governor?.state, warner(options.onWarning))
        : undefined;
      const governor = governed
        ? new Governor(options.governor, state ? { memory: state } : {})
        : undefined;
      // BullMQ and ioredis are loaded only for a queue: a quarter of a second on every start
      // that does not need them.
      pool = options.queue
        ? new (await import('./runners/queue/producer.js')).QueueRunner(options.queue, {
            cancelGraceMs: options.cancelGraceMs,
          })
        : new ChildPool(defined(options));
      const engine = new Engine(options, pool, check, { governor, state, mcp });
      await pool.warm();
      return engine;
    } catch (error) {
      await Promise.allSettled([pool?.close('shutdown'), state?.close(), mcp?.close()]);
      throw error;
    }
  }

  /** Which agents' journal records the run keeps at close (`logs`). */
  get logPolicy(): LogPolicy | undefined {
    return this.#options.logs;
  }

  /** Whether children run on a queue's workers rather than on this machine. */
  get queued(): boolean {
    return this.#options.queue !== undefined;
  }

  /** The workspace folder, resolved, when there is one. */
  get workspace(): string | undefined {
    return this.#workspace;
  }

  /**
   * `logDir` when it holds anything, else undefined: under `logs: none` (or `failed` with no
   * failure) there is no folder worth pointing to, and close removes the empty one.
   */
  get keptLogDir(): string | undefined {
    try {
      return readdirSync(this.logDir).length > 0 ? this.logDir : undefined;
    } catch {
      return undefined;
    }
  }

  /** Host tools registered on the engine. */
  get hostTools(): AnyTool[] {
    return [...this.#hostTools.values()];
  }

  /** Tool module paths, resolved. */
  get toolModules(): string[] {
    return [...this.#toolModules];
  }

  /** The time limit of a tool call whose tool sets none (`toolTimeoutMs`; unset: 10 minutes). */
  get toolTimeoutMs(): number | undefined {
    return this.#options.toolTimeoutMs;
  }

  get ceilingMs(): number | undefined {
    return this.#options.ceilingMs;
  }

  /** The provider settings children spawned from now on get. */
  get provider(): ProviderConfig {
    return this.#provider;
  }

  /** Changes the model for children spawned afterwards; running ones keep theirs. */
  /**
   * The prompt-cache settings of a spawn with these options (its own or its agent file's), else
   * the engine's, else `auto` with the 5-minute lifetime: the root's when none are given.
   */
  cacheSettings(
    agent: { cache?: CacheMode | undefined; cacheTtl?: CacheTtl | undefined } = {},
  ): CacheSettings {
    return {
      mode: agent.cache ?? this.#options.cache ?? DEFAULT_CACHE_MODE,
      ttl: agent.cacheTtl ?? this.#options.cacheTtl ?? DEFAULT_CACHE_TTL,
    };
  }

  setModel(model: string): void {
    checkOption('model', MODEL, model);
    this.#provider = { ...this.#provider, model };
  }

  /** The price table its agents are priced by: the defaults with the `prices` option over them. */
  get prices(): Readonly<PriceTable> {
    return priceTable(this.#options.prices);
  }

  get liveCount(): number {
    return this.#pool.liveCount;
  }

  get threads(): number {
    return this.#pool.threads;
  }

  /**
   * Counts taken at the child ports: results sent by workers, made on main, delivered, and
   * duplicates dropped. Independent of the guard that makes delivery exactly-once.
   */
  get stats(): PoolStats {
    return this.#pool.stats;
  }

  /** The named agents, from the agent files (`agentsDir`). */
  get agents(): readonly AgentDefinition[] {
    return this.#check.agents;
  }

  /** The tools a task may name in `AgentOptions.tools` (see `EngineCheck.toolNames`). */
  get toolNames(): readonly string[] {
    return this.#check.toolNames;
  }

  /**
   * Throws the UsageError `spawn` would throw for these options for an agent at `depth` (default
   * 1), and otherwise does nothing: the engine's own checks, for a service that checks a request
   * before it accepts it, without running `checkEngine` again.
   */
  checkAgent(options: AgentOptions, depth = 1): void {
    this.#check.checkAgent(options, depth);
  }

  /**
   * Spawns one child and returns its handle at once. Throws a UsageError for options the engine
   * refuses, an unknown tool name among them (`EngineCheck.checkAgent`).
   */
  spawn<T = unknown>(options: AgentOptions<T>, context: SpawnContext = {}): ChildHandle<T> {
    // Draining, the engine starts no agent but its own agents' (their parents are running).
    if (this.#draining && context.parent === undefined) throw drainRefusal();
    // A Standard Schema is converted to JSON Schema here, and parses the result on main.
    const standard = spawnStandard(options, (plain) => this.spawn(plain, context));
    if (standard) return standard;
    const depth = context.depth ?? 1;
    this.#check.checkAgent(options, depth);
    // An agent file's fields are the defaults; the spawn's own fields win.
    const { options: agent, definition } = this.#check.resolve(options);
    const id = context.resumeOf?.id ?? context.id ?? newAgentId();
    const provider = withServer(context.provider ?? this.#provider, agent.provider);
    // Its tools' context and its key travel beside its spec, never in it (`ChildPrivate`).
    const carried = carriedOf(agent, context.inherited, this.#carriedRules);
    const title = spawnTitle(agent);
    const budget = mergeBudgets(this.#options.budget, agent.budget);
    // The model may differ from the one checked at start (`setModel`, a session's provider).
    checkPricedBudget(budget, agent.model ?? provider.model, this.#options.prices);
    // A tree budget of its own starts a ledger under its parent's; else it joins its parent's.
    const tree = budget?.tree
      ? new TreeLedger({ budget, ...(context.tree ? { parent: context.tree } : {}) })
      : context.tree;
    const agents = this.#check.agents;
    const model = agent.model ?? provider.model;
    const trace = this.tracer
      ? new ChildTrace(this.tracer, context.traceParent ?? otelContext.active(), {
          id,
          name: definition?.name ?? title,
          model,
          depth,
          ...(context.mode ? { mode: context.mode } : {}),
        })
      : undefined;
    // Events made on main (`agent-start`, `agent-settle`) are filtered as the worker's are.
    const onEvent = eventFilter(agent.onEvent, agent.eventTypes);
    // An observer that wants each step's usage (the dashboard) has the worker send `step-end`.
    const watchSteps = this.#observers.steps;
    // What main serves the child beside its run (CAPABILITIES); their flags go in its spec.
    const capabilities: ChildCapabilities = {};
    const childProvider =
      agent.model === undefined ? provider : { ...provider, model: agent.model };
    const lane = agent.lane ?? context.lane ?? this.#options.lane ?? 'realtime';
    // An agent's own agents inherit its deadline with its lane.
    const deadline = agent.deadline === undefined ? context.deadline : deadlineMs(agent.deadline);
    if (lane !== 'realtime') {
      // The batches lane is not paced by the real-time limits: its calls never reach the governor.
      // `auto` without a deadline is the batches lane: nothing hurries it.
      capabilities.lane = {
        collector: this.#batchCollector(lane),
        provider: childProvider,
        apiKey: carried?.apiKey,
        name: agent.key ?? id,
        ...(lane === 'auto' && deadline !== undefined ? { deadline } : {}),
      };
    }
    // A step of the `auto` lane may go in real time after all: it is governed as one.
    if ((lane === 'realtime' || capabilities.lane?.deadline !== undefined) && this.governor) {
      capabilities.governor = this.governor;
    }
    if (tree) capabilities.tree = tree;
    if (trace) capabilities.trace = trace;
    // Unset fields are left out: the spec crosses threads (and queues) as it is.
    const spec: ChildSpec = defined({
      id,
      title,
      prompt: agent.prompt,
      depth,
      maxDepth: this.maxDepth,
      generation: context.generation ?? 0,
      provider: childProvider,
      maxSteps: agent.maxSteps ?? this.#options.maxSteps ?? DEFAULT_MAX_STEPS,
      replyCap: this.#options.replyCap ?? DEFAULT_REPLY_CAP,
      logDir: this.logDir,
      logs: this.#options.logs,
      toolModules: this.#toolModules,
      toolTimeoutMs: this.#options.toolTimeoutMs,
      // Text is streamed only to a listener that wants it: each delta crosses a thread.
      streamText:
        agent.streamText ??
        (agent.onEvent !== undefined && (agent.eventTypes?.includes('text-delta') ?? true)),
      liveEvents: agent.onEvent !== undefined || watchSteps,
      eventTypes: stepEvents(agent, watchSteps),
      system: agent.system,
      preamble: agent.preamble,
      cache: this.cacheSettings(agent),
      tools: agent.tools,
      workspace: this.#workspace,
      hostTools: this.#hostToolInfo,
      agentName: definition?.name,
      agents:
        agents.length > 0 && depth < this.maxDepth
          ? agents.map(({ name, description }) => ({ name, description }))
          : undefined,
      outputSchema: jsonOutputSchema(agent.outputSchema),
      budget,
      prices: this.#options.prices,
      // Its own (or its agent file's), else its parent's, else this engine's when it was given
      // one: in queue mode the spec carries it to the worker, whose governor has its own default.
      patienceMs: agent.patienceMs ?? context.patienceMs ?? this.#options.governor?.patienceMs,
      key: agent.key,
      parent: context.parent,
      call: context.callId,
      mode: context.mode,
      inc: context.resumeOf?.inc,
      // Given a transcript to go on from: the child restores it as it would its own after a
      // crash (its journal's start record then holds it whole).
      resume: agent.resumeFrom ? { lines: transcriptText(agent.resumeFrom.messages) } : undefined,
      ...capabilityFlags(capabilities),
    });
    // A fresh bridge at each start: a resumed child gets a new one, the old one died with its
    // worker. Its scope (its own agents) lives as long as the child, not its run: the resumed
    // child runs its last step's tools again and finds the agents it started. The bridge lives
    // until the child has settled, so a cancelled child can still finish its calls' aborts.
    const needsBridge = this.#hostTools.size > 0 || spec.depth < spec.maxDepth;
    let bridge: HostBridge | undefined;
    let scope: AgentScope | undefined;
    const handle = this.#pool.spawn(spec, {
      onEvent: watchSteps ? withStepTap(onEvent, this.#observers) : onEvent,
      jobId: context.jobId,
      timeoutMs: agent.timeout,
      makeBridge: needsBridge
        ? () => {
            bridge?.detach();
            scope ??= this.#scopeFor(spec, onEvent, { trace, tree, carried });
            if (scope) this.#adopt(spec.id, scope);
            bridge = new HostBridge({
              hostTools: this.#hostTools,
              agentId: spec.id,
              depth: spec.depth,
              toolTimeoutMs: this.#options.toolTimeoutMs,
              ...(scope ? { scope } : {}),
              ...(carried?.context === undefined ? {} : { context: carried.context }),
            });
            return bridge.workerPort;
          }
        : undefined,
      capabilities,
      private: privateOf(carried, this.#carriedRules),
    });
    this.#track(handle);
    if (this.#observers.active) {
      this.#observers.spawned({ id, title, depth, parent: context.parent, model, handle });
    }
    if (needsBridge) void handle.result.then(() => bridge?.shutdown());
    const signal = agent.signal;
    if (signal) this.#signals.watch(signal, handle);
    // A child its caller started (not one an agent spawned: that agent's scope says so) is
    // announced to its own listener like any other.
    if (context.parent === undefined && onEvent) {
      onEvent({ type: 'agent-start', agentId: id, title, depth, mode: context.mode ?? 'direct' });
    }
    // For a JSON Schema, `T` is the caller's word: the schema, not the type, is checked.
    return handle as ChildHandle<T>;
  }

  /** The batches lane's collector (docs/LANES.md), made when the lane is first used. */
  #batchCollector(lane: Lane): BatchCollector {
    if (this.queued) throw queueLaneRefusal(lane);
    this.#collector ??= engineCollector(this.#options, this.logDir, this.governor?.patienceMs);
    return this.#collector;
  }

  /** Message Batches this engine created so far (the batches lane). */
  get batchesCreated(): number {
    return this.#collector?.batches ?? 0;
  }

  /**
   * Creates of a Message Batch the server refused 429 (a full processing queue) and that the
   * batches lane tried again after the wait it was told.
   */
  get batchQueueRefusals(): number {
    return this.#collector?.queueRefusals ?? 0;
  }

  /**
   * Steps of the `auto` lane that went in real time because no batch fitted before their
   * deadline (at their submit, or while they waited for a batch).
   */
  get stepsMovedToRealtime(): number {
    return this.#collector?.movedToRealtime ?? 0;
  }

  /**
   * What the `auto` lane takes a Message Batch to need, from its create to its end: the longest
   * of the last batches this engine saw end, else `batchTurnaroundMs`.
   */
  get batchTurnaroundMs(): number {
    return (
      this.#collector?.turnaroundMs ??
      this.#options.batchTurnaroundMs ??
      DEFAULT_BATCH_TURNAROUND_MS
    );
  }

  /** Every signal a spawn was given, with one listener each, however many children share it. */
  readonly #signals = new SignalWatch();

  readonly #observers = new SpawnObservers();

  /**
   * Tells `observer` of every spawn from now on (the dashboard, docs/DASHBOARD.md); the function
   * returned stops it. Without observers a spawn pays nothing for them.
   */
  observe(observer: SpawnObserver): () => void {
    return this.#observers.add(observer);
  }

  /**
   * Agents of a stopped run that a resumed agent takes back into its scope (`Session.resume`),
   * by their parent's id: handed over when the parent's scope is made.
   */
  readonly #adoptions = new Map<string, Adoption[]>();

  /** Hands `adoption` to the scope of `parent` when it is made (or at once, when it is). */
  adoptLater(parent: string, adoption: Adoption): void {
    const waiting = this.#adoptions.get(parent);
    if (waiting) waiting.push(adoption);
    else this.#adoptions.set(parent, [adoption]);
  }

  #adopt(parent: string, scope: AgentScope): void {
    const waiting = this.#adoptions.get(parent);
    if (!waiting) return;
    this.#adoptions.delete(parent);
    for (const adoption of waiting) scope.adopt(adoption);
  }

  /** The scope of a child that may spawn agents of its own, else undefined. */
  #scopeFor(
    spec: ChildSpec,
    onEvent: ((event: AgentEvent) => void) | undefined,
    {
      trace,
      tree,
      carried,
    }: {
      trace: ChildTrace | undefined;
      tree: TreeLedger | undefined;
      carried: Carried | undefined;
    },
  ): AgentScope | undefined {
    if (spec.depth >= spec.maxDepth) return undefined;
    return new AgentScope({
      spawn: (options, context) => this.spawn(options, context),
      owner: spec.id,
      ownerDepth: spec.depth,
      generation: spec.generation,
      ceilingMs: this.ceilingMs ?? DEFAULT_CEILING_MS,
      logDirOf: () => this.logDir,
      provider: spec.provider,
      patienceMs: spec.patienceMs,
      lane: spec.lane ?? 'realtime',
      ...(spec.deadline === undefined ? {} : { deadline: spec.deadline }),
      // The child's own agents report into its parent's events when someone listens.
      ...(onEvent ? { emit: onEvent } : {}),
      ...(trace ? { traceContextOf: (span) => trace.contextOf(span) } : {}),
      tree,
      carried,
    });
  }

  /** Counts a live child until it settles, for `drain`. */
  #track(handle: ChildHandle): void {
    this.#live++;
    void handle.result.then(() => {
      if (--this.#live === 0 && this.#idle) {
        const resolve = this.#idle;
        this.#idle = undefined;
        resolve();
      }
    });
  }

  /**
   * A group of spawns with its own signal, budget, concurrency cap, timeout, and defaults for
   * its spawns' `context`, `provider` (`apiKey`, `baseURL`, `model`) and `patienceMs`
   * (docs/GROUPS.md). Throws a UsageError naming the option (`group.maxConcurrency`) before
   * anything of it runs.
   */
  group(options: GroupOptions = {}): Group {
    checkGroup(this.#groupSide, options);
    if (this.queued && options.lane !== undefined && options.lane !== 'realtime') {
      throw queueLaneRefusal(options.lane);
    }
    return new Group(this.#groupSide, options);
  }

  /**
   * Finishes what runs and starts nothing new: every group drains (its queued spawns settle
   * cancelled, reason `drain`), and spawns from outside the engine's own agents throw. Resolves
   * when every child has settled. `close()` afterwards stops the threads.
   */
  drain(): Promise<void> {
    if (this.#draining) return this.#draining;
    for (const group of [...this.#busyGroups]) void group.drain();
    this.#draining =
      this.#live === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            this.#idle = resolve;
          });
    return this.#draining;
  }

  #makeGroupSide(): GroupEngine {
    // A getter's own `this` is the object: the engine's provider is read through this name.
    const engine = this;
    return {
      spawn: (options, context) => this.spawn(options, context),
      check: (options, context) => this.#checkSpawn(options, context),
      stopped: () =>
        this.#closing
          ? { cancelled: 'shutdown' }
          : this.#draining
            ? { refused: drainRefusal().message }
            : undefined,
      active: (group, busy) => {
        if (busy) this.#busyGroups.add(group);
        else this.#busyGroups.delete(group);
      },
      get provider() {
        return engine.#provider;
      },
      rules: this.#carriedRules,
      checkPricedBudget: (budget: Budget | undefined, model: string | undefined) =>
        checkPricedBudget(budget, model ?? this.#provider.model, this.#options.prices),
      logDir: this.logDir,
      logs: this.#options.logs,
    };
  }

  /**
   * Checks a spawn as `spawn` does, without spawning it (a group's queued spawn), and returns
   * the title it would have.
   */
  #checkSpawn(options: AgentOptions, context: SpawnContext): string {
    this.#check.checkAgent(options, context.depth ?? 1);
    const { options: agent } = this.#check.resolve(options);
    const provider = withServer(context.provider ?? this.#provider, agent.provider);
    checkPricedBudget(
      mergeBudgets(this.#options.budget, agent.budget),
      agent.model ?? provider.model,
      this.#options.prices,
    );
    carriedOf(agent, context.inherited, this.#carriedRules);
    return spawnTitle(agent);
  }

  /**
   * Runs one child and resolves with its AgentResult. Never rejects for agent failures. `T`, the
   * type of its `value`, is a Standard Schema `outputSchema`'s output type, or the one named.
   */
  run<T = unknown>(options: AgentOptions<T>, context: SpawnContext = {}): Promise<AgentResult<T>> {
    return this.spawn(options, context).result;
  }

  /**
   * Cancels every live child (reason `shutdown`), waits for each one's result, stops the worker
   * threads, and waits for main's log writes and the governor's state file.
   */
  close(): Promise<void> {
    // Main's own log writes (results it made for queued or cancelled children) are not awaited
    // where they are queued; they are here, before the empty run folder is looked at. The state
    // file is written last: the children's final responses may still teach the governor.
    if (!this.#closing) {
      // Groups' queued spawns are not in the pool: they settle here, cancelled too.
      for (const group of [...this.#busyGroups]) group.cancel('shutdown');
    }
    // The children go first: their steps are withdrawn, then the batches still open cancelled.
    this.#closing ??= closeInTurn([
      () => this.#pool.close('shutdown'),
      () => this.#collector?.close(),
      () => this.#mcp?.close(),
      () => closeJournals(),
      () => this.#applyLogPolicy(),
      () => this.#governorState?.close(),
      () => this.#dropEmptyLogDir(),
    ]);
    return this.#closing;
  }

  /** Takes out of the journal the records the `logs` policy does not keep. */
  async #applyLogPolicy(): Promise<void> {
    if ((this.#options.logs ?? 'all') === 'all') return;
    try {
      await compactJournal(this.logDir);
    } catch (error) {
      warner(
        this.#options.onWarning,
        'journal',
      )(
        `could not apply logs: ${this.#options.logs} to the journal in ${this.logDir}: ${error instanceof Error ? error.message : String(error)}; its records stay`,
      );
    }
  }

  /** A run that kept no folder (`logs: none`, or nothing failed) leaves no empty folder behind. */
  #dropEmptyLogDir(): void {
    if (!this.#madeLogDir) return;
    try {
      rmdirSync(this.logDir); // refuses a folder that is not empty
    } catch {
      // Not empty, or already gone: either way there is nothing to tidy.
    }
  }
}

/** What a child's spec says of the engine's host tools. */
function hostToolInfo(tools: ReadonlyMap<string, AnyTool>): HostToolInfo[] {
  return [...tools.values()].map((tool) =>
    defined({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      parallel: tool.parallel,
    }),
  );
}

/** The title of a spawn: its own, else its prompt's start; a key in it is removed. */
function spawnTitle(agent: AgentOptions): string {
  // A title reaches results, events and span names: a key in it is removed like anywhere else.
  return redactSecrets(agent.title ?? agent.prompt.slice(0, 60).replace(/\s+/g, ' ').trim());
}

/**
 * Starts the MCP servers of engine options (checked: `validateEngineOptions`), or resolves
 * undefined when they have none; the SDK is loaded only then. Throws a UsageError naming a server
 * that cannot start. The caller closes them, or hands them to `Engine.start`.
 */
export async function startMcpServers(options: EngineOptions): Promise<McpServers | undefined> {
  if (!hasMcpServers(options)) return undefined;
  return (await import('./mcp/engine-servers.js')).startEngineServers(options);
}

function drainRefusal(): UsageError {
  return new UsageError(
    'The engine is draining: it starts no new agents (`drain()` was called; `close()` ends it)',
  );
}

/** Options of the `checkEngine` check itself. */
export interface CheckEngineOptions {
  /** How long each tool module may take to import (default: `toolImportTimeoutMs`, or 10 s). */
  importTimeoutMs?: number;
}

/**
 * Checks engine options as `Engine.start` does, before anything starts: every option's type and
 * bounds, the workspace (an existing folder), the log root, the base URL (http or https), and
 * each tool module, imported in a throw-away worker (never on main) within a timeout and checked
 * to export valid tools. No tool may be named `reply`, and no two may share a name. Throws a UsageError
 * that names the option in backticks (`toolModules[0]`; see `flagMessage` for CLI flags).
 * Each agent file of the folder is read and checked; a bad one rejects with an
 * `AgentFolderError`, unless `agentFileCheck` is `spawn`. Resolves with the check every spawn
 * passes, for checking tasks before they run.
 */
export async function checkEngine(
  options: EngineOptions,
  check: CheckEngineOptions = {},
  /** The engine's MCP servers, when they are started already (`Engine.start`). */
  mcp?: McpServers,
): Promise<EngineCheck> {
  if (typeof options !== 'object' || options === null) {
    throw expected('options', 'an object of engine options', options);
  }
  checkOption('importTimeoutMs', durationMs(1), check.importTimeoutMs);
  validateEngineOptions(options);
  const timeoutMs =
    check.importTimeoutMs ?? options.toolImportTimeoutMs ?? DEFAULT_IMPORT_TIMEOUT_MS;
  return agentCheck(
    await engineTools(options, timeoutMs, mcp),
    defined({
      maxDepth: options.maxDepth ?? DEFAULT_MAX_DEPTH,
      agents: engineAgents(options),
      agentFileCheck: options.agentFileCheck,
      model: options.provider?.model,
      budget: options.budget,
      prices: options.prices,
      queued: options.queue !== undefined,
    }),
  );
}

/**
 * Runs the steps of a close one after another, each whatever the ones before did: a step that
 * fails must not leave what the later ones end (an MCP server's process, the journal) running or
 * unwritten. Rejects with the first failure once every step has run.
 */
async function closeInTurn(steps: readonly (() => unknown)[]): Promise<void> {
  let failure: { error: unknown } | undefined;
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure) throw failure.error;
}
