/**
 * `npm run bench` end to end on a tiny sweep: the runner forks its measuring processes, drives
 * real engines against the scripted model in its own process, and writes a table, a JSON report
 * and an SVG chart. Only their content is checked, never a timing.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { caseFigures, steadyWindow, windowRate } from '../bench/governor-summary.js';
import { runBench } from '../bench/run.js';
import { benchCommand } from '../src/main/commands/bench.js';
import { runCli } from './cli-helpers.js';
import { tempDir } from './helpers.js';

const ENGINES = ['cohort', 'in-process', 'thread-per-child'];
const LEVELS = [2, 5];
const AGENTS = 20;
const STEPS = 2;

function collector(): { write(text: string): boolean; text(): string } {
  let text = '';
  return {
    write(chunk: string) {
      text += chunk;
      return true;
    },
    text: () => text,
  };
}

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

describe('npm run bench: a tiny sweep of every engine, and the spawn part', () => {
  const dir = tempDir('cohort-bench-test-');
  const out = path.join(dir, 'report.json');
  const chart = path.join(dir, 'chart.svg');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let report: any;

  beforeAll(async () => {
    code = await runBench(
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
        '--out',
        out,
        '--chart',
        chart,
      ],
      { stdout, stderr },
    );
    report = JSON.parse(readFileSync(out, 'utf8'));
  });

  it('exits 0 and prints a table that names every engine and the outputs', () => {
    expect(code, stderr.text()).toBe(0);
    const table = stdout.text();
    for (const engine of ENGINES) expect(table).toContain(engine);
    expect(table).toContain('agents/s');
    expect(table).toContain(`report: ${out}`);
    expect(table).toContain(`chart: ${chart}`);
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
      if (measurement.engine === 'in-process') expect(measurement.threads).toBe(0);
      else if (measurement.engine === 'thread-per-child') {
        expect(measurement.threads).toBe(measurement.concurrency);
      } else expect(measurement.threads).toBeGreaterThanOrEqual(1);
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
      /`--engines`.*cohort, in-process, thread-per-child, got `cohort,bogus`/,
    ],
    [['--overload', '2'], /`--overload` to be a number from 0 to 1, got `2`/],
    [
      ['--spawn-children', '300'],
      /`--spawn-children` to be a whole number from 1 to 256, got `300`/,
    ],
    [['nonsense'], /Expected a bench part \(model, concurrency, spawn, governor\), got `nonsense`/],
    [['governor', '--itpm', '-5'], /`--itpm` to be a whole number from 0 to .*, got `-5`/],
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
  });
});

const GOVERNOR_CASES = ['governor', 'governor, told the limits', 'no governor'];
const GOVERNOR_AGENTS = 20;
const GOVERNOR_STEPS = 2;

describe('npm run bench governor: a tiny run of the three cases against a binding ITPM', () => {
  const dir = tempDir('cohort-bench-governor-');
  const out = path.join(dir, 'report.json');
  const chart = path.join(dir, 'chart.svg');
  const stdout = collector();
  const stderr = collector();
  let code: number;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;

  beforeAll(async () => {
    code = await runBench(
      [
        'governor',
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
        '--out',
        out,
        '--chart',
        chart,
      ],
      { stdout, stderr },
    );
    data = JSON.parse(readFileSync(out, 'utf8')).parts.governor.data;
  });

  it('exits 0 and prints the three cases, the target line and the outputs', () => {
    expect(code, stderr.text()).toBe(0);
    const table = stdout.text();
    for (const name of GOVERNOR_CASES) expect(table).toContain(name);
    expect(table).toMatch(/target at 4 \(governor\): ≥ 95% of the binding limit/);
    expect(table).toContain(`chart: ${chart}`);
  });

  it('uses the ITPM given and sets RPM from the probe so that ITPM binds', () => {
    const perRequest =
      data.probeInputTokensByStep.reduce((sum: number, tokens: number) => sum + tokens, 0) /
      GOVERNOR_STEPS;
    expect(data.probeInputTokensByStep).toHaveLength(GOVERNOR_STEPS);
    expect(data.limits.itpm).toBe(300_000);
    expect(data.limits.bucketSeconds).toBe(1);
    expect(data.limits.rpm).toBe(Math.ceil((1.5 * 300_000) / perRequest / 100) * 100);
    for (const item of data.summary) expect(item.binding).toBe('itpm');
  });

  it('accounts for every agent and request of every case, on the model and in the series', () => {
    expect(data.summary.map((item: { case: string }) => item.case)).toEqual(GOVERNOR_CASES);
    for (const item of data.summary) {
      expect(item.completed + item.failed, item.case).toBe(GOVERNOR_AGENTS);
      expect(item.requests, item.case).toBe(item.admitted + item.rateLimited429);
      expect(item.admitted, item.case).toBeGreaterThanOrEqual(item.completed * GOVERNOR_STEPS);
      for (const field of ['wallSeconds', 'rateLimitedPercent']) {
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
    for (const item of data.summary.slice(0, 2)) {
      expect(item.failed, item.case).toBe(0);
      expect(item.admitted, item.case).toBe(GOVERNOR_AGENTS * GOVERNOR_STEPS);
      expect(item.learnedItpm, item.case).toBe(300_000);
    }
    expect(data.summary[2].governorLimit).toBeNull();
  });

  it('has rows with the columns of every part, and draws one line per case', () => {
    const rows = JSON.parse(readFileSync(out, 'utf8')).parts.governor.rows;
    for (const name of GOVERNOR_CASES) {
      const metrics = rows
        .filter((row: { case: string }) => row.case === `${name} at 4`)
        .map((row: { metric: string }) => row.metric);
      expect(metrics).toEqual(
        expect.arrayContaining([
          'requests answered 429',
          'requests answered 429, share',
          'completed agents',
          'failed agents',
          'wall time',
        ]),
      );
    }
    for (const row of rows) {
      expect(Object.keys(row).sort()).toEqual(
        expect.arrayContaining(['case', 'metric', 'part', 'unit', 'value']),
      );
    }
    const svg = readFileSync(chart, 'utf8');
    for (const name of GOVERNOR_CASES) expect(svg).toContain(`>${name}</text>`);
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
        providerCalls: 1,
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
        },
      },
      limits: { rpm: 1000, itpm: 60_000, bucketSeconds: 10 },
      run: 0,
    });
    expect(figures).toMatchObject({ binding: 'itpm', completed: 1, failed: 0, admitted: 1 });
    expect(figures.bindingPercent).toBeNull();
    expect(figures.windowSeconds).toBeNull();
  });
});
