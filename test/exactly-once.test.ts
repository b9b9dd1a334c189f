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

describe('exactly one result per child', () => {
  it('1,000 children with random scripts on 2 threads: each settles exactly once, with the outcome its script implies', async () => {
    const plans = fc.sample(planArbitrary, { numRuns: 1000, seed: 20261130 });
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
    for (const { plan, handle } of handles) if (plan.cancel) handle.cancel('user');
    const results = await Promise.all(handles.map(({ handle }) => handle.result));

    expect(new Set(results.map((result) => result.id)).size).toBe(1000);
    results.forEach((result, index) => {
      expect(result.id).toBe(handles[index]!.handle.id);
      expect(settles.get(result.id)).toBe(1);
      expect({ index, outcome: result.outcome }).toEqual({
        index,
        outcome: handles[index]!.plan.expected,
      });
      if (result.outcome !== 'complete') expect(result.text).toBe('');
    });
    // Every transcript the workers wrote is protocol-valid.
    for (const result of results.filter((r) => r.outcome !== 'cancelled').slice(0, 200)) {
      assertToolUsesAnswered(readTranscript(result.logDir));
    }
    // Nothing settles twice later on.
    await new Promise((resolve) => setImmediate(resolve));
    expect([...settles.values()].every((count) => count === 1)).toBe(true);
    expect(settles.size).toBe(1000);
  });
});
