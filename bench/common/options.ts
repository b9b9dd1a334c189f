/**
 * The flags of `npm run bench` / `cohort bench`. Defaults make the QUICK sweep; flags scale it up.
 * A bad flag is a UsageError that names it, says what was expected and what arrived.
 */
import path from 'node:path';
import { intFlag, type ParsedValues, parseCommand, stringFlag } from '../../src/cli/flags.js';
import { UsageError } from '../../src/shared/errors.js';
import {
  DEFAULT_TRANSPORT,
  TRANSPORT_NAMES,
  type TransportName,
} from '../../src/shared/provider/transport/types.js';
import {
  CONCURRENCY_ENGINES,
  ENGINE_NAMES,
  type EngineName,
  MAX_THREADS,
} from '../engines/engines.js';
import {
  GOVERNOR_SCENARIO_NAMES,
  type GovernorScenarioName,
} from '../governor/governor-scenarios.js';

export interface BenchOptions {
  /** Part names to run, in registry order; empty means all. */
  parts: string[];
  agents: number;
  steps: number;
  /** Concurrency levels to sweep. */
  concurrency: number[];
  /** Worker processes of the `scale` part's queue cases (the first is compared with local). */
  workers: number[];
  ttftMs: number;
  tps: number;
  cpuMs: number;
  /** Scripted model rate limit, requests per minute (0: none). */
  rpm: number;
  /** Scripted model input and output tokens per minute (0: none). */
  itpm: number;
  otpm: number;
  /** Seconds of the per-minute limits the model's buckets hold (1..60). */
  bucketSeconds: number;
  /** Scripted model ramp limit factor (0: none). */
  acceleration: number;
  /** Scripted model 529 probability. */
  overload: number;
  jitter: number;
  engines: EngineName[];
  /** Repetitions of every case; figures are medians over them. */
  runs: number;
  /** cohort's worker threads (default: available parallelism). */
  threads: number | undefined;
  /** JSON report path. */
  out: string;
  /** SVG chart path. */
  chart: string;
  provider: 'mock' | 'anthropic';
  model: string | undefined;
  /** How the engines' providers reach the model (`ProviderConfig.transport`). */
  transport: TransportName;
  /** Calls per case in the `transport` part. */
  calls: number;
  /** The rate-limit governor of cohort and thread-per-child in the `concurrency` part. */
  governor: boolean;
  /** Trace cohort's agents (the `concurrency` part) into a counting tracer provider. */
  tracing: boolean;
  /** Where measuring processes and their threads write .cpuprofile files; unset: no profiles. */
  profile: string | undefined;
  maxRetries: number;
  /** Children parked side by side by cohort and thread-per-child in the `spawn` part. */
  spawnChildren: number;
  /** Children parked by cohort alone in the `spawn` part (0 skips it). */
  cohortChildren: number;
  /** The `governor` part's scenarios to run, in their own order; empty means all. */
  scenarios: GovernorScenarioName[];
  /** Distinct shared system prompts in the `cache` part (agent i gets prompt i mod N). */
  prefixes: number;
  /** The `embed` part's concurrent jobs, and documents (agents) per job. */
  jobs: number;
  docs: number;
  /** How long a Message Batch of the scripted model takes to end, in the `lanes` part. */
  batchLatencyMs: number;
  /** The flags given on the command line, by name: a part may default the others its own way. */
  given: string[];
}

export const BENCH_USAGE = `Usage: cohort bench [part...] [options]     (npm run bench -- [part...] [options])
Parts: model, transport, concurrency, spawn, governor, cache, scale, peers, embed, lanes,
dashboard (default: all). Defaults are a quick sweep, except for transport, governor, cache,
scale, peers, embed, lanes and dashboard, which run their full scenarios.

concurrency — cohort vs in-process vs thread-per-child vs sdk-loop on one scripted model:
  --agents N            agents per case (default 100)
  --steps K             provider requests per agent: K-1 work-tool steps, then reply (default 3)
  --concurrency A,B,…   levels to sweep (default 5,15,30)
  --ttft-ms MS          model time to first token (default 50)
  --tps N               model output tokens per second, 0 unpaced (default 0)
  --cpu-ms MS           synchronous CPU per work-tool call (default 2)
  --rpm N               model rate limit, requests per minute, 0 none (default 0)
  --itpm N, --otpm N    model rate limits, input / output tokens per minute, 0 none (default 0)
  --bucket-seconds S    seconds of those limits a full bucket holds, 1..60 (default 60)
  --acceleration F      model ramp limit factor (see cohort mock --help), 0 none (default 0)
  --overload P          model 529 probability 0..1 (default 0)
  --jitter J            model ttft/tps jitter 0..1 (default 0)
  --engines A,B,…       cohort, in-process, thread-per-child, sdk-loop, ai-sdk, langchain
                        (default: the first four)
  --threads N           cohort worker threads (default: available parallelism)
  --max-retries N       provider retries (default 4)
  --provider mock|anthropic   anthropic needs ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL
  --model NAME          model name for --provider anthropic
  --transport undici|sdk   how the engines reach the model (default ${DEFAULT_TRANSPORT});
                        sdk-loop, ai-sdk and langchain always use their own library
  --governor on|off     cohort's and thread-per-child's rate-limit governor (default on)
  --tracing on|off      trace cohort's agents into an OpenTelemetry provider whose exporter
                        counts and drops the spans (default off)
transport — raw streamed calls through the undici and the sdk transport, side by side; its
own defaults: --calls 3000 --concurrency 100 --ttft-ms 0:
  --calls N             calls per transport and run, after a warm-up of --concurrency calls
spawn — spawn → first request latency and memory per live child:
  --spawn-children N    children parked by cohort and by thread-per-child (default 20, max ${MAX_THREADS})
  --cohort-children N   children parked by cohort alone, 0 skips (default 1000)
governor — the rate-limit governor on and off, scenario by scenario, each case in a fresh
process against a fresh model, alternating within a round:
  --scenarios A,B,…     ${GOVERNOR_SCENARIO_NAMES.slice(0, 4).join(', ')},
                        ${GOVERNOR_SCENARIO_NAMES.slice(4).join(', ')} (default all)
  rate-limit: a binding input-token limit, also with the governor told the limits; its own
  defaults --agents 1000 --steps 3 --concurrency 200 --ttft-ms 200 --bucket-seconds 10:
  --itpm N              model input tokens per minute (default: set from a probe agent's
                        input so the limit binds for about 30 s)
  --rpm N               model requests per minute (default: 1.5 × the request rate --itpm allows)
  random-529-1, -5, -20: 1, 5, 20% of requests answered 529 at random; 1000 one-step tasks at
  concurrency 100. max-streams: a server of 48 streams, the same tasks. cold-start: 400
  one-step tasks at concurrency 200 against a server with no rate-limit headers. unreachable:
  \`cohort batch\` with 5000 tasks against a closed port and a 401 to every request, stopped
  at 60 s. --agents, --steps, --concurrency and --ttft-ms replace every scenario's own;
  --overload applies where a scenario has no 529s of its own; the other flags above apply.
cache — prompt caching under a binding input-token limit: every agent shares a 20,000-token
system prompt; cohort with --cache auto, cohort with --cache off, and sdk-loop (no
cache_control), each case in a fresh process against a fresh scripted model that caches as the
API does: agents per minute, input cost, cache writes per distinct prefix. Its own defaults:
--agents 1000 --steps 3 --concurrency 200 --ttft-ms 200 --cpu-ms 0 --bucket-seconds 5.
  Its --ttft-ms is the time before a response starts (headers and message_start, when the
  written prefix becomes readable, as with the API), the model's own ttft 0:
  --itpm N              model input tokens per minute (default: set from a probe agent's
                        uncached input so that --cache off binds for about 60 s)
  --prefixes N          distinct system prompts, agent i gets prompt i mod N (default 1)
  --rpm, --otpm, --tps, --jitter, --threads, --transport, --governor, --max-retries,
  --runs apply (no RPM or OTPM limit by default)
scale — queue mode (a private redis-server, \`cohort worker\` processes) against the local
engine, then 1, 2 and 3 worker processes; needs redis-server. Its own defaults: --agents 2000
--concurrency 200 --ttft-ms 200 --cpu-ms 0; --steps, --threads, --transport, --governor apply:
  --workers A,B,…       worker processes of the queue cases (default 1,2,3); the case with 1
                        is the one compared with the local engine
peers — cohort at its defaults against sdk-loop, the Vercel AI SDK (generateText with tools
and stopWhen) and LangChain (ChatAnthropic with bound tools), each case in a fresh process, the
order rotated each round: CPU per call, efficiency, wall. Its own defaults: --agents 2000
--concurrency 200 --ttft-ms 200 --cpu-ms 0 --runs 3 --engines cohort,sdk-loop,ai-sdk,langchain;
--steps, --tps, --jitter, --threads, --transport, --governor, --max-retries apply
embed — an HTTP service on the library (node:http): 20 concurrent jobs × 50 documents, one
agent per document (a tool step, then the reply; ttft 200 ms), cohort at its defaults beside
the same service on the official-SDK loop, clean and with 1% random 529s: job p50/p99,
/healthz p99, the service's event-loop p99, peak RSS and CPU; --runs applies:
  --jobs N              concurrent jobs (default 20)
  --docs N              documents, one agent each, per job (default 50)
lanes — the same agents in the realtime lane and in the batches lane (Message Batches), side by
side, each on a fresh engine against a fresh scripted model in this process: makespan,
real-time requests, batch requests, batches, dollars. Its own defaults: --agents 1000 --steps 3
--ttft-ms 200 --cpu-ms 0; --runs applies:
  --batch-latency-ms N  how long the scripted model takes to end a Message Batch (default 2000)
dashboard — what the live dashboard costs: the same agents with none, with steps off, at its
defaults, and at its defaults with a live client reading the event stream as the page does,
on fresh engines, interleaved by round: the engine process's CPU per provider call and
each case's ratio to none. Its own defaults: --agents 1000 --steps 3 --ttft-ms 200 --cpu-ms 0;
--runs applies.
all parts:
  --runs N              repetitions; figures are medians (default 1)
  --out FILE            JSON report (default bench-results/bench-<timestamp>.json)
  --chart FILE          SVG chart (default: the JSON path with .svg)
  --profile DIR         CPU-profile every measuring process and its worker threads into DIR
                        (.cpuprofile files; summarise with npm run bench:profile-summary -- DIR)`;

const FLAGS = {
  agents: { type: 'string' },
  steps: { type: 'string' },
  concurrency: { type: 'string' },
  workers: { type: 'string' },
  'ttft-ms': { type: 'string' },
  tps: { type: 'string' },
  'cpu-ms': { type: 'string' },
  rpm: { type: 'string' },
  itpm: { type: 'string' },
  otpm: { type: 'string' },
  'bucket-seconds': { type: 'string' },
  acceleration: { type: 'string' },
  overload: { type: 'string' },
  jitter: { type: 'string' },
  engines: { type: 'string' },
  threads: { type: 'string' },
  'max-retries': { type: 'string' },
  provider: { type: 'string' },
  model: { type: 'string' },
  transport: { type: 'string' },
  governor: { type: 'string' },
  tracing: { type: 'string' },
  calls: { type: 'string' },
  profile: { type: 'string' },
  'spawn-children': { type: 'string' },
  'cohort-children': { type: 'string' },
  scenarios: { type: 'string' },
  prefixes: { type: 'string' },
  jobs: { type: 'string' },
  docs: { type: 'string' },
  'batch-latency-ms': { type: 'string' },
  runs: { type: 'string' },
  out: { type: 'string', short: 'o' },
  chart: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Parses bench flags; `known` are the part names. Throws UsageError. */
export function parseBenchArgs(
  argv: string[],
  known: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  now: Date = new Date(),
): BenchOptions | 'help' {
  const { values, positionals } = parseCommand(argv, FLAGS);
  if (values.help === true) return 'help';
  const unknown = positionals.filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    throw new UsageError(
      `Expected a bench part (${known.join(', ')}), got ${unknown.map((name) => `\`${name}\``).join(', ')}`,
    );
  }
  const provider = stringFlag(values, 'provider') ?? 'mock';
  if (provider !== 'mock' && provider !== 'anthropic') {
    throw new UsageError(`Expected \`--provider\` to be mock or anthropic, got \`${provider}\``);
  }
  if (provider === 'anthropic' && !env.ANTHROPIC_API_KEY && !env.ANTHROPIC_BASE_URL) {
    throw new UsageError(
      'Expected ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL to be set with `--provider anthropic`, got neither',
    );
  }
  const out = stringFlag(values, 'out') ?? defaultOut(now);
  return {
    parts: known.filter((name) => positionals.includes(name)),
    agents: intFlag(values, 'agents', 1, 1_000_000) ?? 100,
    steps: intFlag(values, 'steps', 1, 1000) ?? 3,
    concurrency: listFlag(values, 'concurrency', 1, 1_000_000) ?? [5, 15, 30],
    workers: listFlag(values, 'workers', 1, 16) ?? [1, 2, 3],
    ttftMs: intFlag(values, 'ttft-ms', 0, 600_000) ?? 50,
    tps: intFlag(values, 'tps', 0, 1_000_000) ?? 0,
    cpuMs: intFlag(values, 'cpu-ms', 0, 60_000) ?? 2,
    rpm: intFlag(values, 'rpm', 0, 100_000_000) ?? 0,
    itpm: intFlag(values, 'itpm', 0, 1_000_000_000_000) ?? 0,
    otpm: intFlag(values, 'otpm', 0, 1_000_000_000_000) ?? 0,
    bucketSeconds: intFlag(values, 'bucket-seconds', 1, 60) ?? 60,
    acceleration: intFlag(values, 'acceleration', 0, 1_000_000_000) ?? 0,
    overload: fractionFlag(values, 'overload') ?? 0,
    jitter: fractionFlag(values, 'jitter') ?? 0,
    engines: enginesFlag(values) ?? [...CONCURRENCY_ENGINES],
    runs: intFlag(values, 'runs', 1, 100) ?? 1,
    threads: intFlag(values, 'threads', 1, MAX_THREADS),
    out,
    chart: stringFlag(values, 'chart') ?? replaceExtension(out, '.svg'),
    provider,
    model: stringFlag(values, 'model'),
    transport: transportFlag(values),
    calls: intFlag(values, 'calls', 1, 10_000_000) ?? 3000,
    governor: onOffFlag(values, 'governor') ?? true,
    tracing: onOffFlag(values, 'tracing') ?? false,
    profile: profileFlag(values),
    maxRetries: intFlag(values, 'max-retries', 0, 20) ?? 4,
    spawnChildren: intFlag(values, 'spawn-children', 1, MAX_THREADS) ?? 20,
    cohortChildren: intFlag(values, 'cohort-children', 0, 100_000) ?? 1000,
    scenarios: scenariosFlag(values) ?? [],
    prefixes: intFlag(values, 'prefixes', 1, 1000) ?? 1,
    jobs: intFlag(values, 'jobs', 1, 1000) ?? 20,
    docs: intFlag(values, 'docs', 1, 10_000) ?? 50,
    batchLatencyMs: intFlag(values, 'batch-latency-ms', 0, 86_400_000) ?? 2000,
    given: Object.keys(values).filter((name) => values[name] !== undefined),
  };
}

function defaultOut(now: Date): string {
  const stamp = now.toISOString().replace(/[:.]/g, '-');
  return path.join('bench-results', `bench-${stamp}.json`);
}

function replaceExtension(file: string, extension: string): string {
  const parsed = path.parse(file);
  return path.join(parsed.dir, `${parsed.name}${extension}`);
}

/** A comma-separated list of whole numbers within bounds, duplicates dropped, ascending. */
function listFlag(
  values: ParsedValues,
  name: string,
  min: number,
  max: number,
): number[] | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const text = String(raw);
  const items = text.split(',').map((item) => item.trim());
  const numbers = items.map(Number);
  const bad = items.some((item) => !/^\d+$/.test(item)) || numbers.some((n) => n < min || n > max);
  if (bad) {
    throw new UsageError(
      `Expected \`--${name}\` to be a comma-separated list of whole numbers from ${min} to ${max}, got \`${text}\``,
    );
  }
  return [...new Set(numbers)].sort((a, b) => a - b);
}

function fractionFlag(values: ParsedValues, name: string): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const text = String(raw);
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0 || value > 1) {
    throw new UsageError(`Expected \`--${name}\` to be a number from 0 to 1, got \`${text}\``);
  }
  return value;
}

function onOffFlag(values: ParsedValues, name: string): boolean | undefined {
  const text = stringFlag(values, name);
  if (text === undefined) return undefined;
  if (text !== 'on' && text !== 'off') {
    throw new UsageError(`Expected \`--${name}\` to be on or off, got \`${text}\``);
  }
  return text === 'on';
}

function transportFlag(values: ParsedValues): TransportName {
  const text = stringFlag(values, 'transport');
  if (text === undefined) return DEFAULT_TRANSPORT;
  const known: readonly string[] = TRANSPORT_NAMES;
  if (!known.includes(text)) {
    throw new UsageError(
      `Expected \`--transport\` to be ${TRANSPORT_NAMES.join(' or ')}, got \`${text}\``,
    );
  }
  return text as TransportName;
}

/** `--profile DIR`, resolved: the measuring processes may run with another working directory. */
function profileFlag(values: ParsedValues): string | undefined {
  const text = stringFlag(values, 'profile');
  return text === undefined ? undefined : path.resolve(text);
}

function scenariosFlag(values: ParsedValues): GovernorScenarioName[] | undefined {
  const raw = values.scenarios;
  if (raw === undefined) return undefined;
  const text = String(raw);
  const names = text.split(',').map((item) => item.trim());
  const known: readonly string[] = GOVERNOR_SCENARIO_NAMES;
  if (names.some((name) => !known.includes(name))) {
    throw new UsageError(
      `Expected \`--scenarios\` to be a comma-separated list of ${GOVERNOR_SCENARIO_NAMES.join(', ')}, got \`${text}\``,
    );
  }
  return GOVERNOR_SCENARIO_NAMES.filter((name) => names.includes(name));
}

function enginesFlag(values: ParsedValues): EngineName[] | undefined {
  const raw = values.engines;
  if (raw === undefined) return undefined;
  const text = String(raw);
  const names = text.split(',').map((item) => item.trim());
  const known: readonly string[] = ENGINE_NAMES;
  if (names.length === 0 || names.some((name) => !known.includes(name))) {
    throw new UsageError(
      `Expected \`--engines\` to be a comma-separated list of ${ENGINE_NAMES.join(', ')}, got \`${text}\``,
    );
  }
  return ENGINE_NAMES.filter((name) => names.includes(name));
}
