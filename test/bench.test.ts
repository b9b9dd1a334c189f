/**
 * `npm run bench` end to end on a tiny sweep: the runner forks its measuring processes, drives
 * real engines against the scripted model in its own process, and writes a table, a JSON report
 * and an SVG chart. Only their content is checked, never a timing.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
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
    [['nonsense'], /Expected a bench part \(model, concurrency, spawn\), got `nonsense`/],
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
