/**
 * Capacity of the scripted model: how many streamed responses per second it serves.
 * The server runs in its own process (`dist/src/testing/serve.js`), the client here,
 * over keep-alive HTTP, so the figure is the server's, not the SDK's. Each response
 * carries ~200 output tokens, unpaced.
 */
import { Agent, request } from 'node:http';
import { scriptBlock } from '../src/testing/index.js';
import { processCpuMs, startModelProcess } from './model-process.js';
import type { BenchPart, BenchRow } from './part.js';
import { median } from './stats.js';

const CONCURRENCIES = [64, 256];
const REQUESTS_PER_RUN = 10_000;
const WARMUP_REQUESTS = 2000;
const RUNS = 3;
const OUTPUT_CHARS = 800; // ≈ 200 tokens

interface RunFigures {
  requestsPerSecond: number;
  megabytesPerSecond: number;
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

async function runOnce(
  url: URL,
  concurrency: number,
  requests: number,
  body: Buffer,
): Promise<RunFigures> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  let started = 0;
  let bytes = 0;
  const begin = performance.now();
  const lane = async (): Promise<void> => {
    while (started < requests) {
      started++;
      // Not `bytes += await ...`: that reads `bytes` before the await and loses updates.
      const received = await streamOnce(url, agent, body);
      bytes += received;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  const seconds = (performance.now() - begin) / 1000;
  agent.destroy();
  return { requestsPerSecond: requests / seconds, megabytesPerSecond: bytes / 1e6 / seconds };
}

async function run(): Promise<BenchRow[]> {
  const server = await startModelProcess(['--chunk-chars', '8']);
  const { child, url } = server;
  const target = new URL('/v1/messages', url);
  const text = 'The scripted model streams this sentence as many small deltas. '
    .repeat(13)
    .slice(0, OUTPUT_CHARS);
  const body = Buffer.from(
    JSON.stringify({
      model: 'bench',
      max_tokens: 1024,
      stream: true,
      system: scriptBlock({ steps: [{ text }] }),
      messages: [{ role: 'user', content: 'Stream the scripted text.' }],
    }),
  );
  const rows: BenchRow[] = [];
  try {
    for (const concurrency of CONCURRENCIES) {
      await runOnce(target, concurrency, WARMUP_REQUESTS, body);
      const runs: RunFigures[] = [];
      const cpuBefore = processCpuMs(child.pid);
      for (let index = 0; index < RUNS; index++) {
        runs.push(await runOnce(target, concurrency, REQUESTS_PER_RUN, body));
      }
      const cpuAfter = processCpuMs(child.pid);
      const rates = runs.map((figures) => figures.requestsPerSecond);
      const note = `${RUNS} runs of ${REQUESTS_PER_RUN}: ${rates.map((rate) => rate.toFixed(0)).join(', ')}`;
      rows.push({
        part: 'model',
        case: `streams, concurrency ${concurrency}`,
        metric: 'responses/s',
        value: median(rates),
        unit: 'req/s',
        note,
      });
      rows.push({
        part: 'model',
        case: `streams, concurrency ${concurrency}`,
        metric: 'throughput',
        value: median(runs.map((figures) => figures.megabytesPerSecond)),
        unit: 'MB/s',
        note: `~200 output tokens, ${OUTPUT_CHARS / 8} deltas per response, unpaced`,
      });
      if (cpuBefore !== undefined && cpuAfter !== undefined) {
        rows.push({
          part: 'model',
          case: `streams, concurrency ${concurrency}`,
          metric: 'server CPU',
          value: ((cpuAfter - cpuBefore) * 1000) / (RUNS * REQUESTS_PER_RUN),
          unit: 'µs/resp',
          note: 'CPU time of the server process per response (the client shares the cores)',
        });
      }
    }
  } finally {
    await server.stop();
  }
  return rows;
}

/** The `model` part of `npm run bench`. */
export const modelCapacity: BenchPart = {
  name: 'model',
  description:
    'streamed responses/s and MB/s the scripted model serves (server in its own process)',
  run: async () => ({ rows: await run() }),
};
