import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { UsageError } from '../src/shared/errors.js';
import type { AgentEvent } from '../src/shared/events.js';
import { eventLog, expectResultsExactlyOnce, type Rig, scripted, startRig } from './helpers.js';

// What a service meets when many children share one request: one abort listener per signal, a
// reason of its own on every cancelled result, `agent-start` for children it started itself,
// `eventTypes` holding for the events main makes, and the engine's checks callable on their own.

let rig: Rig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** A child that sleeps in a tool until it is cancelled. */
const sleeper = (index: number) => ({
  title: `sleeper ${index}`,
  prompt: scripted([{ calls: [{ name: 'sleep', input: { ms: 60_000 } }] }, { reply: 'woke' }]),
});

describe('spawns sharing one signal', () => {
  it('adds one abort listener for 50 children, cancels all with its text reason, and warns of nothing', async () => {
    rig = await startRig({ threads: 1 });
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const controller = new AbortController();
      const handles = Array.from({ length: 50 }, (_, index) =>
        rig!.engine.spawn({ ...sleeper(index), signal: controller.signal }),
      );
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
      controller.abort('client disconnected');
      const results = await Promise.all(handles.map((handle) => handle.result));
      expect(new Set(results.map((result) => result.outcome))).toEqual(new Set(['cancelled']));
      expect(new Set(results.map((result) => result.cancelReason))).toEqual(
        new Set(['client disconnected']),
      );
      // The listener leaves with the last child.
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual(
        [],
      );
      expectResultsExactlyOnce(rig.engine);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('removes the listener once every child sharing it has settled on its own', async () => {
    rig = await startRig({ threads: 1 });
    const controller = new AbortController();
    const handles = Array.from({ length: 12 }, (_, index) =>
      rig!.engine.spawn({
        title: `quick ${index}`,
        prompt: scripted([{ reply: `done ${index}` }]),
        signal: controller.signal,
      }),
    );
    const results = await Promise.all(handles.map((handle) => handle.result));
    expect(results.map((result) => result.outcome)).toEqual(Array(12).fill('complete'));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    // An Error as the reason is not text: the engine's own `user`.
    const late = rig.engine.spawn({ ...sleeper(99), signal: controller.signal });
    controller.abort(new Error('boom'));
    expect(await late.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'user' });
  });
});

describe('events main makes', () => {
  it('announces a child started with engine.spawn, and filters agent-settle by eventTypes', async () => {
    rig = await startRig({ threads: 1 });
    const all: AgentEvent[] = [];
    const filtered: AgentEvent[] = [];
    const one = rig.engine.spawn({
      title: 'watched',
      prompt: scripted([{ reply: 'one' }]),
      onEvent: (event) => all.push(event),
    });
    const two = rig.engine.spawn({
      title: 'counted',
      prompt: scripted([{ reply: 'two' }]),
      onEvent: (event) => filtered.push(event),
      eventTypes: ['step-end'],
    });
    await Promise.all([one.result, two.result]);
    expect(all[0]).toMatchObject({
      type: 'agent-start',
      agentId: one.id,
      title: 'watched',
      depth: 1,
      mode: 'direct',
    });
    expect(all.at(-1)).toMatchObject({ type: 'agent-settle', agentId: one.id });
    expect(all.filter((event) => event.type === 'agent-start')).toHaveLength(1);
    expect(filtered.length).toBeGreaterThan(0);
    expect(new Set(filtered.map((event) => event.type))).toEqual(new Set(['step-end']));
  });
});

describe('engine.checkAgent', () => {
  it('throws what spawn would throw, and starts nothing', async () => {
    rig = await startRig({ threads: 1 });
    expect(() => rig!.engine.checkAgent({ prompt: 'fine', tools: ['sleep'] })).not.toThrow();
    expect(() => rig!.engine.checkAgent({ prompt: 'x', tools: ['no_such_tool'] })).toThrow(
      UsageError,
    );
    expect(() => rig!.engine.checkAgent({ prompt: 'x', maxSteps: 0 })).toThrow(/maxSteps/);
    expect(rig.engine.liveCount).toBe(0);
  });
});

describe('a cancel that meets a reply already written', () => {
  it('takes the reply: the agent ends complete with it, not cancelled', async () => {
    rig = await startRig({ threads: 1 });
    const log = eventLog();
    // One response: a slow tool, then the reply. The cancel lands while the tool runs.
    const handle = rig.engine.spawn({
      title: 'answered',
      prompt: scripted([
        { calls: [{ name: 'sleep', input: { ms: 60_000 } }], reply: 'the answer' },
      ]),
      onEvent: log.onEvent,
    });
    await log.waitFor((event) => event.type === 'tool-call' && event.name === 'sleep');
    handle.cancel('user');
    const result = await handle.result;
    expect(result).toMatchObject({ outcome: 'complete', text: 'the answer' });
    expect(result.cancelReason).toBeUndefined();
    expectResultsExactlyOnce(rig.engine);
  });
});
