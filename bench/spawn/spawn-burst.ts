/**
 * `node dist/bench/spawn/spawn-burst.js [--children N] [--wave W] [--settle-ms MS] [--governor]`
 * (`npm run bench:spawn-burst`): issue 11's spawn and cancel targets, measured where
 * the `spawn` part cannot see. N children are parked in a provider call on a warm two-thread
 * engine, spawned in waves of W (each wave waits for its children's `step-start`), then
 * `engine.close()` cancels them all. Besides the time until every child started, it reports:
 * - when the scripted model had received every child's request (the model counts them, in its
 *   own process): a request held by the rate-limit governor does not count;
 * - the CPU of this process (main and workers) from the first spawn until then;
 * - how long close took, and how many results main had to make because a worker was terminated
 *   (`engine.stats.mainResults`): a worker that misses the cancel grace loses every child on it.
 * `--settle-ms` waits between the last spawn and close, so the children's log writes can finish.
 * The governor is off unless `--governor`. One run per process, as one JSON line: run it again
 * for medians (alternating with another build to compare). Figures: docs/BENCHMARKS.md,
 * "Messaging and spawn".
 */

import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { intFlag, parseCommand } from '../../src/cli/flags.js';
import { Engine } from '../../src/main/engine.js';
import type { AgentEvent } from '../../src/shared/events.js';
import type { AgentResult } from '../../src/shared/result.js';
import { isEntryScript } from '../../src/testing/entry-script.js';
import { scriptBlock } from '../../src/testing/index.js';
import { NOT_FOR_THE_LOCAL_MODEL } from '../engines/fork.js';

const PARKED = `Wait for the answer.\n\n${scriptBlock({ steps: [{ delayMs: 600_000, reply: 'x' }] })}`;
const QUICK = `Reply at once.\n\n${scriptBlock({ steps: [{ reply: 'warm' }] })}`;

interface BurstOptions {
  children: number;
  wave: number;
  settleMs: number;
  governor: boolean;
}

export interface BurstRun {
  /** First spawn → every child's `step-start` read on main. */
  startedMs: number;
  /** First spawn → every child's request received by the model (NaN if some never were). */
  requestedMs: number;
  requested: number;
  /** CPU of this process (every thread) from the first spawn until `requestedMs`, per child. */
  cpuUsPerChild: number;
  closeMs: number;
  /** Results main made for children its workers did not settle (terminated workers). */
  mainResults: number;
}

async function startModel(): Promise<{
  child: ChildProcess;
  url: string;
  requests(): Promise<number>;
}> {
  const file = fileURLToPath(new URL('./spawn-burst-model.js', import.meta.url));
  const child = fork(file, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [hello] = (await once(child, 'message')) as [{ url: string }];
  const requests = async (): Promise<number> => {
    child.send('stats');
    for (;;) {
      const [reply] = (await once(child, 'message')) as [{ stats?: { requests: number } }];
      if (reply.stats) return reply.stats.requests;
    }
  };
  return { child, url: hello.url, requests };
}

/** Spawns `options.children` parked children in waves; resolves when all have started. */
async function spawnAll(engine: Engine, options: BurstOptions, results: Promise<AgentResult>[]) {
  for (let first = 0; first < options.children; first += options.wave) {
    const size = Math.min(options.wave, options.children - first);
    await Promise.all(
      Array.from(
        { length: size },
        () =>
          new Promise<void>((resolve) => {
            const onEvent = (event: AgentEvent): void => {
              if (event.type === 'step-start' || event.type === 'agent-settle') resolve();
            };
            const handle = engine.spawn({
              prompt: PARKED,
              maxSteps: 1,
              streamText: false,
              onEvent,
            });
            results.push(handle.result);
          }),
      ),
    );
  }
}

export async function runBurst(options: BurstOptions): Promise<BurstRun> {
  const model = await startModel();
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-burst-'));
  const engine = await Engine.start({
    threads: 2,
    agentsPerThread: Math.ceil(options.children / 2),
    logDir,
    // A cold start every run: no governor state from an earlier one.
    governor: { state: false },
    provider: {
      baseURL: model.url,
      model: 'cohort-bench',
      requestTimeoutMs: 3_600_000,
      idleTimeoutMs: 3_600_000,
      maxRetries: 0,
    },
    ...(options.governor ? {} : { governor: { enabled: false } }),
  });
  try {
    await Promise.all(
      Array.from({ length: 256 }, () => engine.run({ prompt: QUICK, maxSteps: 1 })),
    );
    await sleep(200);
    const before = await model.requests();
    const results: Promise<AgentResult>[] = [];
    const begin = performance.now();
    const cpu = process.cpuUsage();
    await spawnAll(engine, options, results);
    const startedMs = performance.now() - begin;
    let requested = 0;
    let requestedMs = Number.NaN;
    for (const deadline = begin + 60_000; performance.now() < deadline; await sleep(20)) {
      requested = (await model.requests()) - before;
      if (requested >= options.children) {
        requestedMs = performance.now() - begin;
        break;
      }
    }
    const used = process.cpuUsage(cpu);
    await sleep(options.settleMs);
    const closeBegin = performance.now();
    await engine.close();
    const closeMs = performance.now() - closeBegin;
    await Promise.all(results);
    return {
      startedMs,
      requestedMs,
      requested,
      cpuUsPerChild: (used.user + used.system) / options.children,
      closeMs,
      mainResults: engine.stats.mainResults,
    };
  } finally {
    await engine.close();
    model.child.disconnect();
    rmSync(logDir, { recursive: true, force: true });
  }
}

async function main(argv: string[]): Promise<void> {
  // The engine runs in this process: its workers would send real credentials to the local
  // model in headers.
  for (const name of NOT_FOR_THE_LOCAL_MODEL) delete process.env[name];
  const flag = { type: 'string' } as const;
  const { values } = parseCommand(argv, {
    children: flag,
    wave: flag,
    'settle-ms': flag,
    governor: { type: 'boolean' },
  });
  const options: BurstOptions = {
    children: intFlag(values, 'children', 1, 100_000) ?? 10_000,
    wave: intFlag(values, 'wave', 1, 100_000) ?? 250,
    settleMs: intFlag(values, 'settle-ms', 0, 600_000) ?? 500,
    governor: values.governor === true,
  };
  console.log(JSON.stringify({ options, ...(await runBurst(options)) }));
}

if (isEntryScript(import.meta.url)) await main(process.argv.slice(2));
