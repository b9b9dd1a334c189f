import { afterEach, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../src/shared/events.js';
import { forEachUplinkMessage } from '../src/shared/protocol.js';
import {
  eventLog,
  expectResultsExactlyOnce,
  type Rig,
  readTranscript,
  scripted,
  startRig,
} from './helpers.js';

// Each worker sends the messages of all its children to main on one uplink, queued and posted
// once per event-loop turn (src/worker/uplink.ts). These tests hold it to what per-child ports
// gave: order, blame, and cancels that reach exactly their child.

let rig: Rig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** What of an event does not depend on ids or timing. */
function shape(event: AgentEvent): string {
  switch (event.type) {
    case 'step-start':
    case 'step-end':
      return `${event.type} ${event.step}`;
    case 'tool-call':
    case 'tool-result':
      return `${event.type} ${event.name}`;
    case 'text-delta':
      return `${event.type} ${event.text}`;
    case 'agent-settle':
      return `${event.type} ${event.result.outcome}`;
    default:
      return event.type;
  }
}

const STEPS = scripted([
  { text: 'first ', calls: [{ name: 'echo', input: { value: 'a' } }] },
  { text: 'second ', calls: [{ name: 'echo', input: { value: 'b' } }] },
  { reply: 'done' },
]);

describe("a worker's uplink", () => {
  it("delivers each child's events in the order it sent them, its settle last, in a crowd", async () => {
    rig = await startRig({ threads: 2 });
    const alone = eventLog();
    await rig.engine.run({ prompt: STEPS, maxSteps: 5, onEvent: alone.onEvent });
    const expected = alone.events.map(shape);
    expect(expected).toContain('tool-result echo');
    expect(expected.at(-1)).toBe('agent-settle complete');

    // 300 children at once share two uplinks: their messages travel in shared batches.
    const logs = Array.from({ length: 300 }, () => eventLog());
    const results = await Promise.all(
      logs.map((log) => rig!.engine.run({ prompt: STEPS, maxSteps: 5, onEvent: log.onEvent })),
    );
    for (const [index, log] of logs.entries()) {
      expect(results[index]).toMatchObject({ outcome: 'complete', text: 'done' });
      expect(log.events.map(shape)).toEqual(expected);
      expect(new Set(log.events.map((event) => event.agentId))).toEqual(
        new Set([results[index]!.id]),
      );
    }
    expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
  });

  for (const tool of ['exit', 'crash'] as const) {
    it(`blames only the child whose tool was running when \`${tool}\` killed the worker, among busy siblings`, async () => {
      // One thread and maxCrashes 1: a sibling wrongly blamed fails at once instead of resuming.
      // The siblings are mid-run, calling tools of their own, when the culprit's tool starts:
      // had its `tool-enter` still been queued, nobody would be seen in a tool, and every child
      // of the worker would be blamed.
      rig = await startRig({ threads: 1, maxCrashes: 1 });
      const log = eventLog();
      const echoes = Array.from({ length: 6 }, (_, index) => ({
        calls: [{ name: 'echo', input: { value: String(index) } }],
      }));
      const siblings = Array.from({ length: 40 }, (_, index) =>
        rig!.engine.spawn({
          title: `sibling ${index}`,
          prompt: scripted([...echoes, { reply: `sibling ${index} done` }]),
          maxSteps: 10,
          onEvent: log.onEvent,
        }),
      );
      await log.waitFor((event) => event.type === 'tool-result');
      const culprit = await rig.engine.run({
        title: 'culprit',
        prompt: scripted([{ calls: [{ name: tool, input: {} }] }]),
      });
      expect(culprit).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });
      for (const [index, sibling] of siblings.entries()) {
        const result = await sibling.result;
        expect(result).toMatchObject({ outcome: 'complete', text: `sibling ${index} done` });
        expect(readTranscript(result).length).toBeGreaterThan(0);
      }
      // The crash caught siblings mid-run: they resumed, unblamed.
      expect(log.resumed().length).toBeGreaterThan(0);
      expect(rig.engine.stats.crashRecords).toBe(0);
      expectResultsExactlyOnce(rig.engine);
    });
  }

  it('takes a cancel sent before main has read the child start, and cancels only that child', async () => {
    rig = await startRig({ threads: 2 });
    const parked = scripted([{ delayMs: 60_000, reply: 'too late' }]);
    const handles = Array.from({ length: 60 }, (_, index) =>
      rig!.engine.spawn({ title: `parked ${index}`, prompt: parked }),
    );
    // After the handoff (a microtask after the spawns) and before main has read any child's
    // `started` (that takes a turn): each cancel waits for its child's `started` and then goes
    // down that worker's uplink. (A cancel in the spawns' own turn never reaches a worker: see
    // test/spawn-burst.test.ts.)
    await Promise.resolve();
    const cancelled = handles.filter((_, index) => index % 2 === 0);
    for (const handle of cancelled) handle.cancel('user');
    for (const handle of cancelled) {
      expect(await handle.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
    }
    // The worker settled each of them: none needed a result made on main.
    expect(rig.engine.stats.mainResults).toBe(0);
    const others = handles.filter((_, index) => index % 2 === 1);
    const log = eventLog();
    const late = rig.engine.spawn({ prompt: parked, onEvent: log.onEvent });
    await log.waitFor((event) => event.type === 'step-start');
    expect(others.map((handle) => handle.status)).toEqual(others.map(() => 'running'));
    for (const handle of [...others, late]) handle.cancel('shutdown');
    for (const handle of [...others, late]) {
      expect(await handle.result).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
    }
    expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
  });

  it('ignores a malformed post and every malformed message in a batch', () => {
    const seen: string[] = [];
    const collect = (child: string, message: { type: string }) =>
      seen.push(`${child} ${message.type}`);
    forEachUplinkMessage({ type: 'started', threadId: 1, child: 'a' }, collect);
    forEachUplinkMessage(null, collect);
    forEachUplinkMessage(
      [
        { type: 'started', threadId: 1, child: 'a' },
        { type: 'started', threadId: 1 },
        { type: 'event', event: {}, child: 7 },
        null,
        { type: 'tool-enter', callId: 'c1', child: 'b' },
        { type: 'result', result: { id: 'b' }, child: 'b' },
      ],
      collect,
    );
    expect(seen).toEqual(['a started', 'b tool-enter']);
  });
});
