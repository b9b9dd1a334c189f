import { describe, expect, it } from 'vitest';
import { runChaos } from '../chaos/harness.js';

describe('chaos (fast, seeded)', () => {
  it('every agent gets exactly one result under injected faults: none lost, duplicated or stale-delivered', async () => {
    const report = await runChaos({
      seed: 7,
      children: 200,
      sessionRounds: 3,
      perRound: 8,
      batchTasks: 100,
      shutdownAgents: 30,
    });
    expect(report.agents).toBeGreaterThan(300);
    expect({
      lost: report.lost,
      duplicated: report.duplicated,
      staleDelivered: report.staleDelivered,
      invalidTranscripts: report.invalidTranscripts,
    }).toEqual({ lost: 0, duplicated: 0, staleDelivered: 0, invalidTranscripts: 0 });
    // The run really injected each kind of fault it claims to survive.
    for (const kind of [
      'http-429',
      'http-529',
      'disconnect',
      'stall',
      'malformed-sse',
      'tool-throws',
      'tool-crash',
      'tool-exit',
      'memory-limit',
      'stuck-tool',
    ] as const) {
      expect({ kind, count: report.faults[kind] > 0 }).toEqual({ kind, count: true });
    }
    // Worker deaths moved children to fresh workers instead of failing them.
    expect(report.resumed).toBeGreaterThan(0);
    const settled = Object.values(report.outcomes).reduce((sum, count) => sum + count, 0);
    expect(settled).toBe(report.agents);
  });
});
