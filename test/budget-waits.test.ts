import { afterEach, describe, expect, it, vi } from 'vitest';
import { Engine } from '../src/main/engine.js';
import type { StepSpend } from '../src/shared/budget.js';
import { BudgetMeter, budgetNotice } from '../src/shared/budget-meter.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import { type ScriptStep, startScriptedModel } from '../src/testing/index.js';
import {
  assertToolUsesAnswered,
  asyncAgent,
  contentBlocks,
  hostGate,
  type Rig,
  readTranscript,
  scripted,
  startRig,
  TEST_TOOLS,
  tempDir,
} from './helpers.js';

// Budgets that are reached while an agent waits rather than at a step's end: the time limit of a
// parent parked on its own agents' results, and a tree's word. Also a resumed child's steps, which
// count against its steps budget again.

const STEP: StepSpend = { inputTokens: 10, outputTokens: 5, costUsd: 0 };
const echo = (value: string): ScriptStep => ({ calls: [{ name: 'echo', input: { value } }] });

describe('BudgetMeter.resumeSteps', () => {
  it('steps read back from a transcript count: with {steps: 3}, 2 resumed and one spend reach it', () => {
    const spends: StepSpend[] = [];
    const meter = new BudgetMeter({ budget: { steps: 3 }, onSpend: (spend) => spends.push(spend) });
    meter.resumeSteps(2);
    expect(meter.exceeded()).toBeUndefined();
    expect(meter.spent.steps).toBe(2);
    // Main's tree ledger counted those steps when they were taken: not told again.
    expect(spends).toEqual([]);
    meter.spend(STEP);
    expect(meter.exceeded()).toBe('steps');
    expect(spends).toEqual([STEP]);
  });
});

describe('BudgetMeter.spentSignal', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('aborts when a tree budget is spent, with its kind as the reason; the same signal each time', () => {
    const meter = new BudgetMeter({ budget: { steps: 10 } });
    const signal = meter.spentSignal();
    expect(meter.spentSignal()).toBe(signal);
    expect(signal.aborted).toBe(false);
    meter.treeSpent('usd');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('usd');
    // The first word wins, in the signal as in `exceeded()`.
    meter.treeSpent('steps');
    expect(signal.reason).toBe('usd');
    expect(meter.exceeded()).toBe('usd');
  });

  it('aborts at once when a limit is reached already, with no timer', () => {
    vi.useFakeTimers();
    const meter = new BudgetMeter({ budget: { steps: 1, timeMs: 60_000 } });
    meter.spend(STEP);
    const signal = meter.spentSignal();
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('steps');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('aborts with `time` when what is left of the time limit runs out (on the injected clock)', () => {
    vi.useFakeTimers();
    let now = 1_000;
    const meter = new BudgetMeter({ budget: { timeMs: 100 }, now: () => now });
    // 40 ms of the 100 are gone when the agent starts to wait: 60 are left.
    now += 40;
    const signal = meter.spentSignal();
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(59);
    expect(signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('time');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('close() clears the timer, and the signal does not abort after it', () => {
    vi.useFakeTimers();
    const meter = new BudgetMeter({ budget: { timeMs: 100 }, now: () => 0 });
    const signal = meter.spentSignal();
    expect(vi.getTimerCount()).toBe(1);
    meter.close();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(1_000);
    expect(signal.aborted).toBe(false);
  });

  it('once it aborts with `time`, `exceeded()` says `time` too (on the real clock)', async () => {
    // The loop stops waiting on the signal, then reads `exceeded()` to choose the notice over the
    // nudge: the two must agree. Node starts a timer from the event loop's cached time, which lags
    // `performance.now()` when the loop was busy, so it can fire before the limit is reached on
    // the meter's clock. A busy millisecond or two before each wait makes that lag likely.
    const disagreed: number[] = [];
    for (let run = 0; run < 10; run++) {
      const meter = new BudgetMeter({ budget: { timeMs: 20 } });
      const busyUntil = performance.now() + 2;
      while (performance.now() < busyUntil) {
        // busy on purpose: the event loop's time falls behind the meter's clock
      }
      const signal = meter.spentSignal();
      // A descheduled thread may reach the limit before the signal is made: then it is made
      // aborted, and no abort event will come.
      if (!signal.aborted) {
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      }
      expect(signal.reason).toBe('time');
      if (meter.exceeded() !== 'time') disagreed.push(run);
      meter.close();
    }
    expect(disagreed).toEqual([]);
  });

  it('without a time limit there is no timer to clear', () => {
    vi.useFakeTimers();
    const meter = new BudgetMeter({ budget: { steps: 5 } });
    expect(meter.spentSignal().aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
    meter.close();
  });
});

function texts(message: MessageParam): string[] {
  return contentBlocks(message).flatMap((block) => (block.type === 'text' ? [block.text] : []));
}

describe('a parent waiting for its own agent when its time runs out (maxDepth 2)', () => {
  let rig: Rig | undefined;
  const gate = hostGate('hold');

  afterEach(async () => {
    // Opened only now: until P's result, nothing but its time limit could end its wait.
    gate.open();
    await rig?.close();
    rig = undefined;
  });

  it('stops waiting and takes its last turn; the child never got out of its gate', async () => {
    rig = await startRig({ threads: 1, maxDepth: 2, hostTools: [gate.tool] });
    const result = await rig.engine.run({
      title: 'P',
      prompt: scripted([
        { calls: [asyncAgent('C', [{ calls: [{ name: 'hold', input: {} }] }, { reply: 'C' }])] },
        // No tool call: P waits here for C's result, which never comes while the gate is shut.
        { text: 'Waiting for my helper.' },
        { reply: 'P best so far' },
      ]),
      // Long enough that its first two steps fit on a slow machine; the wait then outlasts it.
      budget: { timeMs: 1500 },
    });
    expect(gate.calls).toBe(1);
    expect(result).toMatchObject({
      outcome: 'complete',
      budgetExceeded: 'time',
      text: 'P best so far',
    });
    const transcript = readTranscript(result);
    assertToolUsesAnswered(transcript);
    // The notice answers the step without calls (the wait), and the last turn follows it.
    const waited = transcript.findIndex(
      (message) =>
        message.role === 'assistant' && texts(message).includes('Waiting for my helper.'),
    );
    expect(waited).toBeGreaterThan(0);
    expect(transcript[waited + 1]).toEqual({ role: 'user', content: budgetNotice('time') });
    expect(transcript).toHaveLength(waited + 4);
  });
});

describe('a crash resume keeps the steps budget', () => {
  it('a child resumed after 2 of its 3 steps reaches `steps` at its 3rd and takes its last turn', async () => {
    const rigLogs = tempDir('cohort-logs-');
    // The subject waits in a host tool (on main, so never blamed) while a sibling crashes the
    // worker: the crash lands after its two steps are committed, whatever the machine's speed.
    const gate = hostGate('hold');
    const model = await startScriptedModel({ port: 0 });
    const engine = await Engine.start({
      threads: 1,
      maxCrashes: 1,
      logDir: rigLogs,
      toolModules: [TEST_TOOLS],
      hostTools: [gate.tool],
      provider: { baseURL: model.url, model: 'cohort-scripted', maxRetries: 0 },
    });
    try {
      const events: AgentEvent[] = [];
      // Had the resumed meter started from 0 steps, the held step would be its first and the
      // reply after it an ordinary one, with no notice and no budgetExceeded.
      const subject = engine.spawn({
        prompt: scripted([
          echo('one'),
          echo('two'),
          { calls: [{ name: 'hold', input: {} }] },
          { reply: 'after the resume' },
        ]),
        budget: { steps: 3 },
        onEvent: (event) => events.push(event),
      });
      await gate.entered(1);
      // The prompt, two steps, and the held step's response (committed before its tool runs).
      await vi.waitFor(
        () => expect(readTranscript({ id: subject.id, logDir: engine.logDir })).toHaveLength(6),
        { timeout: 10_000 },
      );
      const culprit = engine.spawn({ prompt: scripted([{ calls: [{ name: 'exit' }] }]) });
      expect((await culprit.result).code).toBe('worker_crashed');
      // The resumed subject runs its held step's tool again (not its request): let it through.
      gate.open();
      const result = await subject.result;
      expect(
        events.some((event) => event.type === 'agent-resume' && event.agentId === subject.id),
      ).toBe(true);
      expect(result).toMatchObject({
        outcome: 'complete',
        budgetExceeded: 'steps',
        text: 'after the resume',
      });
      expect(result.usage.steps).toBe(4);
      const transcript = readTranscript(result);
      assertToolUsesAnswered(transcript);
      const notice = transcript.findIndex((message) =>
        texts(message).includes(budgetNotice('steps')),
      );
      // The notice went with the held step's results (message 6), before the last turn (7).
      expect(notice).toBe(6);
      expect(transcript).toHaveLength(9);
    } finally {
      await engine.close();
      await model.close();
    }
  });
});
