/**
 * `npm run bench dashboard`: one tiny round of its four cases, against the scripted model in its
 * own process, with a real live client in its own. Only the report's shape and counts are
 * checked, never a timing.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CASES } from '../bench/dashboard/dashboard.js';
import { type BenchRun, benchRun } from './bench-helpers.js';

const AGENTS = 8;
const STEPS = 3;

describe('npm run bench dashboard: one tiny round of every case', () => {
  let run: BenchRun;
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  let data: any;

  beforeAll(async () => {
    run = await benchRun(
      `dashboard --agents ${AGENTS} --steps ${STEPS} --ttft-ms 5 --runs 1 --threads 1`.split(' '),
    );
    data = run.report.parts.dashboard.data;
  }, 120_000);

  it('exits 0 and prints a line per case with its ratio to the case without a dashboard', () => {
    expect(run.code, run.stderr).toBe(0);
    for (const kind of DASHBOARD_CASES) {
      expect(run.stdout).toMatch(
        new RegExp(`^${kind.replace('+', '\\+')} +${AGENTS}/${AGENTS} +${AGENTS * STEPS} `, 'm'),
      );
    }
    expect(run.stdout).toMatch(/^off +.* 1\.000 /m);
    expect(run.stdout).toContain(`report: ${run.out}`);
  });

  it('runs every agent of every case through its steps, one case of each per round', () => {
    expect(data.scenario).toMatchObject({ agents: AGENTS, steps: STEPS, ttftMs: 5, cpuMs: 0 });
    expect(data.runs.map((item: { case: string }) => item.case).sort()).toEqual(
      [...DASHBOARD_CASES].sort(),
    );
    for (const measured of data.runs) {
      expect(measured, measured.case).toMatchObject({
        round: 0,
        agents: AGENTS,
        complete: AGENTS,
        providerCalls: AGENTS * STEPS,
        steps: AGENTS * STEPS,
      });
      expect(measured.cpuMs, measured.case).toBeGreaterThan(0);
      expect(measured.cpuPerCallMs, measured.case).toBeCloseTo(
        measured.cpuMs / measured.providerCalls,
        9,
      );
    }
  });

  it('has the live client read the stream from its first snapshot to its end', () => {
    const [client] = data.runs.flatMap((item: { client?: unknown }) =>
      item.client === undefined ? [] : [item.client],
    );
    expect(data.runs.filter((item: { client?: unknown }) => item.client)).toHaveLength(1);
    expect(client.events.state).toBe(1);
    expect(client.events.end).toBe(1);
    // The run's changes reached it: at least the last delta, sent as the dashboard closes.
    expect(client.events.delta).toBeGreaterThanOrEqual(1);
    expect(client.streamBytes).toBeGreaterThan(0);
  });

  it('summarises each case: CPU per call, its ratio to off paired by round, and wall', () => {
    expect(data.summary.map((item: { case: string }) => item.case)).toEqual([...DASHBOARD_CASES]);
    for (const item of data.summary) {
      expect(item, item.case).toMatchObject({
        agents: AGENTS,
        complete: AGENTS,
        providerCalls: AGENTS * STEPS,
      });
      expect(item.ratios, item.case).toHaveLength(1);
      expect(item.ratioToOff, item.case).toBeGreaterThan(0);
      expect(item.cpuPerCallMs, item.case).toBeGreaterThan(0);
      expect(item.wallS, item.case).toBeGreaterThan(0);
    }
    expect(data.summary[0].ratioToOff).toBe(1);
    const rows = run.report.parts.dashboard.rows;
    expect(rows).toHaveLength(DASHBOARD_CASES.length * 3);
    expect(new Set(rows.map((row: { metric: string }) => row.metric))).toEqual(
      new Set(['cpu per call', 'cpu per call ÷ off', 'wall']),
    );
  });
});
