/**
 * The governor-transport micro-benchmark (bench/governor-transport.ts) run tiny as a real child
 * process with real worker threads: every design completes exactly the admissions asked, the two
 * semaphores never let more than the capacity be held at once while holders really waited, and
 * every permit comes back. Only counts are checked, never a timing.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('../dist/bench/governor-transport.js', import.meta.url));
const THREADS = 2;
// Odd, so that one worker gets one admission more than the other.
const ADMISSIONS = 401;
const PACED = 61;
const HOLDERS = 20;
const CAPACITY = 8;
const RUNS = 2;
const SAMPLES = 60;
const DESIGNS = ['baseline', 'sab', 'broker'];

interface Run {
  regime: string;
  design: string;
  admissions: number;
  maxHeld: number;
  waits: number;
  freeAtEnd: number;
  p50Us?: number;
  p99Us?: number;
}

async function runBench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [SCRIPT, ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('governor-transport bench: sab and broker semaphores across worker threads', () => {
  let runs: Run[];
  let summary: { design: string; saturatedCpuUsPerAdmission: number }[];

  beforeAll(async () => {
    const flags = {
      threads: THREADS,
      admissions: ADMISSIONS,
      'paced-admissions': PACED,
      'request-ms': 1,
      holders: HOLDERS,
      capacity: CAPACITY,
      runs: RUNS,
      samples: SAMPLES,
    };
    const args = Object.entries(flags).flatMap(([name, value]) => [`--${name}`, String(value)]);
    const result = await runBench([...args, '--json']);
    expect(result.stderr).toMatch(/design\s+saturated adm\/s/);
    expect(result.code).toBe(0);
    ({ runs, summary } = JSON.parse(result.stdout));
  }, 60_000);

  const of = (regime: string, design?: string) =>
    runs.filter((run) => run.regime === regime && (design === undefined || run.design === design));

  it('runs every regime of every design once per round, designs alternating, each in full', () => {
    const round = ['saturated', 'paced', 'idle'].flatMap((regime) =>
      DESIGNS.map((design) => `${regime} ${design}`),
    );
    expect(runs.map((run) => `${run.regime} ${run.design}`)).toEqual([...round, ...round]);
    for (const run of of('saturated')) expect(run.admissions).toBe(ADMISSIONS);
    for (const run of of('paced')) expect(run.admissions).toBe(PACED);
    for (const run of of('idle')) expect(run.admissions).toBe(SAMPLES);
  });

  it('never lets sab or broker hold more than the capacity, though holders waited', () => {
    const gated = [...of('saturated'), ...of('paced')].filter((run) => run.design !== 'baseline');
    expect(gated).toHaveLength(2 * 2 * RUNS);
    for (const run of gated) {
      expect(run.maxHeld).toBeGreaterThan(0);
      expect(run.maxHeld).toBeLessThanOrEqual(CAPACITY);
      expect(run.waits).toBeGreaterThan(0);
      expect(run.freeAtEnd).toBe(CAPACITY);
    }
  });

  it("counts concurrent holds: the ungated baseline has one worker's holders in flight at once", () => {
    // The baseline runs capacity / threads holders per thread, with no semaphore; they all hold
    // across the same tick, so the counter that bounds sab and broker above does rise.
    for (const run of of('saturated', 'baseline')) {
      expect(run.maxHeld).toBeGreaterThanOrEqual(CAPACITY / THREADS);
      expect(run.waits).toBe(0);
    }
  });

  it('times one uncontended holder per design and summarises every design', () => {
    for (const run of of('idle')) {
      expect(run.maxHeld).toBe(1);
      expect(run.p50Us).toBeGreaterThan(0);
      expect(run.p99Us).toBeGreaterThanOrEqual(run.p50Us!);
    }
    expect(summary.map((row) => row.design)).toEqual(DESIGNS);
    for (const row of summary) expect(Number.isFinite(row.saturatedCpuUsPerAdmission)).toBe(true);
  });
});

describe('governor-transport bench: flags', () => {
  it('refuses a bad flag with exit 2, naming what was expected and what arrived', async () => {
    const result = await runBench(['--capacity', '0']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Expected `--capacity` to be a whole number from 1');
    expect(result.stderr).toContain('got `0`');
    expect(result.stdout).toBe('');
  });
});
