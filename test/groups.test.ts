import { getEventListeners } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Engine } from '../src/main/engine.js';
import { UsageError } from '../src/shared/errors.js';
import type { AgentResult } from '../src/shared/result.js';
import type { ScriptStep } from '../src/testing/index.js';
import { type HostGate, hostGate, type Rig, scripted, startRig } from './helpers.js';

// Groups end to end (docs/GROUPS.md): a real engine, real workers, the real SDK against the
// scripted model over HTTP. Agents are held in host tools the test opens (latches), never by
// sleeps; no test asserts a wall-clock time.

const echo = (value: string): ScriptStep => ({ calls: [{ name: 'echo', input: { value } }] });

/** An agent that waits in `gate`'s tool, then replies `text`. */
function held(gate: HostGate, text: string): string {
  return scripted([{ calls: [{ name: gate.tool.name, input: {} }] }, { reply: text }], text);
}

/** A grace far past any test: a cancel settles through the worker, never by termination. */
const GRACE_MS = 600_000;

describe('groups', () => {
  let rig: Rig;
  let engine: Engine;
  const gates: HostGate[] = [];
  let nextGate = 0;
  /** A fresh gate for one test; all are tools of the one engine the file shares. */
  const gate = (): HostGate => {
    const next = gates[nextGate++];
    if (!next) throw new Error('out of gates');
    return next;
  };

  beforeAll(async () => {
    for (let index = 0; index < 12; index++) gates.push(hostGate(`hold_${index}`));
    rig = await startRig({
      threads: 2,
      cancelGraceMs: GRACE_MS,
      hostTools: gates.map((candidate) => candidate.tool),
    });
    engine = rig.engine;
  });

  afterAll(async () => {
    for (const candidate of gates) candidate.open();
    await rig.close();
  });

  it('a cancel with a free reason reaches every agent, the queued ones at once', async () => {
    const hold = gate();
    const group = engine.group({ name: 'job-1', maxConcurrency: 2 });
    const handles = [1, 2, 3, 4, 5].map((n) => group.spawn({ prompt: held(hold, `agent ${n}`) }));
    // Two run, three wait: every handle came back at once, none was refused.
    expect(handles.map((handle) => handle.status)).toEqual([
      expect.stringMatching(/queued|running/),
      expect.stringMatching(/queued|running/),
      'queued',
      'queued',
      'queued',
    ]);
    expect(group.totals.agents).toEqual({ spawned: 5, queued: 3, running: 2, settled: 0 });
    await hold.entered(2);
    group.cancel('client gone');
    expect(group.state).toBe('cancelled');
    // The queued ones settled in the cancel itself.
    expect(handles.slice(2).map((handle) => handle.status)).toEqual([
      'settled',
      'settled',
      'settled',
    ]);
    const results = await Promise.all(handles.map((handle) => handle.result));
    for (const result of results) {
      expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'client gone' });
    }
    expect(results.map((result) => result.id)).toEqual(handles.map((handle) => handle.id));
    expect(hold.calls).toBe(2);
    // A spawn into a cancelled group settles at once, with the group's reason.
    const late = group.spawn({ prompt: held(hold, 'late') });
    expect(await late.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'client gone' });
    expect(group.totals.agents).toEqual({ spawned: 6, queued: 0, running: 0, settled: 6 });
  });

  it('maxConcurrency queues and never exceeds the cap', async () => {
    const group = engine.group({ maxConcurrency: 2 });
    let most = 0;
    const watch = () => {
      most = Math.max(most, group.totals.agents.running);
    };
    const handles = Array.from({ length: 7 }, (_, n) =>
      group.spawn({
        prompt: scripted([echo(`a${n}`), { reply: `done ${n}` }], `capped ${n}`),
        onEvent: watch,
      }),
    );
    watch();
    const results = await Promise.all(handles.map((handle) => handle.result));
    expect(results.map((result) => result.outcome)).toEqual(Array(7).fill('complete'));
    expect(most).toBe(2);
    expect(group.totals.agents).toEqual({ spawned: 7, queued: 0, running: 0, settled: 7 });
    expect(group.totals.steps).toBe(14);
  });

  it('a queued agent cancelled alone settles at once; the others go on', async () => {
    const hold = gate();
    const group = engine.group({ maxConcurrency: 1 });
    const first = group.spawn({ prompt: held(hold, 'first') });
    const second = group.spawn({ prompt: held(hold, 'second') });
    expect(second.cancel('not needed')).toBe(true);
    expect(await second.result).toMatchObject({
      outcome: 'cancelled',
      cancelReason: 'not needed',
      id: second.id,
    });
    await hold.entered(1);
    hold.open();
    expect(await first.result).toMatchObject({ outcome: 'complete', text: 'first' });
  });

  it('map keeps mapAgents’ contract inside the group’s cap', async () => {
    const group = engine.group({ maxConcurrency: 2 });
    const specs = [1, 2, 3, 4].map((n) => ({
      prompt: scripted([{ reply: `mapped ${n}` }], `map ${n}`),
    }));
    const seen: string[] = [];
    for await (const { result } of group.map(specs, { concurrency: 3 })) seen.push(result.text);
    expect(seen.sort()).toEqual(['mapped 1', 'mapped 2', 'mapped 3', 'mapped 4']);
  });

  it('a shared budget stops all of its agents', async () => {
    const hold = gate();
    const group = engine.group({ budget: { steps: 2 } });
    const script = (name: string) =>
      scripted(
        [{ calls: [{ name: hold.tool.name, input: {} }] }, echo(name), { reply: `${name} done` }],
        name,
      );
    const a = group.spawn({ prompt: script('A') });
    const b = group.spawn({ prompt: script('B') });
    await hold.entered(2);
    // Both first steps are counted: the group's budget is spent while both wait, so each one's
    // next step is its last turn (only `reply` offered), where its script calls `echo`.
    await vi.waitFor(() => expect(group.totals.steps).toBe(2), { timeout: 30_000 });
    hold.open();
    const results = await Promise.all([a.result, b.result]);
    for (const result of results) {
      // Its last turn is its next step (only `reply` offered: the script's `echo` is refused and
      // it ends `empty`), or, when its tool's answer reached its worker before the budget's
      // notice (they travel on different ports), the step after: it then called `echo` and
      // replied in its last turn. Never more than that one step.
      expect(result.budgetExceeded).toBe('steps');
      expect(['empty', 'complete']).toContain(result.outcome);
      expect(result.usage.steps).toBe(result.outcome === 'empty' ? 2 : 3);
    }
    // The same agents in a group without a budget run to their scripts' ends.
    const free = engine.group({});
    const c = await free.run({ prompt: scripted([echo('C'), echo('C'), { reply: 'C done' }]) });
    expect(c.outcome).toBe('complete');
    expect(c.budgetExceeded).toBeUndefined();
  });

  it('drain finishes what runs, cancels what waits, and refuses new spawns', async () => {
    const hold = gate();
    const group = engine.group({ name: 'tenant-7', maxConcurrency: 1 });
    const running = group.spawn({ prompt: held(hold, 'runs on') });
    const waiting = group.spawn({ prompt: held(hold, 'never starts') });
    await hold.entered(1);
    const drained = group.drain();
    expect(group.state).toBe('draining');
    expect(await waiting.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'drain' });
    expect(() => group.spawn({ prompt: 'too late' })).toThrow(UsageError);
    expect(() => group.spawn({ prompt: 'too late' })).toThrow(/group 'tenant-7' is draining/);
    hold.open();
    await drained;
    expect(group.state).toBe('drained');
    expect(await running.result).toMatchObject({ outcome: 'complete', text: 'runs on' });
    expect(hold.calls).toBe(1);
  });

  it('a signal cancels with its reason, through one listener', async () => {
    const hold = gate();
    const controller = new AbortController();
    const group = engine.group({ signal: controller.signal });
    const handles = [1, 2, 3].map((n) => group.spawn({ prompt: held(hold, `s${n}`) }));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    await hold.entered(3);
    controller.abort('deadline');
    const results = await Promise.all(handles.map((handle) => handle.result));
    for (const result of results) {
      expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'deadline' });
    }
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    // A signal aborted without a text reason cancels `user`.
    const other = new AbortController();
    other.abort();
    const late = engine.group({ signal: other.signal }).spawn({ prompt: 'never runs' });
    expect(await late.result).toMatchObject({ cancelReason: 'user' });
  });

  it('a timeout cancels the group with reason `timeout`', async () => {
    const hold = gate();
    const group = engine.group({ timeout: 1 });
    const result = await group.run({ prompt: held(hold, 'too slow') });
    expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'timeout' });
    expect(group.state).toBe('cancelled');
  });

  it('a nested group counts against its parent’s cap, and its parent’s cancel reaches it', async () => {
    const hold = gate();
    const parent = engine.group({ maxConcurrency: 1 });
    const inner = parent.group({ maxConcurrency: 5 });
    const first = inner.spawn({ prompt: held(hold, 'inner 1') });
    const second = inner.spawn({ prompt: held(hold, 'inner 2') });
    await hold.entered(1);
    expect(parent.totals.agents).toMatchObject({ running: 1, queued: 1 });
    parent.cancel('job over');
    const results = await Promise.all([first.result, second.result]);
    for (const result of results) {
      expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'job over' });
    }
    expect(results.map((result) => result.id)).toEqual([first.id, second.id]);
    expect(inner.spawn({ prompt: 'after' }).status).toBe('settled');
  });

  it('a nested group’s spending adds to its parent’s', async () => {
    const parent = engine.group({ budget: { steps: 100 }, patienceMs: 60_000 });
    const inner = parent.group({ name: 'inner' });
    const result = await inner.run({ prompt: scripted([echo('x'), { reply: 'inner done' }]) });
    expect(result.outcome).toBe('complete');
    expect(inner.totals).toMatchObject({ steps: 2, agents: { spawned: 1, settled: 1 } });
    expect(parent.totals).toMatchObject({ steps: 2, agents: { spawned: 1, settled: 1 } });
    expect(parent.totals.inputTokens).toBe(inner.totals.inputTokens);
    expect(inner.totals.inputTokens).toBeGreaterThan(0);
  });

  it('bad group options are refused before anything runs, naming the option', () => {
    const refused = (options: Record<string, unknown>) => {
      try {
        engine.group(options as never);
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      throw new Error('Expected a UsageError');
    };
    expect(refused({ maxConcurrency: 0 })).toMatch(/^Expected `group\.maxConcurrency` /);
    expect(refused({ maxConcurrency: 1.5 })).toMatch(/`group\.maxConcurrency`/);
    expect(refused({ timeout: 0 })).toMatch(/`group\.timeout`/);
    expect(refused({ timeout: 2 ** 31 })).toMatch(/`group\.timeout`/);
    expect(refused({ patienceMs: -1 })).toMatch(/`group\.patienceMs`/);
    expect(refused({ budget: { steps: 0 } })).toMatch(/`group\.budget\.steps`/);
    expect(refused({ budget: 'lots' })).toMatch(/`group\.budget`/);
    expect(refused({ signal: 'stop' })).toMatch(/`group\.signal`/);
    expect(refused({ provider: { apiKey: '' } })).toMatch(/`group\.provider\.apiKey`/);
    expect(refused({ provider: { apiKey: 42 } })).toMatch(/`group\.provider\.apiKey`/);
    expect(refused({ provider: { baseURL: 'ftp://example.com' } })).toMatch(
      /`group\.provider\.baseURL`/,
    );
    const secret = 'tenant key with a space in it';
    const message = refused({ provider: { apiKey: secret } });
    expect(message).toMatch(/`group\.provider\.apiKey`/);
    expect(message).not.toContain(secret);
    expect(refused({ budget: { usd: 1 }, provider: { model: 'no-price-model' } })).toMatch(
      /price for model `no-price-model`/,
    );
    // The same checks hold for a spawn's own provider.
    expect(() => engine.spawn({ prompt: 'x', provider: { baseURL: 'not a url' } })).toThrow(
      /`provider\.baseURL`/,
    );
  });
});

describe('engine.drain', () => {
  let rig: Rig | undefined;

  afterEach(async () => {
    await rig?.close();
    rig = undefined;
  });

  it('finishes what runs, settles what waits in groups, and refuses new spawns', async () => {
    const hold = hostGate('hold');
    rig = await startRig({ threads: 1, cancelGraceMs: GRACE_MS, hostTools: [hold.tool] });
    const engine = rig.engine;
    const direct = engine.spawn({ prompt: held(hold, 'direct') });
    const group = engine.group({ maxConcurrency: 1 });
    const inGroup = group.spawn({ prompt: held(hold, 'in group') });
    const queued = group.spawn({ prompt: held(hold, 'queued') });
    await hold.entered(2);
    let drained = false;
    const draining = engine.drain().then(() => {
      drained = true;
    });
    expect(await queued.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'drain' });
    expect(() => engine.spawn({ prompt: 'late' })).toThrow(/engine is draining/);
    expect(() => engine.group({}).spawn({ prompt: 'late' })).toThrow(/engine is draining/);
    expect(drained).toBe(false);
    hold.open();
    await draining;
    // Every result was in before the drain resolved.
    expect([direct.status, inGroup.status]).toEqual(['settled', 'settled']);
    const results: AgentResult[] = await Promise.all([direct.result, inGroup.result]);
    expect(results.map((result) => result.outcome)).toEqual(['complete', 'complete']);
  });

  it('close cancels a group’s queued spawns with `shutdown`', async () => {
    const hold = hostGate('hold');
    rig = await startRig({ threads: 1, hostTools: [hold.tool] });
    const group = rig.engine.group({ maxConcurrency: 1 });
    const running = group.spawn({ prompt: held(hold, 'running') });
    const queued = group.spawn({ prompt: held(hold, 'queued') });
    await hold.entered(1);
    await rig.close();
    rig = undefined;
    expect(await queued.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'shutdown' });
    expect(await running.result).toMatchObject({ outcome: 'cancelled', cancelReason: 'shutdown' });
  });
});
