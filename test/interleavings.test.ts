import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Session, type SessionEvent } from '../src/main/session.js';
import type { AnyTool } from '../src/shared/tools/types.js';
import { type Rig, scripted, startRig } from './helpers.js';

/** Latches by key: a child holds in the `hold` host tool until the test releases its key. */
const latches = new Map<string, () => void>();
const waiting = new Map<string, Promise<void>>();
function latchFor(key: string): Promise<void> {
  let promise = waiting.get(key);
  if (!promise) {
    promise = new Promise<void>((resolve) => latches.set(key, resolve));
    waiting.set(key, promise);
  }
  return promise;
}

const hold: AnyTool = {
  name: 'hold',
  description: 'Waits until the test releases this key.',
  inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
  run: async (input: { key: string }) => {
    await latchFor(input.key);
    return 'released';
  },
};

type Op =
  | { kind: 'spawn' }
  | { kind: 'settle'; pick: number }
  | { kind: 'cancel'; pick: number }
  | { kind: 'clear' }
  | { kind: 'deliver' }
  | { kind: 'pause'; ms: number };

const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Op>({ kind: 'spawn' }) },
  { weight: 4, arbitrary: fc.nat(50).map<Op>((pick) => ({ kind: 'settle', pick })) },
  { weight: 2, arbitrary: fc.nat(50).map<Op>((pick) => ({ kind: 'cancel', pick })) },
  { weight: 1, arbitrary: fc.constant<Op>({ kind: 'clear' }) },
  { weight: 2, arbitrary: fc.constant<Op>({ kind: 'deliver' }) },
  {
    weight: 2,
    arbitrary: fc.integer({ min: 0, max: 15 }).map<Op>((ms) => ({ kind: 'pause', ms })),
  },
);

let rig: Rig;
let run = 0;
/** Totals across runs, to show the property exercised what it claims to. */
const seen = { delivered: 0, stale: 0, cancelled: 0 };

beforeAll(async () => {
  rig = await startRig({ hostTools: [hold], threads: 2 });
});

afterAll(async () => {
  for (const release of latches.values()) release();
  await rig.close();
});

describe('exactly one result under random interleavings of spawn / settle / cancel / clear / shutdown', () => {
  it('holds its invariants (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArbitrary, { minLength: 1, maxLength: 30 }), async (ops) => {
        run++;
        // The root's script sits in its system prompt, so it survives clear(): text at every turn.
        const session = new Session(rig.engine, {
          autoWake: false,
          system: `Root.\n${'```'}cohort-script\n${JSON.stringify({ steps: Array.from({ length: 60 }, () => ({ text: 'ok' })) })}\n${'```'}`,
        });
        const events: SessionEvent[] = [];
        const consume = (async () => {
          for await (const event of session.events()) events.push(event);
        })();
        const spawned: { id: string; key: string; generation: number }[] = [];
        const badDeliveries: string[] = [];
        for (const op of ops) {
          switch (op.kind) {
            case 'spawn': {
              const key = `r${run}-c${spawned.length}`;
              const receipt = session.spawnAsync({
                title: key,
                prompt: scripted([{ calls: [{ name: 'hold', input: { key } }] }, { reply: key }]),
              });
              spawned.push({ id: receipt.id, key, generation: session.generation });
              break;
            }
            case 'settle': {
              const child = spawned[op.pick % Math.max(1, spawned.length)];
              if (child) {
                latchFor(child.key);
                latches.get(child.key)!();
              }
              break;
            }
            case 'cancel': {
              const child = spawned[op.pick % Math.max(1, spawned.length)];
              if (child) session.cancel(child.id);
              break;
            }
            case 'clear':
              session.clear();
              break;
            case 'deliver': {
              const before = session.delivered.length;
              const turn = await session.send('deliver');
              for (const result of session.delivered.slice(before)) {
                if (result.generation !== turn.generation) badDeliveries.push(result.id);
              }
              break;
            }
            case 'pause':
              await new Promise((resolve) => setTimeout(resolve, op.ms));
              break;
          }
        }
        // Half the runs end by releasing everyone and delivering what is left; the others shut
        // down with whatever is still live.
        if (run % 2 === 0) {
          for (const child of spawned) {
            latchFor(child.key);
            latches.get(child.key)!();
          }
          await session.waitIdle();
          const before = session.delivered.length;
          const turn = await session.send('final delivery');
          for (const result of session.delivered.slice(before)) {
            if (result.generation !== turn.generation) badDeliveries.push(result.id);
          }
          expect(session.pending).toEqual([]);
        }
        await session.close();
        await consume;
        for (const child of spawned) {
          const settles = events.filter(
            (event) => event.type === 'agent-settle' && event.agentId === child.id,
          );
          expect(settles).toHaveLength(1);
        }
        const deliveredIds = session.delivered.map((result) => result.id);
        expect(new Set(deliveredIds).size).toBe(deliveredIds.length);
        expect(badDeliveries).toEqual([]);
        const stale = new Set(
          events.flatMap((event) => (event.type === 'agent-stale' ? [event.agentId] : [])),
        );
        for (const id of deliveredIds) expect(stale.has(id)).toBe(false);
        seen.delivered += deliveredIds.length;
        seen.stale += stale.size;
        seen.cancelled += events.filter(
          (event) => event.type === 'agent-settle' && event.result.outcome === 'cancelled',
        ).length;
        // A delivered result always belongs to the generation it was spawned in.
        for (const result of session.delivered) {
          expect(spawned.find((child) => child.id === result.id)?.generation).toBe(
            result.generation,
          );
        }
      }),
      { numRuns: 25, seed: 1130 },
    );
    expect(seen).toEqual({
      delivered: expect.any(Number),
      stale: expect.any(Number),
      cancelled: expect.any(Number),
    });
    expect(Object.values(seen).every((count) => count > 0)).toBe(true);
  });
});
