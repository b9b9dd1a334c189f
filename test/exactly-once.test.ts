import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentOutcome } from '../src/shared/result.js';
import type { ScriptStep } from '../src/testing/index.js';
import { assertToolUsesAnswered, type Rig, readTranscript, scripted, startRig } from './helpers.js';

/** One child's plan: its script, its options, and the outcome the contract says it must reach. */
interface Plan {
  steps: ScriptStep[];
  maxSteps: number;
  cancel: boolean;
  expected: AgentOutcome;
}

const echo = (n: number): ScriptStep => ({ calls: [{ name: 'echo', input: { value: n } }] });

const planArbitrary: fc.Arbitrary<Plan> = fc.oneof(
  fc.integer({ min: 0, max: 3 }).map((tools) => ({
    steps: [...Array.from({ length: tools }, (_, n) => echo(n)), { reply: `done after ${tools}` }],
    maxSteps: 10,
    cancel: false,
    expected: 'complete' as const,
  })),
  fc.constant<Plan>({
    steps: [{ text: 'prose' }, { text: 'more prose' }],
    maxSteps: 10,
    cancel: false,
    expected: 'empty',
  }),
  fc.integer({ min: 1, max: 3 }).map((cap) => ({
    steps: Array.from({ length: cap + 1 }, (_, n) => echo(n)),
    maxSteps: cap,
    cancel: false,
    expected: 'capped' as const,
  })),
  fc.constant<Plan>({
    steps: [{ error: { status: 500, retryAfterMs: 1 } }],
    maxSteps: 10,
    cancel: false,
    expected: 'failed',
  }),
  fc.constant<Plan>({
    steps: [{ error: { status: 429, retryAfterMs: 1 }, faultAttempts: 1, reply: 'after a 429' }],
    maxSteps: 10,
    cancel: false,
    expected: 'complete',
  }),
  fc.constant<Plan>({
    steps: [{ delayMs: 60_000, reply: 'too late' }],
    maxSteps: 10,
    cancel: true,
    expected: 'cancelled',
  }),
  fc.constant<Plan>({ steps: [{ reply: '' }], maxSteps: 10, cancel: false, expected: 'empty' }),
);

let rig: Rig;

beforeAll(async () => {
  rig = await startRig({ threads: 2 });
});

afterAll(async () => {
  await rig.close();
});

/**
 * Resolves once every child's task has ended, its port drained and closed (`liveCount` 0): from
 * then on no result message can still arrive, so the port counts are final. The pool has no
 * event for a task's end, so this looks again at each turn of the event loop (no wall-clock
 * wait; the loop ends within a few turns of the last result).
 */
async function portsQuiet(): Promise<void> {
  while (rig.engine.liveCount > 0) await new Promise((resolve) => setImmediate(resolve));
}

describe('exactly one result per child', () => {
  it('1,000 children with random scripts on 2 threads: each settles exactly once, with the outcome its script implies', async () => {
    const plans = fc.sample(planArbitrary, { numRuns: 1000, seed: 20261130 });
    // The rig may serve other tests of this file: count this test's children by deltas.
    await portsQuiet();
    const before = rig.engine.stats;
    // The consumer's own count: every agent-settle event each child's listener receives.
    const settles = new Map<string, number>();
    const handles = plans.map((plan, index) => {
      const handle = rig.engine.spawn({
        title: `random ${index}`,
        prompt: scripted(plan.steps, `Child ${index}.`),
        maxSteps: plan.maxSteps,
        streamText: false,
        onEvent: (event) => {
          if (event.type === 'agent-settle')
            settles.set(event.agentId, (settles.get(event.agentId) ?? 0) + 1);
        },
      });
      return { plan, handle };
    });
    // Half the cancels come in the spawns' own turn, before the children are handed to a
    // worker (they never reach one: main makes their results); the rest a turn later, when
    // they are on their workers.
    const cancels = handles.filter(({ plan }) => plan.cancel);
    const atOnce = cancels.filter((_, index) => index % 2 === 0);
    for (const { handle } of atOnce) handle.cancel('user');
    await new Promise((resolve) => setImmediate(resolve));
    for (const { handle } of cancels.filter((_, index) => index % 2 === 1)) handle.cancel('user');
    const results = await Promise.all(handles.map(({ handle }) => handle.result));

    expect(new Set(results.map((result) => result.id)).size).toBe(1000);
    results.forEach((result, index) => {
      expect(result.id).toBe(handles[index]!.handle.id);
      expect({ index, outcome: result.outcome }).toEqual({
        index,
        outcome: handles[index]!.plan.expected,
      });
      if (result.outcome !== 'complete') expect(result.text).toBe('');
    });
    // Every transcript the workers wrote is protocol-valid.
    for (const result of results.filter((r) => r.outcome !== 'cancelled').slice(0, 200)) {
      assertToolUsesAnswered(readTranscript(result));
    }

    // Counted at the ports, apart from the settle guard: every result message a worker sent and
    // every result main made, against what was handed out. A second result for a child would
    // show as a duplicate (the guard drops it) and make the sent side outgrow the delivered one.
    await portsQuiet();
    const after = rig.engine.stats;
    const sent =
      after.workerResults - before.workerResults + (after.mainResults - before.mainResults);
    expect({
      sent,
      delivered: after.delivered - before.delivered,
      duplicates: after.duplicateResults - before.duplicateResults,
    }).toEqual({ sent: 1000, delivered: 1000, duplicates: 0 });
    // None was queued or crashed: main made the results of the children cancelled before their
    // handoff, and no other; every other result was its worker's own, cancelled ones included.
    expect(atOnce.length).toBeGreaterThan(0);
    expect(after.mainResults - before.mainResults).toBe(atOnce.length);

    // And at the consumer: one agent-settle per child, none later.
    expect(settles.size).toBe(1000);
    for (const { handle } of handles) expect(settles.get(handle.id)).toBe(1);
  });
});
