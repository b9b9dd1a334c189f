/**
 * `node dist/bench/spawn/spawn-main.js [--runs N] [--burst N] [--parked N] [--cases a,b]`
 * (`npm run bench:spawn-main`): issue 30's spawn targets, the main thread's side of a spawn.
 * Each case runs in a fresh process (this file forks itself with `--case NAME`), the cases
 * interleaved run by run, against a scripted model in a process of its own
 * (`spawn-burst-model.ts`), on a warm two-thread engine with the governor on (the default).
 *
 * Per case:
 * - **burst**: `--burst` (1,000) `engine.spawn` calls in one synchronous loop, each child one
 *   step that replies after 300 ms. `syncUs`: wall time inside the loop / children. `mainUs`:
 *   CPU of the main thread alone (`/proc/self/task/PID/schedstat`, in ns) from the loop's start
 *   until every child's `started` is read on main, / children; `eluUs`: the same span's
 *   event-loop active time (`performance.eventLoopUtilization`) / children. `eldP99Ms`: the main
 *   thread's event-loop delay p99 (`monitorEventLoopDelay`, 1 ms resolution, minus it) from the
 *   burst's start until the last result.
 * - **cancel** (case `cancel` only): `--parked` (10,000) children parked in a provider call (a
 *   600 s scripted delay), the governor off so every request goes out; once the model holds
 *   every request, each handle is cancelled in one loop. `cancelMs`: the loop's start → every
 *   result settled (all `cancelled`). `closedMs`: the loop's start → the model has seen every
 *   parked request's connection close (its `clientClosed`, polled every 20 ms).
 *
 * Cases: `plain`; `ungoverned` (`plain` with the governor off: no admission traffic on main);
 * `host` (a host tool registered); `schema` (an `outputSchema`); `budget` (a
 * budget of tokens and time); `cancel`. Prints each run as a JSON line, then the medians.
 */

import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { intFlag, parseCommand } from '../../src/cli/flags.js';
import { Engine, type EngineOptions } from '../../src/main/engine.js';
import type { AgentOptions } from '../../src/main/engine-options.js';
import type { ChildHandle } from '../../src/main/runners/local/pool.js';
import { isEntryScript } from '../../src/testing/entry-script.js';
import { scriptBlock } from '../../src/testing/index.js';
import { median } from '../common/stats.js';
import { NOT_FOR_THE_LOCAL_MODEL } from '../engines/fork.js';

const CASES = ['plain', 'ungoverned', 'host', 'schema', 'budget', 'cancel'] as const;
type CaseName = (typeof CASES)[number];

const QUICK = `Reply at once.\n\n${scriptBlock({ steps: [{ reply: 'warm' }] })}`;
const SLOW = `Reply in a while.\n\n${scriptBlock({ steps: [{ delayMs: 300, reply: { ok: true } }] })}`;
const PARKED = `Wait for the answer.\n\n${scriptBlock({ steps: [{ delayMs: 600_000, reply: 'x' }] })}`;

export interface MainRun {
  case: CaseName;
  children: number;
  syncUs?: number;
  syncCpuUs?: number;
  mainUs?: number;
  eluUs?: number;
  eldP99Ms?: number;
  eldMaxMs?: number;
  allMs?: number;
  cancelMs?: number;
  closedMs?: number;
  cancelled?: number;
}

/** The main thread's CPU time so far, in ns (Linux); NaN elsewhere. */
function mainThreadCpuNs(): number {
  try {
    const text = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8');
    return Number(text.split(' ')[0]);
  } catch {
    return Number.NaN;
  }
}

async function startModel(): Promise<{
  child: ChildProcess;
  url: string;
  stats(): Promise<{ requests: number; clientClosed: number }>;
}> {
  const file = fileURLToPath(new URL('./spawn-burst-model.js', import.meta.url));
  const child = fork(file, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [hello] = (await once(child, 'message')) as [{ url: string }];
  const stats = async (): Promise<{ requests: number; clientClosed: number }> => {
    child.send('stats');
    for (;;) {
      const [reply] = (await once(child, 'message')) as [
        { stats?: { requests: number; clientClosed: number } },
      ];
      if (reply.stats) return reply.stats;
    }
  };
  return { child, url: hello.url, stats };
}

function engineOptions(
  name: CaseName,
  url: string,
  logDir: string,
  children: number,
): EngineOptions {
  return {
    threads: 2,
    agentsPerThread: Math.ceil(children / 2) + 256,
    logDir,
    governor:
      name === 'cancel' || name === 'ungoverned'
        ? { enabled: false, state: false }
        : { state: false },
    provider: {
      baseURL: url,
      model: 'cohort-bench',
      requestTimeoutMs: 3_600_000,
      idleTimeoutMs: 3_600_000,
      maxRetries: 0,
    },
    ...(name === 'host'
      ? {
          hostTools: [
            {
              name: 'lookup',
              description: 'Looks a document up.',
              inputSchema: { type: 'object', properties: { id: { type: 'string' } } },
              run: () => 'found',
            },
          ],
        }
      : {}),
  };
}

function agentOptions(name: CaseName): AgentOptions {
  const base: AgentOptions = { prompt: SLOW, maxSteps: 2 };
  if (name === 'schema') {
    return {
      ...base,
      outputSchema: {
        type: 'object',
        properties: { ok: { type: 'boolean' } },
        required: ['ok'],
      },
    };
  }
  if (name === 'budget') return { ...base, budget: { inputTokens: 1_000_000, timeMs: 600_000 } };
  return base;
}

/** Resolves once every child's `started` has been read on main (it is no longer `queued`). */
async function allStarted(handles: readonly ChildHandle[]): Promise<void> {
  // Looked at every 2 ms, not every turn: waiting on `setImmediate` would spin main's event
  // loop and charge the bench's own polling to the engine.
  let from = 0;
  for (;;) {
    while (from < handles.length && handles[from]!.status !== 'queued') from++;
    if (from === handles.length) return;
    await sleep(2);
  }
}

async function measureBurst(engine: Engine, name: CaseName, children: number): Promise<MainRun> {
  const options = agentOptions(name);
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  const handles: ChildHandle[] = [];
  histogram.enable();
  const elu = performance.eventLoopUtilization();
  const cpu = mainThreadCpuNs();
  const begin = performance.now();
  for (let index = 0; index < children; index++) handles.push(engine.spawn(options));
  const syncMs = performance.now() - begin;
  const syncNs = mainThreadCpuNs() - cpu;
  await allStarted(handles);
  const mainNs = mainThreadCpuNs() - cpu;
  const active = performance.eventLoopUtilization(elu).active;
  const results = await Promise.all(handles.map((handle) => handle.result));
  const allMs = performance.now() - begin;
  histogram.disable();
  const bad = results.filter((result) => result.outcome !== 'complete');
  if (bad.length > 0) throw new Error(`${bad.length} children did not complete: ${bad[0]?.reason}`);
  return {
    case: name,
    children,
    syncUs: (syncMs * 1000) / children,
    syncCpuUs: syncNs / 1000 / children,
    mainUs: mainNs / 1000 / children,
    eluUs: (active * 1000) / children,
    eldP99Ms: Math.max(0, histogram.percentile(99) / 1e6 - 1),
    eldMaxMs: Math.max(0, histogram.max / 1e6 - 1),
    allMs,
  };
}

async function measureCancel(
  engine: Engine,
  model: { stats(): Promise<{ requests: number; clientClosed: number }> },
  children: number,
): Promise<MainRun> {
  const before = await model.stats();
  const handles: ChildHandle[] = [];
  // In waves, so the spawns themselves are not what is measured.
  for (let first = 0; first < children; first += 500) {
    for (let index = first; index < Math.min(children, first + 500); index++) {
      handles.push(engine.spawn({ prompt: PARKED, maxSteps: 1, streamText: false }));
    }
    await allStarted(handles);
  }
  for (const deadline = performance.now() + 120_000; performance.now() < deadline; ) {
    if ((await model.stats()).requests - before.requests >= children) break;
    await sleep(50);
  }
  // Parked: every request is at the model, the children idle in their provider calls.
  await sleep(1000);
  const begin = performance.now();
  for (const handle of handles) handle.cancel();
  const results = await Promise.all(handles.map((handle) => handle.result));
  const cancelMs = performance.now() - begin;
  // The results may come before the sockets close: the model must still see every one close.
  for (const deadline = performance.now() + 60_000; performance.now() < deadline; ) {
    if ((await model.stats()).clientClosed - before.clientClosed >= children) break;
    await sleep(20);
  }
  const closedMs = performance.now() - begin;
  return {
    case: 'cancel',
    children,
    cancelMs,
    closedMs,
    cancelled: results.filter((result) => result.outcome === 'cancelled').length,
  };
}

async function runCase(name: CaseName, burst: number, parked: number): Promise<MainRun> {
  const model = await startModel();
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-spawn-main-'));
  const children = name === 'cancel' ? parked : burst;
  const engine = await Engine.start(engineOptions(name, model.url, logDir, children));
  try {
    // Warm: every thread has run children, main's spawn path for this case's options is
    // compiled (a schema's check is then cached, as for a service's second request).
    const warm = { ...(name === 'cancel' ? {} : agentOptions(name)), prompt: QUICK, maxSteps: 1 };
    for (let round = 0; round < 3; round++) {
      await Promise.all(Array.from({ length: 200 }, () => engine.run(warm)));
    }
    await sleep(300);
    return name === 'cancel'
      ? await measureCancel(engine, model, parked)
      : await measureBurst(engine, name, burst);
  } finally {
    await engine.close();
    model.child.disconnect();
    rmSync(logDir, { recursive: true, force: true });
  }
}

async function runInFreshProcess(args: string[]): Promise<MainRun> {
  const file = fileURLToPath(import.meta.url);
  const child = fork(file, args, {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    execArgv: process.execArgv,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const [code] = (await once(child, 'exit')) as [number];
  if (code !== 0) throw new Error(`case ${args.join(' ')} exited ${code}`);
  return JSON.parse(output.trim().split('\n').at(-1)!) as MainRun;
}

async function main(argv: string[]): Promise<void> {
  // The engine runs in this process: its workers would send real credentials to the local
  // model in headers.
  for (const name of NOT_FOR_THE_LOCAL_MODEL) delete process.env[name];
  const flag = { type: 'string' } as const;
  const { values } = parseCommand(argv, {
    runs: flag,
    burst: flag,
    parked: flag,
    cases: flag,
    case: flag,
  });
  const burst = intFlag(values, 'burst', 1, 100_000) ?? 1000;
  const parked = intFlag(values, 'parked', 1, 100_000) ?? 10_000;
  if (typeof values.case === 'string') {
    console.log(JSON.stringify(await runCase(values.case as CaseName, burst, parked)));
    return;
  }
  const runs = intFlag(values, 'runs', 1, 100) ?? 3;
  const cases = (typeof values.cases === 'string' ? values.cases.split(',') : CASES).filter(
    (name): name is CaseName => (CASES as readonly string[]).includes(name),
  );
  const all: MainRun[] = [];
  for (let run = 0; run < runs; run++) {
    for (const name of cases) {
      const result = await runInFreshProcess([
        '--case',
        name,
        '--burst',
        String(burst),
        '--parked',
        String(parked),
      ]);
      console.error(JSON.stringify({ run, ...result }));
      all.push(result);
    }
  }
  const medians = cases.map((name) => {
    const mine = all.filter((result) => result.case === name);
    const figure = (key: keyof MainRun) => {
      const values = mine.map((result) => result[key]).filter((value) => typeof value === 'number');
      return values.length === 0 ? undefined : Number(median(values as number[]).toFixed(2));
    };
    return {
      case: name,
      runs: mine.length,
      syncUs: figure('syncUs'),
      syncCpuUs: figure('syncCpuUs'),
      mainUs: figure('mainUs'),
      eluUs: figure('eluUs'),
      eldP99Ms: figure('eldP99Ms'),
      eldMaxMs: figure('eldMaxMs'),
      allMs: figure('allMs'),
      cancelMs: figure('cancelMs'),
      closedMs: figure('closedMs'),
      cancelled: figure('cancelled'),
    };
  });
  console.log(JSON.stringify({ options: { runs, burst, parked }, medians }, null, 1));
}

if (isEntryScript(import.meta.url)) await main(process.argv.slice(2));
