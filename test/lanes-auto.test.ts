import { afterEach, describe, expect, it } from 'vitest';
import type { ScriptStep } from '../src/testing/index.js';
import { hostGate, type Rig, scripted, startRig, usageError } from './helpers.js';

// The auto lane against the scripted model's Message Batches API and its /v1/messages, with real
// worker threads: an agent with a deadline goes by batches while a batch fits before it, and in
// real time when none does, even after its step began to wait for one.

const echo = (value: string): ScriptStep => ({ calls: [{ name: 'echo', input: { value } }] });
const threeSteps = (index: number) =>
  scripted([echo(`a${index}`), echo(`b${index}`), { reply: `done ${index}` }], `Task ${index}.`);
const HOUR = 60 * 60 * 1000;

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

describe('the auto lane', () => {
  it('sends an agent whose deadline is far off through batches, and one without a deadline too', async () => {
    rig = await startRig({ lane: 'auto', batchPollMs: 10 }, { batchLatencyMs: 20 });
    // The default assumption of a batch's turnaround is an hour: two hours leave room.
    expect(rig.engine.batchTurnaroundMs).toBe(HOUR);
    const far = await rig.engine.run({ prompt: threeSteps(1), deadline: Date.now() + 2 * HOUR });
    expect(far).toMatchObject({ outcome: 'complete', text: 'done 1' });
    expect(rig.model.stats).toMatchObject({ messages: 0, batchRequests: 3 });
    // Every step at half price: what it saved is what it cost.
    expect(far.usage.batchSavedUsd).toBeCloseTo(far.usage.costUsd ?? 0, 9);
    const none = await rig.engine.run({ prompt: threeSteps(2) });
    expect(none).toMatchObject({ outcome: 'complete', text: 'done 2', lane: 'batches' });
    expect(rig.model.stats).toMatchObject({ messages: 0, batchRequests: 6 });
    expect(rig.engine.stepsMovedToRealtime).toBe(0);
    // What it saw end is what it expects now: far less than the hour it assumed.
    expect(rig.engine.batchTurnaroundMs).toBeLessThan(HOUR);
  });

  it('sends an agent whose deadline is nearer than the turnaround in real time, at the real-time price', async () => {
    rig = await startRig({ lane: 'auto', batchPollMs: 10 }, { batchLatencyMs: 20 });
    const near = await rig.engine.run({
      prompt: threeSteps(1),
      // An ISO date-time: half an hour is less than the hour a batch is taken to need.
      deadline: new Date(Date.now() + HOUR / 2).toISOString(),
    });
    expect(near).toMatchObject({ outcome: 'complete', text: 'done 1' });
    expect(rig.model.stats).toMatchObject({ messages: 3, batchRequests: 0, batchesCreated: 0 });
    expect(rig.engine.stepsMovedToRealtime).toBe(3);
    expect(near.usage.batchSavedUsd).toBeUndefined();
    const batched = await rig.engine.run({ prompt: threeSteps(1), lane: 'batches' });
    // The same tokens: in real time, twice the dollars of the batches lane.
    expect((batched.usage.costUsd ?? 0) * 2).toBeCloseTo(near.usage.costUsd ?? 0, 9);
  });

  it('learns the turnaround from the batches it saw end, and batches a deadline it would not have', async () => {
    rig = await startRig(
      { lane: 'auto', batchPollMs: 10, batchWindowMs: 1_000, batchTurnaroundMs: 2 * HOUR },
      { batchLatencyMs: 20 },
    );
    const deadline = Date.now() + HOUR;
    const before = await rig.engine.run({ prompt: threeSteps(1), deadline });
    expect(rig.model.stats).toMatchObject({ messages: 3, batchRequests: 0 });
    expect(before.outcome).toBe('complete');
    // One batch ends (no deadline: the batches lane), and the lane takes its measure.
    await rig.engine.run({ prompt: scripted([{ reply: 'measured' }]) });
    expect(rig.engine.batchTurnaroundMs).toBeLessThan(HOUR);
    const after = await rig.engine.run({ prompt: threeSteps(2), deadline });
    expect(after).toMatchObject({ outcome: 'complete', text: 'done 2' });
    expect(rig.model.stats).toMatchObject({ messages: 3, batchRequests: 4 });
  });

  it('moves a step whose room runs out while it waits for a batch to real time, where it completes', async () => {
    const hold = hostGate('hold');
    rig = await startRig(
      { batchPollMs: 10, batchWindowMs: 60_000, batchTurnaroundMs: 1_000, hostTools: [hold.tool] },
      { batchLatencyMs: 20 },
    );
    const engine = rig.engine;
    // A member of the lane that holds in a tool: no batch goes before the window while it does.
    const holder = engine.run({
      prompt: scripted([{ calls: [{ name: 'hold', input: {} }] }, { reply: 'held' }]),
      lane: 'batches',
    });
    await hold.entered();
    expect(rig.model.stats.batchRequests).toBe(1);
    // Room now (the window and the turnaround it saw end), and for a few seconds more.
    const deadline = Date.now() + 60_000 + engine.batchTurnaroundMs + 3_000;
    const late = await engine.run({
      prompt: scripted([{ reply: 'in time' }]),
      lane: 'auto',
      deadline,
    });
    // Done long before the window would have sent its batch: by /v1/messages.
    expect(late).toMatchObject({ outcome: 'complete', text: 'in time' });
    expect(hold.calls).toBe(1);
    expect(rig.model.stats).toMatchObject({ messages: 1, batchRequests: 1, batchesCreated: 1 });
    expect(engine.stepsMovedToRealtime).toBe(1);
    hold.open();
    expect(await holder).toMatchObject({ outcome: 'complete', text: 'held', lane: 'batches' });
    expect(rig.model.stats).toMatchObject({ messages: 1, batchRequests: 2 });
  });

  it('passes its deadline to the agents an agent spawns, and takes the lane from a group', async () => {
    rig = await startRig({ maxDepth: 2, batchPollMs: 10 }, { batchLatencyMs: 5 });
    const { agentCall } = await import('./helpers.js');
    const parent = await rig.engine.run({
      prompt: scripted([
        { calls: [agentCall('child', [{ reply: 'from the child' }])] },
        { reply: 'parent done' },
      ]),
      lane: 'auto',
      deadline: Date.now() + HOUR / 2,
    });
    expect(parent).toMatchObject({ outcome: 'complete', text: 'parent done' });
    // The child inherited the lane and the deadline: in real time too, not in batches.
    expect(rig.model.stats).toMatchObject({ messages: 3, batchRequests: 0 });
    // A group's lane: its spawns' default, each judged by its own deadline.
    const group = rig.engine.group({ lane: 'auto' });
    const [far, near] = await Promise.all([
      group.run({ prompt: scripted([{ reply: 'far' }]), deadline: Date.now() + 2 * HOUR }),
      group.run({ prompt: scripted([{ reply: 'near' }]), deadline: Date.now() + HOUR / 2 }),
    ]);
    expect([far.text, near.text]).toEqual(['far', 'near']);
    expect(rig.model.stats).toMatchObject({ messages: 4, batchRequests: 1 });
  });

  it('refuses a deadline in the past, or one that is no time', async () => {
    rig = await startRig({}, {});
    const engine = rig.engine;
    expect(
      usageError(() =>
        engine.spawn({ prompt: 'x', lane: 'auto', deadline: '2020-01-01T00:00:00Z' }),
      ).message,
    ).toMatch(/^Expected `deadline` to be a time in the future .*got `2020-01-01T00:00:00Z`/);
    expect(
      usageError(() => engine.spawn({ prompt: 'x', lane: 'auto', deadline: 'tonight' })).message,
    ).toMatch(/^Expected `deadline` to be a time in the future/);
    expect(
      usageError(() => engine.spawn({ prompt: 'x', deadline: Date.now() - 1 })).message,
    ).toMatch(/^Expected `deadline` to be a time in the future/);
  });
});
