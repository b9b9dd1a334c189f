/**
 * The ways of running many agents that the bench puts side by side:
 * - `cohort`: the engine, many children per worker thread;
 * - `in-process`: the same agent loop (`runChild`) on the main thread, one shared Provider,
 *   what a user writes by hand with a promise limiter;
 * - `thread-per-child`: piscina with one child per worker (`agentsPerThread: 1`);
 * - `sdk-loop`: a hand-written loop on the official SDK, no cohort code on the path (sdk-loop.ts);
 * - `ai-sdk`, `langchain`: the tool loops of the Vercel AI SDK and of LangChain's
 *   `ChatAnthropic`, as their documentation writes them (ai-sdk.ts, langchain.ts).
 * The engines on other libraries (the last three) are imported only when started, so no other
 * case's process loads those libraries: a cohort case's start-up and baseline memory hold none
 * of the official SDK.
 */
import path from 'node:path';
import { Engine } from '../../src/main/engine.js';
import { runChild } from '../../src/shared/child.js';
import type { ChildSpec } from '../../src/shared/child-spec.js';
import type { AgentEvent } from '../../src/shared/events.js';
import type { GovernorOptions } from '../../src/shared/governor/types.js';
import { newAgentId } from '../../src/shared/ids.js';
import {
  type CacheMode,
  DEFAULT_CACHE_MODE,
  DEFAULT_CACHE_TTL,
} from '../../src/shared/provider/cache.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../../src/shared/provider/config.js';
import { Provider } from '../../src/shared/provider/provider.js';
import { DEFAULT_REPLY_CAP } from '../../src/shared/render.js';
import type { AgentResult } from '../../src/shared/result.js';
import { LiveRuns } from './live-runs.js';
import { countingTracerProvider } from './tracing.js';

export const ENGINE_NAMES = [
  'cohort',
  'in-process',
  'thread-per-child',
  'sdk-loop',
  'ai-sdk',
  'langchain',
] as const;
export type EngineName = (typeof ENGINE_NAMES)[number];

/** The engines of the `concurrency` part when `--engines` names none. */
export const CONCURRENCY_ENGINES: readonly EngineName[] = [
  'cohort',
  'in-process',
  'thread-per-child',
  'sdk-loop',
];

/** The engines of the `peers` part when `--engines` names none: cohort and the libraries. */
export const PEER_ENGINES: readonly EngineName[] = ['cohort', 'sdk-loop', 'ai-sdk', 'langchain'];

/** The most threads `Engine.start` accepts, so the most thread-per-child can run at once. */
export const MAX_THREADS = 256;

export interface EngineSetup {
  provider: Partial<ProviderConfig>;
  /** Root of the agents' log folders. */
  logDir: string;
  toolModules: string[];
  /** Children the bench keeps in flight: thread-per-child starts this many threads. */
  concurrency: number;
  /** cohort's worker threads; default: the engine's (the machine's available parallelism). */
  threads?: number | undefined;
  /** cohort's children per thread; default: the engine's. */
  agentsPerThread?: number | undefined;
  /** The engine's rate-limit governor (cohort, thread-per-child); default: the engine's (on). */
  governor?: GovernorOptions | undefined;
  /** Trace the engine's agents (cohort) into a provider that counts and drops the spans. */
  tracing?: boolean;
  /**
   * Prompt-cache breakpoints (cohort, thread-per-child, in-process); default: the engine's
   * (`auto`). The loops on other libraries send none, as their users write them.
   */
  cache?: CacheMode | undefined;
}

/** What one agent of the bench asks for. */
export interface AgentRequest {
  prompt: string;
  /** The agent's own system prompt (a spawn's `system`); the delivery discipline follows it. */
  system?: string | undefined;
  title: string;
  maxSteps: number;
  onEvent?: ((event: AgentEvent) => void) | undefined;
}

export interface BenchEngine {
  readonly name: EngineName;
  /** Worker threads it runs (0 for the engines on the main thread). */
  readonly threads: number;
  run(request: AgentRequest): Promise<AgentResult>;
  /** Cancels what is live (reason `shutdown`) and waits for every result. */
  close(): Promise<void>;
}

/** An engine that could not start: the bench tells it apart from a failure while measuring. */
export class EngineStartError extends Error {
  override readonly name = 'EngineStartError';
}

/** Starts an engine; resolves when it is ready to run agents (a pool is warm). */
export async function startEngine(name: EngineName, setup: EngineSetup): Promise<BenchEngine> {
  try {
    return await startNamed(name, setup);
  } catch (error) {
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    throw new EngineStartError(`${name} did not start: ${text}`, { cause: error });
  }
}

async function startNamed(name: EngineName, setup: EngineSetup): Promise<BenchEngine> {
  switch (name) {
    case 'cohort':
      return poolEngine(name, {
        ...(setup.threads === undefined ? {} : { threads: setup.threads }),
        ...(setup.agentsPerThread === undefined ? {} : { agentsPerThread: setup.agentsPerThread }),
        setup,
      });
    case 'thread-per-child':
      return poolEngine(name, { threads: setup.concurrency, agentsPerThread: 1, setup });
    case 'in-process':
      return inProcessEngine(setup);
    case 'sdk-loop':
      return (await import('./sdk-loop.js')).sdkLoopEngine(setup);
    case 'ai-sdk':
      return (await import('./ai-sdk.js')).aiSdkEngine(setup);
    case 'langchain':
      return (await import('./langchain.js')).langchainEngine(setup);
  }
}

async function poolEngine(
  name: EngineName,
  options: { threads?: number; agentsPerThread?: number; setup: EngineSetup },
): Promise<BenchEngine> {
  const engine = await Engine.start({
    ...(options.threads === undefined ? {} : { threads: options.threads }),
    ...(options.agentsPerThread === undefined ? {} : { agentsPerThread: options.agentsPerThread }),
    provider: options.setup.provider,
    logDir: options.setup.logDir,
    toolModules: options.setup.toolModules,
    ...(options.setup.governor === undefined ? {} : { governor: options.setup.governor }),
    ...(options.setup.cache === undefined ? {} : { cache: options.setup.cache }),
    ...(options.setup.tracing ? { tracerProvider: await countingTracerProvider() } : {}),
  });
  return benchEngineOf(name, engine);
}

/** A started `Engine` behind the bench's engine interface. */
export function benchEngineOf(name: EngineName, engine: Engine): BenchEngine {
  return {
    name,
    threads: engine.threads,
    run: (request) =>
      engine.run({
        prompt: request.prompt,
        ...(request.system === undefined ? {} : { system: request.system }),
        title: request.title,
        maxSteps: request.maxSteps,
        streamText: false,
        ...(request.onEvent === undefined ? {} : { onEvent: request.onEvent }),
      }),
    close: () => engine.close(),
  };
}

/** The agent loop on the main thread, built the way `Engine.spawn` builds a child's spec. */
function inProcessEngine(setup: EngineSetup): BenchEngine {
  const config: ProviderConfig = { ...DEFAULT_PROVIDER_CONFIG, ...setup.provider };
  // One Provider (one connection pool) for every agent, as a user would share it.
  const provider = new Provider(config);
  const runs = new LiveRuns<AgentResult>();
  const noEvents = (): void => {};
  return {
    name: 'in-process',
    threads: 0,
    run(request) {
      const id = newAgentId();
      const spec: ChildSpec = {
        id,
        title: request.title,
        prompt: request.prompt,
        ...(request.system === undefined ? {} : { system: request.system }),
        depth: 1,
        maxDepth: 1,
        generation: 0,
        provider: config,
        maxSteps: request.maxSteps,
        replyCap: DEFAULT_REPLY_CAP,
        logDir: path.join(setup.logDir, id),
        toolModules: setup.toolModules,
        streamText: false,
        // As Engine.spawn settles a spawn's cache settings: the engine's, else the defaults.
        cache: { mode: setup.cache ?? DEFAULT_CACHE_MODE, ttl: DEFAULT_CACHE_TTL },
      };
      return runs.start((signal) =>
        runChild(spec, { provider, signal, emit: request.onEvent ?? noEvents }),
      );
    },
    close: () => runs.close(),
  };
}
