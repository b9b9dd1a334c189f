/**
 * Capacity of the scripted model: how many streamed responses per second it serves.
 * The server runs in its own process (`dist/src/testing/serve.js`), the client here,
 * over keep-alive HTTP, so the figure is the server's, not the SDK's. Each response
 * carries ~200 output tokens, unpaced.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { scriptBlock } from '../src/testing/index.js';
import type { BenchPart, BenchRow } from './run.js';

const SERVE_ENTRY = fileURLToPath(new URL('../src/testing/serve.js', import.meta.url));
const CONCURRENCIES = [64, 256];
const REQUESTS_PER_RUN = 10_000;
const WARMUP_REQUESTS = 2000;
const RUNS = 3;
const OUTPUT_CHARS = 800; // ≈ 200 tokens

interface RunFigures {
  requestsPerSecond: number;
  megabytesPerSecond: number;
}

async function startServer(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [SERVE_ENTRY, '--port', '0', '--chunk-chars', '8'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('utf8');
      const newline = buffered.indexOf('\n');
      if (newline === -1) return;
      child.stdout?.off('data', onData);
      const match = /listening on (http:\/\/\S+)/.exec(buffered.slice(0, newline));
      if (match?.[1] === undefined)
        reject(new Error(`Unexpected first line from serve.js: ${buffered}`));
      else resolve(match[1]);
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) =>
      reject(new Error(`serve.js exited with code ${code} before listening`)),
    );
  });
  return { child, url };
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

/** CPU time (user + system) a process has used, in ms; undefined where /proc is missing. */
function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function run(): Promise<BenchRow[]> {
  const { child, url } = await startServer();
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
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
  return rows;
}

/** The `model` part of `npm run bench`. */
export const modelCapacity: BenchPart = {
  name: 'model',
  description:
    'streamed responses/s and MB/s the scripted model serves (server in its own process)',
  run,
};
