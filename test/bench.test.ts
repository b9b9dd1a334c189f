/**
 * `npm run bench` end to end on a tiny sweep: the runner forks its measuring processes, drives
 * real engines against the scripted model in its own process, and writes a table, a JSON report
 * and an SVG chart. Only their content is checked, never a timing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { builtPath } from '../bench/common/paths.js';
import { agentPrompt } from '../bench/common/scenario.js';
import { type BenchEngine, startEngine } from '../bench/engines/engines.js';
import { caseFigures, steadyWindow, windowRate } from '../bench/governor/governor-summary.js';
import { distinctMessages } from '../bench/governor/governor-unreachable.js';
import {
  type CpuProfile,
  profileFiles,
  profileSummaryCommand,
  summariseProfile,
  threadOf,
} from '../bench/profile/profile-summary.js';
import { runBench } from '../bench/run.js';
import { benchCommand } from '../src/cli/commands/bench.js';
import {
  type ScriptedModel,
  type ScriptedRequestEvent,
  startScriptedModel,
} from '../src/testing/index.js';
import { collector, expectCancelledOnClose, expectRetriesCounted } from './bench-helpers.js';
import { runCli } from './cli-helpers.js';
import { tempDir } from './helpers.js';
import { redisMissing } from './redis.js';

/**
 * The file's bench runs, two at a time from its start. A run spends most of its time waiting on
 * its measuring processes, its model's latencies and its sampling windows, so a second run fills
 * those waits instead of the file sitting them out. Nothing here asserts a timing: what a run
 * reports beside another is what it reports alone, every count and shape checked the same.
 * A run `alone` waits for the others to end and keeps them waiting: `--profile` sets a variable
 * that every measuring process started meanwhile would inherit. Each describe registers its run
 * as it is collected and awaits it in its beforeAll; the file's beforeAll starts them.
 */
class BenchRuns {
  readonly #waiting: { alone: boolean; start: () => void }[] = [];
  #running = 0;
  #alone = false;
  #started = false;

  run(argv: string[], io: { stdout: BenchOutput; stderr: BenchOutput }, alone = false) {
    const done = new Promise<number>((resolve, reject) => {
      this.#waiting.push({
        alone,
        start: () => {
          runBench(argv, io)
            .then(resolve, reject)
            .finally(() => {
              this.#running--;
              this.#alone = false;
              this.#next();
            });
        },
      });
    });
    // Awaited by its describe's beforeAll; a run whose describe is filtered out fails unheard.
    done.catch(() => {});
    this.#next();
    return done;
  }

  start(): void {
    this.#started = true;
    this.#next();
  }

  #next(): void {
    while (this.#started && !this.#alone && this.#waiting.length > 0 && this.#running < 2) {
      const head = this.#waiting[0]!;
      if (head.alone && this.#running > 0) return;
      this.#waiting.shift();
      this.#running++;
      this.#alone = head.alone;
      head.start();
    }
  }
}

type BenchOutput = ReturnType<typeof collector>;
const benchRuns = new BenchRuns();
beforeAll(() => benchRuns.start());

const ENGINES = ['cohort', 'in-process', 'thread-per-child', 'sdk-loop'];
const LEVELS = [4];
const AGENTS = 8;
const STEPS = 2;

/** Every number in `value`, with the path that leads to it. */
function numbersIn(value: unknown, at = '$'): [string, number][] {
  if (typeof value === 'number') return [[at, value]];
  if (Array.isArray(value))
    return value.flatMap((item, index) => numbersIn(item, `${at}[${index}]`));
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).flatMap(([key, item]) => numbersIn(item, `${at}.${key}`));
  }
  return [];
}

describe('npm run bench: a tiny sweep of every engine on the sdk transport, and the spawn part', () => {
  const dir = tempDir('cohort-bench-test-');
  const out = path.join(dir, 'report.json');
  const chart = path.join(dir, 'chart.svg');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let report: any;

  const run = benchRuns.run(
    [
      'concurrency',
      'spawn',
      '--agents',
      String(AGENTS),
      '--steps',
      String(STEPS),
      '--concurrency',
      LEVELS.join(','),
      '--ttft-ms',
      '5',
      '--cpu-ms',
      '1',
      '--spawn-children',
      '3',
      '--cohort-children',
      '12',
      '--transport',
      'sdk',
      '--governor',
      'off',
      // One cohort thread: each case is a fresh process, and every thread costs it a start-up.
      '--threads',
      '1',
      '--out',
      out,
      '--chart',
      chart,
    ],
    { stdout, stderr },
  );
  beforeAll(async () => {
    code = await run;
    report = JSON.parse(readFileSync(out, 'utf8'));
    // Eleven engine processes, one after another: on two busy cores this has passed a minute.
  }, 120_000);

  it('exits 0 and prints a table that names every engine and the outputs', () => {
    expect(code, stderr.text()).toBe(0);
    const table = stdout.text();
    for (const engine of ENGINES) expect(table).toContain(engine);
    expect(table).toContain('agents/s');
    expect(table).toContain(`report: ${out}`);
    expect(table).toContain(`chart: ${chart}`);
    expect(table).toContain('transport sdk (sdk-loop: the SDK)');
    expect(report.transport).toBe('sdk');
    expect(report.parts.concurrency.data.transport).toBe('sdk');
    expect(table).toContain('governor off');
    expect(report.parts.concurrency.data.governor).toBe(false);
  });

  it('reports each engine at each level with every metric, finite and not negative', () => {
    const data = report.parts.concurrency.data;
    expect(data.scenario).toMatchObject({ agents: AGENTS, steps: STEPS, ttftMs: 5, cpuMs: 1 });
    const keys = data.summary.map((item: { engine: string; concurrency: number }) => [
      item.engine,
      item.concurrency,
    ]);
    expect(keys).toEqual(LEVELS.flatMap((level) => ENGINES.map((engine) => [engine, level])));
    for (const item of data.summary) {
      for (const field of [
        'agentsPerSecond',
        'providerCallsPerSecond',
        'latencyP50Ms',
        'latencyP95Ms',
        'latencyP99Ms',
        'efficiency',
        'rateLimited429',
        'overloaded529',
        'eventLoopP50Ms',
        'eventLoopP99Ms',
        'peakRssMB',
        'rssPerLiveAgentMB',
        'idealMakespanMs',
        'makespanMs',
        'cpuPerCallMs',
      ]) {
        expect(item[field], `${item.engine}@${item.concurrency}.${field}`).toBeTypeOf('number');
      }
      expect(item.completed).toBe(AGENTS);
      expect(item.maxLive).toBe(item.concurrency);
      expect(item.latencyP50Ms).toBeLessThanOrEqual(item.latencyP99Ms);
    }
    for (const [where, value] of numbersIn(data.summary)) {
      expect(Number.isFinite(value) && value >= 0, `${where} = ${value}`).toBe(true);
    }
  });

  it('accounts for every agent of every case: outcomes add up, each took its steps', () => {
    const measurements = report.parts.concurrency.data.measurements;
    expect(measurements).toHaveLength(ENGINES.length * LEVELS.length);
    for (const measurement of measurements) {
      const outcomes = Object.values(measurement.outcomes) as number[];
      expect(outcomes.reduce((sum, count) => sum + count, 0)).toBe(AGENTS);
      expect(measurement.outcomes.complete).toBe(AGENTS);
      expect(measurement.steps).toBe(AGENTS * STEPS);
      expect(measurement.providerCalls).toBe(AGENTS * STEPS);
      expect(measurement.rateLimited + measurement.overloaded).toBe(0);
      if (measurement.engine === 'in-process' || measurement.engine === 'sdk-loop') {
        expect(measurement.threads).toBe(0);
      } else if (measurement.engine === 'thread-per-child') {
        expect(measurement.threads).toBe(measurement.concurrency);
      } else expect(measurement.threads).toBe(1); // --threads 1 reached the engine
    }
  });

  it('draws an SVG chart with one series per engine', () => {
    const svg = readFileSync(chart, 'utf8');
    expect(svg.trimStart().startsWith('<svg')).toBe(true);
    for (const engine of ENGINES) expect(svg).toContain(`>${engine}</text>`);
    // One line path per engine and panel (throughput, event-loop delay).
    const lines = svg.match(/<path[^>]*stroke="#[0-9a-f]{6}"[^>]*stroke-width="2"/g) ?? [];
    expect(lines.length).toBe(ENGINES.length * 2);
  });

  it('parks children side by side, then cancels every one of them', () => {
    const data = report.parts.spawn.data;
    const sides = data.summary.map((item: { engine: string; children: number }) => [
      item.engine,
      item.children,
    ]);
    expect(sides).toEqual([
      ['cohort', 3],
      ['thread-per-child', 3],
      ['cohort', 12],
    ]);
    for (const measurement of data.measurements) {
      expect(measurement.outcomes.cancelled).toBe(measurement.children);
      for (const [where, value] of numbersIn(measurement)) {
        expect(Number.isFinite(value) && value >= 0, `${where} = ${value}`).toBe(true);
      }
    }
    expect(data.summary[1].threads).toBe(3);
  });
});

describe('bench flags', () => {
  const cases: [string[], RegExp][] = [
    [['--concurrency', '5,x'], /`--concurrency`.*comma-separated list of whole numbers.*got `5,x`/],
    [
      ['--engines', 'cohort,bogus'],
      /`--engines`.*cohort, in-process, thread-per-child, sdk-loop, ai-sdk, langchain, got `cohort,bogus`/,
    ],
    [['--transport', 'fetch'], /Expected `--transport` to be undici or sdk, got `fetch`/],
    [['--governor', 'maybe'], /Expected `--governor` to be on or off, got `maybe`/],
    [['transport', '--calls', '0'], /`--calls` to be a whole number from 1 to .*, got `0`/],
    [['--overload', '2'], /`--overload` to be a number from 0 to 1, got `2`/],
    [
      ['--spawn-children', '300'],
      /`--spawn-children` to be a whole number from 1 to 256, got `300`/,
    ],
    [
      ['nonsense'],
      /Expected a bench part \(model, transport, concurrency, spawn, governor, cache, scale, peers, embed, lanes, dashboard\), got `nonsense`/,
    ],
    [['governor', '--itpm', '-5'], /`--itpm` to be a whole number from 0 to .*, got `-5`/],
    [['cache', '--prefixes', '0'], /`--prefixes` to be a whole number from 1 to 1000, got `0`/],
    [
      ['governor', '--scenarios', 'rate-limit,random-529-2'],
      /`--scenarios` to be a comma-separated list of rate-limit, random-529-1, .*, unreachable, got `rate-limit,random-529-2`/,
    ],
    [['--bogus'], /bogus/],
    [['--provider', 'anthropic'], /ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL/],
  ];
  it.each(cases)('%j is a usage error (exit 2) that names the flag', async (argv, message) => {
    const stdout = collector();
    const stderr = collector();
    const code = await runBench(argv, { stdout, stderr, env: {} });
    expect(code).toBe(2);
    expect(stderr.text()).toMatch(message);
    expect(stdout.text()).toBe('');
  });

  it('cohort bench --help prints the usage', async () => {
    const stdout = collector();
    expect(await runBench(['--help'], { stdout })).toBe(0);
    expect(stdout.text()).toContain('Usage: cohort bench');
  });

  it('benchCommand loads the runner from the sources, and answers --help', async () => {
    const write = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await benchCommand(['--help'])).toBe(0);
      expect(write.mock.calls.map(([chunk]) => String(chunk)).join('')).toContain(
        'Usage: cohort bench',
      );
    } finally {
      write.mockRestore();
    }
  });

  it('the built CLI runs `cohort bench` with its flags: usage on --help, exit 2 on a bad flag', async () => {
    const help = runCli(['bench', '--help']);
    expect(await help.exit).toEqual({ code: 0, signal: null });
    expect(help.stdout()).toContain('Usage: cohort bench');
    const bad = runCli(['bench', '--overload', '2']);
    expect(await bad.exit).toEqual({ code: 2, signal: null });
    expect(bad.stderr()).toMatch(/`--overload` to be a number from 0 to 1, got `2`/);
    expect(bad.stdout()).toBe('');
    const transport = runCli(['bench', 'transport', '--transport', 'http2']);
    expect(await transport.exit).toEqual({ code: 2, signal: null });
    expect(transport.stderr()).toMatch(/Expected `--transport` to be undici or sdk, got `http2`/);
    expect(transport.stdout()).toBe('');
  });
});

const GOVERNOR_CASES = ['governor', 'governor, told the limits', 'no governor'];
const GOVERNOR_AGENTS = 20;
const GOVERNOR_STEPS = 2;

describe('npm run bench governor: a tiny run of the rate-limit and random-529-20 scenarios', () => {
  const dir = tempDir('cohort-bench-governor-');
  const out = path.join(dir, 'report.json');
  const chart = path.join(dir, 'chart.svg');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let rateLimit: any[];
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let random: any[];

  const run = benchRuns.run(
    [
      'governor',
      '--scenarios',
      'random-529-20,rate-limit',
      '--agents',
      String(GOVERNOR_AGENTS),
      '--steps',
      String(GOVERNOR_STEPS),
      '--concurrency',
      '4',
      '--ttft-ms',
      '5',
      '--cpu-ms',
      '1',
      // About 300 input tokens a request: a 1 s bucket holds about 16 of the 40 requests.
      '--itpm',
      '300000',
      '--bucket-seconds',
      '1',
      '--threads',
      '1',
      '--out',
      out,
      '--chart',
      chart,
    ],
    { stdout, stderr },
  );
  beforeAll(async () => {
    code = await run;
    data = JSON.parse(readFileSync(out, 'utf8')).parts.governor.data;
    rateLimit = data.summary.filter((item: { scenario: string }) => item.scenario === 'rate-limit');
    random = data.summary.filter((item: { scenario: string }) => item.scenario === 'random-529-20');
  }, 60_000);

  it('exits 0 and prints both scenarios side by side, the target lines and the outputs', () => {
    expect(code, stderr.text()).toBe(0);
    const table = stdout.text();
    for (const name of GOVERNOR_CASES) expect(table).toContain(name);
    expect(table).toMatch(/^rate-limit +20 × 2 +4 /m);
    expect(table).toMatch(
      /^random-529-20 +20 × 2 +4 .* on\/off ≤ 1\.1×, all complete +\d+\.\d\d×, 0 failed +(met|NOT met)$/m,
    );
    expect(table).toMatch(/target at 4 \(governor\): ≥ 95% of the limit, ≤ 1% 429, 0 failed/);
    expect(table).toContain(`chart: ${chart}`);
    expect(data.scenarios.map((item: { name: string }) => item.name)).toEqual([
      'rate-limit',
      'random-529-20',
    ]);
  });

  it('uses the ITPM given and sets RPM from the probe so that ITPM binds', () => {
    const perRequest =
      data.probeInputTokensByStep.reduce((sum: number, tokens: number) => sum + tokens, 0) /
      GOVERNOR_STEPS;
    expect(data.probeInputTokensByStep).toHaveLength(GOVERNOR_STEPS);
    expect(data.limits.itpm).toBe(300_000);
    expect(data.limits.bucketSeconds).toBe(1);
    expect(data.limits.rpm).toBe(Math.ceil((1.5 * 300_000) / perRequest / 100) * 100);
    for (const item of rateLimit) expect(item.binding).toBe('itpm');
    for (const item of random) expect(item.binding).toBeNull();
  });

  it('accounts for every agent and request of every rate-limit case, on the model and in the series', () => {
    expect(rateLimit.map((item: { case: string }) => item.case)).toEqual(GOVERNOR_CASES);
    for (const item of rateLimit) {
      expect(item.completed + item.failed, item.case).toBe(GOVERNOR_AGENTS);
      expect(item.requests, item.case).toBe(item.admitted + item.rateLimited429);
      expect(item.admitted, item.case).toBeGreaterThanOrEqual(item.completed * GOVERNOR_STEPS);
      for (const field of ['wallSeconds', 'rateLimitedPercent', 'cpuPerCallMs']) {
        expect(Number.isFinite(item[field]) && item[field] >= 0, `${item.case}.${field}`).toBe(
          true,
        );
      }
      const points = data.series.filter((point: { case: string }) => point.case === item.case);
      const sum = (field: string) =>
        points.reduce((total: number, point: Record<string, number>) => total + point[field]!, 0);
      expect(sum('requests'), item.case).toBe(item.admitted);
      expect(sum('refused'), item.case).toBe(item.rateLimited429);
    }
    // The governed cases never fail an agent for rate limits: waiting is not failing.
    for (const item of rateLimit.slice(0, 2)) {
      expect(item.failed, item.case).toBe(0);
      expect(item.admitted, item.case).toBe(GOVERNOR_AGENTS * GOVERNOR_STEPS);
      expect(item.learnedItpm, item.case).toBe(300_000);
    }
    expect(rateLimit[2].governorLimit).toBeNull();
  });

  it('meets the seeded random 529s with the governor on and off, every task complete with it on', () => {
    expect(random.map((item: { case: string }) => item.case)).toEqual(['governor', 'no governor']);
    for (const item of random) {
      expect(item.completed + item.failed, item.case).toBe(GOVERNOR_AGENTS);
      // No rate limits: every request is admitted, and a 529 comes after admission.
      expect(item.rateLimited429, item.case).toBe(0);
      expect(item.requests, item.case).toBe(item.admitted);
      expect(item.overloaded529, item.case).toBeGreaterThan(0);
      expect(item.requests, item.case).toBeGreaterThanOrEqual(
        item.completed * GOVERNOR_STEPS + item.overloaded529,
      );
      expect(item.capped, item.case).toBe(false);
      expect(item.windowSeconds, item.case).toBeNull();
    }
    expect(random[0].failed).toBe(0);
    const comparison = data.comparisons.find(
      (item: { scenario: string }) => item.scenario === 'random-529-20',
    );
    expect(comparison).toMatchObject({ concurrency: 4, steps: GOVERNOR_STEPS });
    expect(comparison.wallRatio).toBeCloseTo(random[0].wallSeconds / random[1].wallSeconds, 6);
    expect(typeof comparison.met).toBe('boolean');
  });

  it('has rows with the columns of every part, and draws one line per rate-limit case', () => {
    const rows = JSON.parse(readFileSync(out, 'utf8')).parts.governor.rows;
    for (const [scenario, cases] of [
      ['rate-limit', GOVERNOR_CASES],
      ['random-529-20', ['governor', 'no governor']],
    ] as const) {
      for (const name of cases) {
        const metrics = rows
          .filter((row: { case: string }) => row.case === `${scenario}: ${name} at 4`)
          .map((row: { metric: string }) => row.metric);
        expect(metrics).toEqual(
          expect.arrayContaining([
            'requests answered 429',
            'requests answered 429, share',
            'requests answered 529',
            'completed agents',
            'failed agents',
            'wall time',
          ]),
        );
      }
    }
    expect(
      rows.filter((row: { metric: string }) => row.metric === 'wall time, governor / no governor'),
    ).toHaveLength(2);
    for (const row of rows) {
      expect(Object.keys(row).sort()).toEqual(
        expect.arrayContaining(['case', 'metric', 'part', 'unit', 'value']),
      );
    }
    const svg = readFileSync(chart, 'utf8');
    for (const name of GOVERNOR_CASES) expect(svg).toContain(`>${name}</text>`);
  });
});

describe('npm run bench governor --scenarios unreachable: cohort batch against a dead provider', () => {
  const dir = tempDir('cohort-bench-unreachable-');
  const out = path.join(dir, 'report.json');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;

  const run = benchRuns.run(
    ['governor', '--scenarios', 'unreachable', '--agents', '3', '--threads', '1', '--out', out],
    {
      stdout,
      stderr,
    },
  );
  beforeAll(async () => {
    code = await run;
    data = JSON.parse(readFileSync(out, 'utf8')).parts.governor.data;
  });

  it('times the real CLI to its exit in both cases and counts what it said', () => {
    expect(code, stderr.text()).toBe(0);
    expect(stdout.text()).toMatch(/^closed port +3 +50 /m);
    expect(stdout.text()).toMatch(/^wrong key +3 +50 /m);
    expect(data.unreachable.runs.map((item: { case: string }) => item.case)).toEqual([
      'closed port',
      'wrong key',
    ]);
    for (const item of data.unreachable.runs) {
      expect(item.timedOut, item.case).toBe(false);
      // No task can complete: the batch says so in its exit code and on stderr.
      expect(item.exitCode, item.case).toBe(1);
      expect(item.outcomes.complete ?? 0, item.case).toBe(0);
      expect(item.errorMessages, item.case).toBeGreaterThanOrEqual(1);
      expect(item.messages.join('\n'), item.case).not.toMatch(/\d/);
    }
    const [closed, wrongKey] = data.unreachable.runs;
    expect(closed.requests).toBe(0);
    expect(closed.messages.join('\n')).toMatch(/connect/);
    expect(wrongKey.requests).toBeGreaterThanOrEqual(1);
    expect(wrongKey.messages.join('\n')).toMatch(/auth/);
  });

  it('keeps the progress and summary lines out of the messages', () => {
    const text = [
      'cohort: journal in /tmp/cohort/2026-01-31T09-15-02-123Z-4711 (cohort logs show ID --run 2026-01-31T09-15-02-123Z-4711)',
      'cohort batch: 5000 task(s), 5000 to run, concurrency 50',
      'cohort batch: task t1 failed [auth]: provider auth: the API key was refused',
      'cohort batch: 12/5000 done (12 failed (12 auth)), 5.3/s, ETA 2s',
      'cohort batch: task t22 failed [auth]: provider auth: the API key was refused',
      'cohort batch: done — 3 ran (3 failed (3 auth)), 0 skipped, 0 bad line(s); results in /x',
      'cohort batch: spent 0 input + 0 output tokens, 3 steps, $0.0000',
      'cohort batch: logs: /tmp/cohort/2026-01-31T09-15-02-123Z-4711',
      'cohort batch: the provider could not be used for claude-sonnet-5: 4997 task(s) not started. Fix the provider or the key, then rerun the same command: they run, and so do the tasks that failed for it (their lines are replaced)',
    ].join('\n');
    expect(distinctMessages(text)).toEqual([
      'cohort batch: task tN failed [auth]: provider auth: the API key was refused',
    ]);
  });
});

describe('governor figures from a known admission record', () => {
  const itpm = 60_000; // 1,000 tokens a second
  const bucketSeconds = 10;
  /** A 10,000-token burst at 0, then `perSecond` tokens a second in 100-token requests. */
  function record(perSecond: number, seconds: number): [number, number][] {
    const burst: [number, number][] = Array.from({ length: 100 }, () => [0, 100]);
    const every = 100_000 / perSecond;
    const steady = Array.from(
      { length: Math.floor((seconds * 1000) / every) },
      (_, index): [number, number] => [Math.round(every * (index + 1)), 100],
    );
    return [...burst, ...steady];
  }

  it('finds the limit for a client at the limit, and 80% for one at 80%, burst left out', () => {
    for (const [share, expected] of [
      [1, 100],
      [0.8, 80],
    ] as const) {
      const amounts = record(1000 * share, 30);
      const window = steadyWindow(amounts, itpm, bucketSeconds, 30_000);
      expect(window, `share ${share}`).toBeDefined();
      const rate = windowRate(amounts, window!);
      expect(Math.abs((100 * rate) / itpm - expected), `share ${share}`).toBeLessThan(1.5);
    }
  });

  it('starts the window only once the burst is spent, for a client that spends it slowly', () => {
    // 2,000 tokens a second for 10 s drains the 10,000-token bucket at 10 s, then the limit.
    const draining = Array.from({ length: 200 }, (_, index): [number, number] => [
      (index + 1) * 50,
      100,
    ]);
    const steady = Array.from({ length: 200 }, (_, index): [number, number] => [
      10_000 + (index + 1) * 100,
      100,
    ]);
    const amounts = [...draining, ...steady];
    const window = steadyWindow(amounts, itpm, bucketSeconds, 30_000);
    expect(window?.from).toBeGreaterThanOrEqual(9_000);
    expect(Math.abs((100 * windowRate(amounts, window!)) / itpm - 100)).toBeLessThan(1.5);
  });

  it('reports no rate when the window is under a second', () => {
    const figures = caseFigures({
      measurement: {
        label: 'x',
        concurrency: 1,
        agents: 1,
        outcomes: { complete: 1, empty: 0, cancelled: 0, capped: 0, failed: 0 },
        failureReasons: [],
        startMs: 1,
        firstStartAt: 0,
        lastStartAt: 0,
        endAt: 500,
        capped: false,
        providerCalls: 1,
        processCpuMs: 2,
        inputTokens: 100,
        inputTokensByStep: [100],
        retries: { rateLimited: 0, overloaded: 0 },
        samples: [],
      },
      report: {
        admissions: [[10, 0]],
        refusals: [],
        stats: {
          requests: 1,
          streamed: 1,
          completed: 1,
          clientClosed: 0,
          rejected400: 0,
          rateLimited429: 0,
          overloaded529: 0,
          messages: 1,
          batchesCreated: 0,
          batchRequests: 0,
          batchRetrieves: 0,
          batchResultDownloads: 0,
          batchCreatesRefused: 0,
        },
      },
      limits: { rpm: 1000, itpm: 60_000, bucketSeconds: 10 },
      run: 0,
      scenario: 'rate-limit',
    });
    expect(figures).toMatchObject({ binding: 'itpm', completed: 1, failed: 0, admitted: 1 });
    expect(figures.bindingPercent).toBeNull();
    expect(figures.windowSeconds).toBeNull();
  });
});

const CACHE_CASE_LABELS = [
  'cohort, cache auto',
  'cohort, cache off',
  'sdk-loop (no cache_control)',
];
const CACHE_AGENTS = 20;
const CACHE_PREFIXES = 2;

describe('npm run bench cache: a tiny run of cache auto, cache off and the SDK loop on two shared prompts', () => {
  const dir = tempDir('cohort-bench-cache-');
  const out = path.join(dir, 'report.json');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  const of = (label: string): any =>
    data.summary.find((item: { case: string }) => item.case === label);

  const run = benchRuns.run(
    [
      'cache',
      '--agents',
      String(CACHE_AGENTS),
      '--concurrency',
      '4',
      '--ttft-ms',
      '5',
      '--prefixes',
      String(CACHE_PREFIXES),
      // About 20,000 input tokens an uncached request: a 1 s bucket holds 20 of the 60.
      '--itpm',
      '24000000',
      '--bucket-seconds',
      '1',
      '--threads',
      '1',
      '--out',
      out,
    ],
    { stdout, stderr },
  );
  beforeAll(async () => {
    code = await run;
    data = JSON.parse(readFileSync(out, 'utf8')).parts.cache.data;
  }, 60_000);

  it('exits 0 and prints every case, the three target lines and the limits given', () => {
    expect(code, stderr.text()).toBe(0);
    const table = stdout.text();
    for (const label of CACHE_CASE_LABELS) expect(table).toContain(label);
    expect(table).toMatch(
      /^target: cache auto ≥ 5× the agents per minute of cache off; measured /m,
    );
    expect(table).toMatch(/^target: cache auto's input cost ≥ 80% lower than cache off's; /m);
    expect(table).toMatch(/^target: cache auto writes each shared prefix ≤ 1\.05 times; /m);
    expect(data.limits).toMatchObject({
      itpm: 24_000_000,
      bucketSeconds: 1,
      probeInputTokens: null,
    });
    expect(data).toMatchObject({ prefixes: CACHE_PREFIXES, systemTokens: 20_000, rounds: 1 });
    expect(data.summary.map((item: { case: string }) => item.case)).toEqual(CACHE_CASE_LABELS);
  });

  it('runs every cohort agent to completion, with and without the cache', () => {
    for (const label of CACHE_CASE_LABELS.slice(0, 2)) {
      expect(of(label).completed, label).toBe(CACHE_AGENTS);
      expect(of(label).failed, label).toBe(0);
    }
    for (const item of data.summary) {
      expect(item.completed + item.failed, item.case).toBe(CACHE_AGENTS);
    }
  });

  it('writes each shared prompt once with cache auto, and reads it back', () => {
    const auto = of('cohort, cache auto');
    expect(auto.prefixWriters).toBe(CACHE_PREFIXES);
    expect(auto.writesPerPrefix).toBeLessThanOrEqual(1.05);
    expect(auto.cacheReadTokens).toBeGreaterThan(0);
    // Each step after the first reads at least the shared prompt back.
    expect(auto.cacheReadTokens).toBeGreaterThan(CACHE_AGENTS * 2 * 20_000);
    const check = data.checks.find(
      (item: { name: string }) => item.name === 'cache writes per prefix',
    );
    expect(check).toMatchObject({ met: true, value: auto.writesPerPrefix });
  });

  it('reads and writes nothing without cache_control: cache off and the SDK loop', () => {
    for (const label of CACHE_CASE_LABELS.slice(1)) {
      expect(of(label).cacheReadTokens, label).toBe(0);
      expect(of(label).cacheWriteTokens, label).toBe(0);
      expect(of(label).prefixWriters, label).toBe(0);
    }
    // Every input token of cache off is billed at the input price: a request's whole prompt.
    const off = of('cohort, cache off');
    expect(off.inputCostUsd).toBeCloseTo(off.uncachedInputCostUsd, 9);
    expect(off.inputTokens).toBeGreaterThan(CACHE_AGENTS * 3 * 20_000);
  });

  it("prices the input side at the scripted model's rates, cached and not", () => {
    const auto = of('cohort, cache auto');
    const expected =
      (auto.inputTokens * 3 + auto.cacheReadTokens * 0.3 + auto.cacheWriteTokens * 3.75) / 1e6;
    expect(auto.inputCostUsd).toBeCloseTo(expected, 9);
    expect(auto.inputCostUsd).toBeLessThan(of('cohort, cache off').inputCostUsd);
  });
});

const TRANSPORT_CALLS = 30;

describe('npm run bench transport: both transports side by side, profiled', () => {
  const dir = tempDir('cohort-bench-transport-');
  const out = path.join(dir, 'report.json');
  const profiles = path.join(dir, 'profiles');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;

  const run = benchRuns.run(
    [
      'transport',
      '--calls',
      String(TRANSPORT_CALLS),
      '--concurrency',
      '3',
      '--runs',
      '2',
      '--profile',
      profiles,
      '--out',
      out,
    ],
    { stdout, stderr },
    true,
  );
  beforeAll(async () => {
    code = await run;
    data = JSON.parse(readFileSync(out, 'utf8')).parts.transport.data;
  });

  it('exits 0 and prints both transports, the ratio and the target line', () => {
    expect(code, stderr.text()).toBe(0);
    const table = stdout.text();
    expect(table).toMatch(/^undici +3 +30\/30 /m);
    expect(table).toMatch(/^sdk +3 +30\/30 /m);
    expect(table).toMatch(/target at 3: sdk \/ undici CPU per call ≥ 3\.5×; measured \d+\.\d\d×/);
    expect(table).toContain('cpu per call, sdk / undici');
  });

  it('measures each transport in each run, interleaved, every call read to message_stop', () => {
    const order = data.measurements.map((item: { run: number; transport: string }) => [
      item.run,
      item.transport,
    ]);
    expect(order).toEqual([
      [0, 'undici'],
      [0, 'sdk'],
      [1, 'sdk'],
      [1, 'undici'],
    ]);
    for (const item of data.measurements) {
      expect(item.completed, item.transport).toBe(TRANSPORT_CALLS);
      expect(item.failureReasons).toEqual([]);
      expect(item.processCpuMs).toBeGreaterThan(0);
    }
    // Both read the same stream: the same events, pings left out.
    const perCall = data.summary.map((item: { eventsPerCall: number }) => item.eventsPerCall);
    expect(perCall[0]).toBeGreaterThanOrEqual(5);
    expect(perCall[1]).toBe(perCall[0]);
    const [ratio] = data.ratios;
    expect(ratio.concurrency).toBe(3);
    const [undici, sdk] = data.summary;
    expect(ratio.cpuPerCallSdkOverUndici).toBeGreaterThan(0);
    expect(undici.cpuPerCallMs).toBeGreaterThan(0);
    expect(sdk.cpuPerCallMs).toBeGreaterThan(0);
  });

  it('writes a folder of CPU profiles per case, which profile-summary reads', () => {
    const folders = readdirSync(profiles).sort();
    expect(folders).toEqual([
      '01-transport-undici-at-3',
      '02-transport-sdk-at-3',
      '03-transport-sdk-at-3',
      '04-transport-undici-at-3',
    ]);
    const files = profileFiles([profiles]);
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const file of files) {
      const summary = summariseProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
      const shares = Object.values(summary.byCategory).reduce((sum, ms) => sum + ms, 0);
      expect(shares).toBeCloseTo(summary.busyMs, 6);
      expect(summary.busyMs).toBeGreaterThan(0);
    }
    const printed = collector();
    expect(profileSummaryCommand([profiles], printed, printed)).toBe(0);
    for (const folder of folders) expect(printed.text()).toContain(folder);
    expect(printed.text()).toMatch(/pid \d+ main/);
  });
});

describe('the sdk-loop engine against the scripted model', () => {
  let model: ScriptedModel;
  let engine: BenchEngine;
  const requests: ScriptedRequestEvent[] = [];

  beforeAll(async () => {
    model = await startScriptedModel({ port: 0 });
    model.on('request', (event: ScriptedRequestEvent) => requests.push(event));
    engine = await startEngine('sdk-loop', {
      provider: { baseURL: model.url, model: 'cohort-bench', maxRetries: 2 },
      logDir: tempDir('cohort-bench-sdk-loop-'),
      toolModules: [builtPath('bench/common/work-tool.js')],
      concurrency: 1,
    });
    return async () => {
      await engine.close();
      await model.close();
    };
  });

  it('plays the bench script: work twice, then reply, advertising what cohort advertises', async () => {
    requests.length = 0;
    const result = await engine.run({
      prompt: agentPrompt(0, { steps: 3, cpuMs: 1 }),
      title: 'sdk-loop',
      maxSteps: 5,
    });
    expect(result).toMatchObject({ outcome: 'complete', text: 'done' });
    expect(result.usage).toMatchObject({ providerCalls: 3, steps: 3 });
    expect(requests.map((item) => item.turn)).toEqual([0, 1, 2]);
    for (const item of requests) expect(item.tools).toEqual(['work', 'reply']);
  });

  it("counts the SDK's own retries as provider calls, and reports each retried 429", () =>
    expectRetriesCounted(engine, 2));

  it('cancels a live agent on close', () => expectCancelledOnClose('sdk-loop', model));
});

describe('profile-summary: categories of a known profile', () => {
  // [id, functionName, url, children]
  const frames: [number, string, string, number[]][] = [
    [1, '(root)', '', [2, 3, 4, 5, 7, 9, 11, 14, 16, 18]],
    [2, '(program)', '', []],
    [3, '(idle)', '', []],
    [4, '(garbage collector)', '', []],
    [5, 'writeFileSync', 'node:fs', [6]],
    [6, 'writeFileUtf8', '', []],
    [7, 'onData', 'file:///x/node_modules/undici/lib/client.js', [8]],
    [8, 'writev', '', []],
    [9, 'pump', 'file:///x/node_modules/undici/lib/body.js', [10]],
    [10, 'enqueue', 'node:internal/webstreams/readablestream', []],
    [11, 'loadESM', 'node:internal/modules/esm/loader', [12]],
    [12, 'readFileSync', 'node:fs', [13]],
    [13, 'parse', '', []],
    [14, 'makeRequest', 'file:///x/node_modules/@anthropic-ai/sdk/client.mjs', [15]],
    [15, 'parse', '', []],
    [16, 'post', 'file:///x/dist/src/worker/child-task.js', [17]],
    [17, 'postMessage', '', []],
    [18, 'processTicksAndRejections', 'node:internal/process/task_queues', []],
  ];
  const profile: CpuProfile = {
    nodes: frames.map(([id, functionName, url, children]) => ({
      id,
      callFrame: { functionName, url },
      children,
    })),
    // Node n is sampled once, for n ms.
    samples: frames.map(([id]) => id).slice(1),
    timeDeltas: frames.map(([id]) => id * 1000).slice(1),
  };

  it("counts each sample for its own frame's category, else its nearest caller's", () => {
    const summary = summariseProfile(profile, 3);
    expect(summary.totalMs).toBe(frames.slice(1).reduce((sum, [id]) => sum + id, 0));
    expect(summary.busyMs).toBe(summary.totalMs - 3);
    expect(summary.byCategory).toMatchObject({
      program: 2,
      gc: 4,
      'fs sync': 5 + 6,
      undici: 7 + 8 + 9,
      'web streams': 10,
      // Module loading claims the file reads and the JSON under it.
      'module loading': 11 + 12 + 13,
      sdk: 14,
      json: 15,
      cohort: 16,
      messaging: 17,
      other: 18,
    });
    // Self time by function, wherever it was called: both `parse`s add up.
    expect(summary.topFunctions).toEqual([
      { name: 'parse', ms: 13 + 15 },
      { name: 'processTicksAndRejections process/task_queues', ms: 18 },
      { name: 'postMessage', ms: 17 },
    ]);
  });

  it('names the thread of a Node profile file', () => {
    expect(threadOf('/d/CPU.20260101.120000.4242.0.001.cpuprofile')).toBe('pid 4242 main');
    expect(threadOf('/d/CPU.20260101.120000.4242.3.004.cpuprofile')).toBe('pid 4242 worker 3');
  });

  it('says what it expected when a folder holds no profile', () => {
    const printed = collector();
    expect(profileSummaryCommand([tempDir('cohort-no-profiles-')], printed, printed)).toBe(2);
    expect(printed.text()).toMatch(/Expected a directory or file with \.cpuprofile files, got `/);
  });
});

const SCALE_AGENTS = 12;
const SCALE_STEPS = 2;
// One worker process: the comparison with local is the part's point; 2 and 3 only add time here.
const SCALE_CASES = ['local', 'queue ×1'];

describe.skipIf(redisMissing)(
  redisMissing
    ? `npm run bench scale (skipped: ${redisMissing})`
    : 'npm run bench scale: the local engine and the queue with one worker, a tiny run',
  () => {
    const dir = tempDir('cohort-bench-scale-');
    const out = path.join(dir, 'report.json');
    const stdout = collector();
    const stderr = collector();
    let code: number;
    // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
    let data: any;

    // A describe skipped is still collected: no run without Redis.
    const run = redisMissing
      ? Promise.resolve(-1)
      : benchRuns.run(
          [
            'scale',
            '--agents',
            String(SCALE_AGENTS),
            '--steps',
            String(SCALE_STEPS),
            '--concurrency',
            '4',
            '--ttft-ms',
            '5',
            '--threads',
            '1',
            '--workers',
            '1',
            '--out',
            out,
          ],
          { stdout, stderr },
        );
    beforeAll(async () => {
      code = await run;
      data = JSON.parse(readFileSync(out, 'utf8')).parts.scale.data;
    }, 120_000);

    it('exits 0 and prints every case, the targets and the queue / local rows', () => {
      expect(code, stderr.text()).toBe(0);
      const table = stdout.text();
      for (const name of SCALE_CASES) expect(table).toMatch(new RegExp(`^${name} +12/12 `, 'm'));
      expect(table).toMatch(/agents\/s, queue \/ local +\d+\.\d\d +× +target ≥ 0\.9: (met|missed)/);
      expect(table).toMatch(/cpu ms\/task, queue − local \(producer \+ worker\) .*target ≤ 1 ms/);
      expect(data.summary.map((item: { case: string }) => item.case)).toEqual(SCALE_CASES);
    });

    it('runs every agent of every case through its steps, the queue ones on the workers started for it', () => {
      expect(data.measurements).toHaveLength(SCALE_CASES.length);
      for (const item of data.measurements) {
        expect(item.outcomes.complete, item.failureReasons.join(' | ')).toBe(SCALE_AGENTS);
        expect(item.providerCalls).toBe(SCALE_AGENTS * SCALE_STEPS);
        const workers = Object.keys(item.perWorker);
        if (item.mode === 'local') {
          expect(workers).toEqual([]);
          continue;
        }
        // Which worker takes which job is BullMQ's affair; none beyond those started for the case.
        expect(workers.length).toBeGreaterThanOrEqual(1);
        expect(workers.length).toBeLessThanOrEqual(item.workers);
        const taken = Object.values(item.perWorker) as number[];
        expect(taken.reduce((sum, count) => sum + count, 0)).toBe(SCALE_AGENTS);
      }
    });

    it('measures the queue cases from both ends: workers, clients and Redis, and none of it locally', () => {
      for (const item of data.measurements) {
        for (const [where, value] of numbersIn(item)) {
          expect(
            Number.isFinite(value) && value >= 0,
            `${item.mode} ${item.workers}: ${where} = ${value}`,
          ).toBe(true);
        }
        if (item.mode === 'local') {
          expect(item.workerCpuMs).toBeNull();
          expect(item.redisCommands).toBeNull();
          expect(item.producerCommands).toBeNull();
          continue;
        }
        expect(item.workerCpuMs).toBeGreaterThan(0);
        expect(item.producerCommands.commands).toBeGreaterThan(0);
        expect(item.workerCommands.commands).toBeGreaterThan(0);
        // Writes are counted at the socket: some, and never more than the commands they carry.
        for (const side of [item.producerCommands, item.workerCommands]) {
          expect(side.writes).toBeGreaterThan(0);
          expect(side.writes).toBeLessThanOrEqual(side.commands);
        }
        // Every job went through BullMQ's scripts on Redis: at least an add and a finish each
        // (EVAL the first time a script runs on this server, EVALSHA after).
        const scripts = (item.redisCommands.evalsha ?? 0) + (item.redisCommands.eval ?? 0);
        expect(scripts).toBeGreaterThanOrEqual(2 * SCALE_AGENTS);
      }
    });
  },
);

describe('npm run bench embed: a tiny run of the service beside the SDK loop', () => {
  const dir = tempDir('cohort-bench-embed-');
  const out = path.join(dir, 'report.json');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let rows: any[];

  const run = benchRuns.run(
    ['embed', '--jobs', '2', '--docs', '3', '--out', out, '--chart', path.join(dir, 'c.svg')],
    { stdout, stderr },
  );
  beforeAll(async () => {
    code = await run;
    const part = JSON.parse(readFileSync(out, 'utf8')).parts.embed;
    data = part.data;
    rows = part.rows;
  }, 60_000);

  it('serves every job of both services, clean and with 529s, and reports each figure', () => {
    expect(code, stderr.text()).toBe(0);
    expect(data).toMatchObject({ jobs: 2, docs: 3, rounds: 1 });
    const cases = data.summary.map(
      (item: { engine: string; loss: number }) => `${item.engine} ${item.loss}`,
    );
    expect(cases).toEqual(['cohort 0', 'sdk-loop 0', 'cohort 0.01', 'sdk-loop 0.01']);
    for (const item of data.summary) {
      // Every agent of every job completed: the 529s were retried.
      expect(item.incomplete, `${item.engine} ${item.loss}`).toBe(0);
      expect(item.jobMs.p50).toBeGreaterThan(0);
      expect(item.jobMs.p99).toBeGreaterThanOrEqual(item.jobMs.p50);
      expect(item.peakRssMB).toBeGreaterThan(0);
      expect(item.cpuS).toBeGreaterThan(0);
      for (const [where, value] of numbersIn(item)) {
        expect(Number.isFinite(value) && value >= 0, where).toBe(true);
      }
    }
    const table = stdout.text();
    expect(table).toMatch(/^cohort clean +\d/m);
    expect(table).toMatch(/^sdk-loop 1% 529 +\d/m);
    const ratios = rows.filter((row: { metric: string }) => row.metric === 'job p50 ratio');
    expect(ratios.map((row: { case: string }) => row.case)).toEqual([
      'cohort / sdk-loop clean',
      'cohort / sdk-loop 1% 529',
    ]);
  });
});

const LANES_AGENTS = 6;

describe('npm run bench lanes: a tiny run of both lanes side by side', () => {
  const out = path.join(tempDir('cohort-bench-lanes-'), 'report.json');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  const of = (lane: string): any =>
    data.summary.find((item: { lane: string }) => item.lane === lane);

  const run = benchRuns.run(
    [
      'lanes',
      '--agents',
      String(LANES_AGENTS),
      '--ttft-ms',
      '5',
      '--batch-latency-ms',
      '50',
      '--runs',
      '2',
      '--out',
      out,
    ],
    { stdout, stderr },
  );
  beforeAll(async () => {
    code = await run;
    data = JSON.parse(readFileSync(out, 'utf8')).parts.lanes.data;
  }, 60_000);

  it('exits 0 and prints both lanes, the batch latency it assumed and the dollars compared', () => {
    expect(code, stderr.text()).toBe(0);
    const table = stdout.text();
    expect(table).toMatch(/^realtime +6\/6 /m);
    expect(table).toMatch(/^batches +6\/6 /m);
    expect(table).toContain('a Message Batch of the scripted model ends 50 ms after its create');
    expect(table).toMatch(/^batches lane: 50\.0% of the realtime lane's dollars$/m);
    expect(data.runs).toHaveLength(4);
  });

  it('sends every step of the realtime lane to /v1/messages and every step of the batches lane in batches', () => {
    const steps = LANES_AGENTS * 3;
    expect(of('realtime')).toMatchObject({
      complete: LANES_AGENTS,
      realtimeRequests: steps,
      batchRequests: 0,
      batches: 0,
    });
    expect(of('batches')).toMatchObject({
      complete: LANES_AGENTS,
      realtimeRequests: 0,
      batchRequests: steps,
    });
    // The agents advance together: one batch a step, or a few more if one arrived late.
    expect(of('batches').batches).toBeGreaterThanOrEqual(3);
    expect(of('batches').batches).toBeLessThanOrEqual(steps);
    expect(of('batches').costUsd * 2).toBeCloseTo(of('realtime').costUsd, 3);
  });
});
