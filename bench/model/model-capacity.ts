/**
 * Capacity of the scripted model: how many streamed responses per second it serves.
 * The server runs in its own process (`dist/src/testing/serve.js`), the client here,
 * over keep-alive HTTP, so the figure is the server's, not the SDK's. Each response
 * carries ~200 output tokens, unpaced.
 *
 * A second server runs with rate-limit accounting on (limits too high to refuse anything),
 * and the two are measured in pairs of back-to-back runs, in alternating order: on a shared
 * 2-core machine two runs minutes apart differ by more than the cost being measured. The
 * cost is read twice. At saturation, the client shares the cores and parses the extra
 * headers, so the server's CPU per response also pays for the client's slowdown (less
 * batching). At a fixed offered load below capacity, both servers do the same work per
 * wake-up, and the difference is the server's own.
 */
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { scriptBlock } from '../../src/testing/index.js';
import { type ModelProcess, processCpuMs, startModelProcess } from '../common/model-process.js';
import type { BenchPart, BenchRow } from '../common/part.js';
import { median } from '../common/stats.js';

/** How the client drives a server: `rate` 0 sends as fast as it is answered. */
interface Load {
  concurrency: number;
  rate: number;
  requests: number;
}

const SATURATED: Load[] = [
  { concurrency: 64, rate: 0, requests: 5000 },
  { concurrency: 256, rate: 0, requests: 5000 },
];
/** Well below what either server sustains on the reference machine (about 10,000/s). */
const FIXED: Load = { concurrency: 64, rate: 3000, requests: 3000 };
const WARMUP_REQUESTS = 2000;
/**
 * Pairs of runs per load: even, so each mode goes first equally often, and many, because
 * single pairs differ by ±20% on a shared 2-core machine.
 */
const PAIRS = 8;
const OUTPUT_CHARS = 800; // ≈ 200 tokens
/**
 * Every limit on, none reachable: each request pays for admission (and the ramp), the
 * `anthropic-ratelimit-*` headers and the output charge, and none is refused.
 */
const RATE_LIMIT_FLAGS = [
  '--rpm',
  '1000000000',
  '--itpm',
  '1000000000000',
  '--otpm',
  '1000000000000',
  '--acceleration',
  '1000000000',
];

interface RunFigures {
  requestsPerSecond: number;
  megabytesPerSecond: number;
  /** Server CPU per response in µs, when /proc is there. */
  cpuPerResponseUs: number | undefined;
}

/** The runs of both servers under one load, pair by pair. */
interface Pairs {
  off: RunFigures[];
  on: RunFigures[];
}

function streamOnce(url: URL, agent: Agent, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (response) => {
        let bytes = 0;
        let tail = '';
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          tail = chunk.toString('latin1', Math.max(0, chunk.length - 64));
        });
        response.on('end', () => {
          if (response.statusCode !== 200 || !tail.includes('message_stop')) {
            reject(new Error(`Unexpected response: status ${response.statusCode}, tail ${tail}`));
          } else resolve(bytes);
        });
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/** Sends `load.requests` requests over `load.concurrency` lanes, paced at `load.rate` if set. */
async function runOnce(
  url: URL,
  load: Load,
  body: Buffer,
): Promise<Omit<RunFigures, 'cpuPerResponseUs'>> {
  const agent = new Agent({ keepAlive: true, maxSockets: load.concurrency });
  let started = 0;
  let bytes = 0;
  const begin = performance.now();
  const lane = async (): Promise<void> => {
    while (started < load.requests) {
      const index = started++;
      if (load.rate > 0) {
        const due = begin + (index * 1000) / load.rate;
        const now = performance.now();
        if (due > now) await sleep(due - now);
      }
      // Not `bytes += await ...`: that reads `bytes` before the await and loses updates.
      const received = await streamOnce(url, agent, body);
      bytes += received;
    }
  };
  await Promise.all(Array.from({ length: load.concurrency }, lane));
  const seconds = (performance.now() - begin) / 1000;
  agent.destroy();
  return {
    requestsPerSecond: load.requests / seconds,
    megabytesPerSecond: bytes / 1e6 / seconds,
  };
}

function requestBody(): Buffer {
  const text = 'The scripted model streams this sentence as many small deltas. '
    .repeat(13)
    .slice(0, OUTPUT_CHARS);
  return Buffer.from(
    JSON.stringify({
      model: 'bench',
      max_tokens: 1024,
      stream: true,
      system: scriptBlock({ steps: [{ text }] }),
      messages: [{ role: 'user', content: 'Stream the scripted text.' }],
    }),
  );
}

/** One run against `server`, with the server's CPU over it. */
async function measuredRun(server: ModelProcess, load: Load, body: Buffer): Promise<RunFigures> {
  const target = new URL('/v1/messages', server.url);
  const before = processCpuMs(server.child.pid);
  const figures = await runOnce(target, load, body);
  const after = processCpuMs(server.child.pid);
  const cpuPerResponseUs =
    before === undefined || after === undefined
      ? undefined
      : ((after - before) * 1000) / load.requests;
  return { ...figures, cpuPerResponseUs };
}

/**
 * Warms both servers up, then runs PAIRS pairs back to back, the baseline first in even
 * pairs and second in odd ones, so neither gains from going first.
 */
async function measurePairs(
  [off, on]: [ModelProcess, ModelProcess],
  load: Load,
  body: Buffer,
): Promise<Pairs> {
  const warmup = { ...load, rate: 0, requests: WARMUP_REQUESTS };
  for (const server of [off, on]) await runOnce(new URL('/v1/messages', server.url), warmup, body);
  const pairs: Pairs = { off: [], on: [] };
  for (let index = 0; index < PAIRS; index++) {
    if (index % 2 === 0) {
      pairs.off.push(await measuredRun(off, load, body));
      pairs.on.push(await measuredRun(on, load, body));
    } else {
      pairs.on.push(await measuredRun(on, load, body));
      pairs.off.push(await measuredRun(off, load, body));
    }
  }
  return pairs;
}

/** The median of the known values, or undefined when there is none. */
function medianOf(values: Array<number | undefined>): number | undefined {
  const known = values.filter((value): value is number => value !== undefined);
  return known.length === 0 ? undefined : median(known);
}

function caseName(load: Load, accounting: boolean): string {
  const pace = load.rate > 0 ? `at ${load.rate} req/s, ` : '';
  return `streams, ${pace}concurrency ${load.concurrency}${accounting ? ', rate limits on' : ''}`;
}

/** responses/s and MB/s (at saturation only: paced, they are the pace) and server CPU. */
function modeRows(load: Load, accounting: boolean, runs: RunFigures[]): BenchRow[] {
  const name = caseName(load, accounting);
  const rows: BenchRow[] = [];
  if (load.rate === 0) {
    const rates = runs.map((run) => run.requestsPerSecond);
    rows.push(
      {
        part: 'model',
        case: name,
        metric: 'responses/s',
        value: median(rates),
        unit: 'req/s',
        note: `${runs.length} runs of ${load.requests}: ${rates.map((rate) => rate.toFixed(0)).join(', ')}`,
      },
      {
        part: 'model',
        case: name,
        metric: 'throughput',
        value: median(runs.map((run) => run.megabytesPerSecond)),
        unit: 'MB/s',
        note: `~200 output tokens, ${OUTPUT_CHARS / 8} deltas per response, unpaced`,
      },
    );
  }
  const cpu = medianOf(runs.map((run) => run.cpuPerResponseUs));
  if (cpu !== undefined) {
    rows.push({
      part: 'model',
      case: name,
      metric: 'server CPU',
      value: cpu,
      unit: 'µs/resp',
      note: 'CPU time of the server process per response, median of the runs (the client shares the cores)',
    });
  }
  return rows;
}

/** The extra server CPU of rate-limit accounting: the median of the pairs' ratios, in %. */
function overheadRows(load: Load, pairs: Pairs): BenchRow[] {
  const ratios = pairs.off.map((baseline, index) => {
    const accounted = pairs.on[index]?.cpuPerResponseUs;
    const base = baseline.cpuPerResponseUs;
    return accounted === undefined || base === undefined ? undefined : accounted / base - 1;
  });
  const overhead = medianOf(ratios);
  if (overhead === undefined) return [];
  const shown = ratios.map((ratio) => `${((ratio ?? 0) * 100).toFixed(0)}%`).join(', ');
  return [
    {
      part: 'model',
      case: caseName(load, false),
      metric: 'rate-limit accounting',
      value: overhead * 100,
      unit: '% CPU',
      note: `server CPU per response, limits on (none reached) over off; pairs: ${shown}`,
    },
  ];
}

async function run(): Promise<BenchRow[]> {
  const servers: ModelProcess[] = [];
  const rows: BenchRow[] = [];
  try {
    servers.push(await startModelProcess(['--chunk-chars', '8']));
    servers.push(await startModelProcess(['--chunk-chars', '8', ...RATE_LIMIT_FLAGS]));
    const body = requestBody();
    for (const load of [...SATURATED, FIXED]) {
      const pairs = await measurePairs(servers as [ModelProcess, ModelProcess], load, body);
      rows.push(...modeRows(load, false, pairs.off));
      rows.push(...modeRows(load, true, pairs.on));
      rows.push(...overheadRows(load, pairs));
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
  return rows;
}

/** The `model` part of `npm run bench`. */
export const modelCapacity: BenchPart = {
  name: 'model',
  description:
    'streamed responses/s, MB/s and server CPU of the scripted model (server in its own process), without and with rate-limit accounting',
  run: async () => ({ rows: await run() }),
};
