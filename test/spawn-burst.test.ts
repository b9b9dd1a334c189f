import { afterEach, describe, expect, it } from 'vitest';
import type { AnyTool } from '../src/shared/tools/types.js';
import { type Rig, scripted, startRig } from './helpers.js';

// The local pool hands each turn's children to its workers as one piscina task per thread, and
// settles a child cancelled before its handoff on main (docs/BENCHMARKS.md, "Spawn burst").
// These tests hold the contracts through that: one result per child, cancellation precise.

let rig: Rig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** Resolves once no child of the engine is live: every run handed back, every port read. */
async function quiet(engine: Rig['engine']): Promise<void> {
  while (engine.liveCount > 0) await new Promise((resolve) => setImmediate(resolve));
}

describe('a burst of spawns', () => {
  it('1,000 spawns in one turn, half of them calling a host tool: each settles once, complete', async () => {
    let calls = 0;
    const note: AnyTool = {
      name: 'note',
      description: 'Takes a note on main.',
      inputSchema: { type: 'object' },
      run: () => {
        calls++;
        return 'noted';
      },
    };
    rig = await startRig({ threads: 1, hostTools: [note] });
    const before = rig.engine.stats;
    const handles = Array.from({ length: 1000 }, (_, index) =>
      rig!.engine.spawn({
        prompt: scripted(
          index % 2 === 0
            ? [{ calls: [{ name: 'note', input: { index } }] }, { reply: `note ${index}` }]
            : [{ reply: `plain ${index}` }],
          `Child ${index}.`,
        ),
        maxSteps: 3,
      }),
    );
    const results = await Promise.all(handles.map((handle) => handle.result));
    expect(new Set(results.map((result) => result.id)).size).toBe(1000);
    results.forEach((result, index) => {
      expect({ index, id: result.id, outcome: result.outcome, text: result.text }).toEqual({
        index,
        id: handles[index]!.id,
        outcome: 'complete',
        text: `${index % 2 === 0 ? 'note' : 'plain'} ${index}`,
      });
    });
    expect(calls).toBe(500);
    await quiet(rig.engine);
    const after = rig.engine.stats;
    expect({
      workerResults: after.workerResults - before.workerResults,
      mainResults: after.mainResults - before.mainResults,
      delivered: after.delivered - before.delivered,
      duplicates: after.duplicateResults - before.duplicateResults,
    }).toEqual({ workerResults: 1000, mainResults: 0, delivered: 1000, duplicates: 0 });
  });

  it('cancelling 2,000 parked children, half running and half queued, settles each one cancelled', async () => {
    // The governor off: its slow start would hold most parked requests on main.
    rig = await startRig({ threads: 2, agentsPerThread: 500, governor: { enabled: false } });
    const before = rig.engine.stats;
    const requestsBefore = rig.model.stats.requests;
    const closedBefore = rig.model.stats.clientClosed;
    const parked = scripted([{ delayMs: 600_000, reply: 'too late' }], 'Wait.');
    const handles = Array.from({ length: 2000 }, () =>
      rig!.engine.spawn({ prompt: parked, maxSteps: 1, streamText: false }),
    );
    // Parked: the 1,000 the threads hold have their requests at the model; 1,000 wait in line.
    while (rig.model.stats.requests - requestsBefore < 1000) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(handles.filter((handle) => handle.status === 'queued').length).toBeGreaterThanOrEqual(
      1000,
    );
    for (const handle of handles) handle.cancel('user');
    const results = await Promise.all(handles.map((handle) => handle.result));
    expect(results.every((result) => result.outcome === 'cancelled')).toBe(true);
    expect(results.every((result) => result.cancelReason === 'user')).toBe(true);
    expect(new Set(results.map((result) => result.id)).size).toBe(2000);
    await quiet(rig.engine);
    const after = rig.engine.stats;
    expect({
      // The queued ones never reached a worker: main made theirs; the running ones' workers theirs.
      workerResults: after.workerResults - before.workerResults,
      mainResults: after.mainResults - before.mainResults,
      delivered: after.delivered - before.delivered,
      duplicates: after.duplicateResults - before.duplicateResults,
    }).toEqual({ workerResults: 1000, mainResults: 1000, delivered: 2000, duplicates: 0 });
    // No request beyond the first 1,000: a cancelled child in line never started.
    expect(rig.model.stats.requests - requestsBefore).toBe(1000);
    // The results come before the requests are torn down; every parked request is still aborted:
    // the model sees each of the 1,000 connections close.
    while (rig.model.stats.clientClosed - closedBefore < 1000) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(rig.model.stats.clientClosed - closedBefore).toBe(1000);
  });

  it('a child cancelled in the turn it was spawned never reaches a worker', async () => {
    rig = await startRig({ threads: 2 });
    const requestsBefore = rig.model.stats.requests;
    const handles = Array.from({ length: 50 }, (_, index) =>
      rig!.engine.spawn({ prompt: scripted([{ reply: `r${index}` }]), maxSteps: 1 }),
    );
    for (const handle of handles.filter((_, index) => index % 2 === 0)) handle.cancel('user');
    const results = await Promise.all(handles.map((handle) => handle.result));
    results.forEach((result, index) => {
      expect({ index, outcome: result.outcome }).toEqual({
        index,
        outcome: index % 2 === 0 ? 'cancelled' : 'complete',
      });
    });
    expect(rig.model.stats.requests - requestsBefore).toBe(25);
  });
});
