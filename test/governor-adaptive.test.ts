/**
 * The adaptive-concurrency comparison (bench/governor/governor-adaptive.ts) at a tiny size: real engines
 * with real workers against the scripted model in its own process. It checks what the figures
 * rest on (every agent completes, the server's counts and the governor's agree), not speed.
 */
import { describe, expect, it } from 'vitest';
import {
  CONTROLS,
  formatMedians,
  type RunFigures,
  runAdaptive,
  runOnce,
  SCENARIOS,
} from '../bench/governor/governor-adaptive.js';

/** Every request the server saw was admitted by the governor, and every answer is counted. */
function expectCountsAddUp(run: RunFigures): void {
  const { server, governor } = run;
  expect(run.completed + run.failed).toBe(run.agents);
  expect(server.rejected400).toBe(0);
  expect(server.completed + server.rateLimited429 + server.overloaded529).toBe(server.requests);
  expect(governor.admitted).toBe(server.requests);
  expect(governor.rateLimited).toBe(server.rateLimited429);
  expect(governor.overloaded).toBe(server.overloaded529);
  // Two steps an agent, each answered once with a message.
  expect(server.completed).toBe(run.agents * 2);
}

describe('bench: governor adaptive concurrency', () => {
  it('runs the capacity scenario once with each control; every agent completes', async () => {
    const lines: string[] = [];
    const report = await runAdaptive({
      rounds: 1,
      agents: 30,
      scenarios: ['capacity'],
      log: (line) => lines.push(line),
    });
    expect(report.runs.map((run) => run.control)).toEqual([...CONTROLS]);
    expect(lines).toHaveLength(CONTROLS.length);
    for (const run of report.runs) {
      expect(run.failed).toBe(0);
      expect(run.completed).toBe(30);
      expectCountsAddUp(run);
      if (run.control === 'fixed') expect(run.finalLimit).toBe(SCENARIOS.capacity.concurrency);
    }
    expect(report.medians.map((row) => [row.scenario, row.control, row.runs])).toEqual(
      CONTROLS.map((control) => ['capacity', control, 1]),
    );
    const table = formatMedians(report.medians);
    for (const control of CONTROLS) expect(table).toMatch(new RegExp(`capacity +${control} `));
  }, 120_000);

  it('counts 529s on both sides when the server is full, and still completes every agent', async () => {
    // 20 agents sent at once against 4 streams, each held 100 ms for its first token.
    const tiny = {
      ...SCENARIOS.capacity,
      agents: 20,
      model: { ttftMs: 100, maxStreams: 4 },
    };
    const run = await runOnce(tiny, 'fixed');
    expect(run.completed).toBe(20);
    expect(run.server.overloaded529).toBeGreaterThan(0);
    expectCountsAddUp(run);
  }, 120_000);
});
