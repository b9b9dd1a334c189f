import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Session, type SessionEvent, type TurnResult } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import type { AgentOutcome, AgentResult, CancelReason } from '../src/shared/result.js';
import type { AnyTool, ToolContext } from '../src/shared/tools/types.js';
import { type Rig, scripted, startRig } from './helpers.js';

/**
 * The schedule is the generated op sequence alone. Every op waits for the engine event that
 * ends it (a child reached its `hold`, a result settled, a turn ended) before the next op runs,
 * so the state each op acts on is determined by the ops before it, never by how long anything
 * took, and a failing seed replays the same interleaving.
 *
 * What is still timing-dependent, and why it does not touch the invariants:
 * - Which of the two worker threads runs a child, and the order of HTTP requests to the scripted
 *   model: the model answers from the request alone, and no op proceeds until its effect is in.
 * - The order in which several children cancelled by one `clear` or `close` settle (they run on
 *   two threads): each of those results is stale whatever the order (its generation is over, or
 *   the session closed), so none reaches the inbox, whose order is what delivery depends on.
 * - When a turn queued behind a held root turn starts once that turn ends, and so where its
 *   steps fall among the settles of the children the same `clear` cancelled: it drains the inbox
 *   at its start, and none of those results can enter the inbox (their generation is over), nor
 *   can any other (every other settle has been awaited).
 */

/** Promises opened by key; whichever side asks first makes the latch. */
class Latches {
  readonly #latches = new Map<string, { opened: Promise<void>; open: () => void }>();

  #get(key: string) {
    let latch = this.#latches.get(key);
    if (!latch) {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => {
        open = resolve;
      });
      latch = { opened, open };
      this.#latches.set(key, latch);
    }
    return latch;
  }

  open(key: string): void {
    this.#get(key).open();
  }

  opened(key: string): Promise<void> {
    return this.#get(key).opened;
  }
}

/** The latches of one run, fresh for each, so no run can open another's. */
class Gates {
  /** A child (by key) or a root turn (`root<n>`) has entered `hold`. */
  readonly entered = new Latches();
  /** The test lets a holder go. */
  readonly released = new Latches();
  /** An agent-settle event for this agent id has reached the session's event stream. */
  readonly settled = new Latches();
  /** `hold` calls of the root so far: the n-th started root turn holds as `root<n>`. */
  rootHolds = 0;
}

let gates = new Gates();

/**
 * Waits in the host tool until the test releases its key, or the caller is cancelled. Children
 * call it through the host bridge; the root calls it directly, once per turn, with key `root`.
 */
const hold: AnyTool = {
  name: 'hold',
  description: 'Waits until the test releases this key.',
  inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
  run: (input: { key: string }, context: ToolContext) => {
    const run = gates;
    const key = input.key === 'root' ? `root${run.rootHolds++}` : input.key;
    run.entered.open(key);
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(new Error('cancelled while held'));
      if (context.signal.aborted) return onAbort();
      context.signal.addEventListener('abort', onAbort, { once: true });
      void run.released.opened(key).then(() => {
        context.signal.removeEventListener('abort', onAbort);
        resolve('released');
      });
    });
  },
};

/** The root's script, in its system prompt so it survives clear(): hold, then text, each turn. */
const ROOT_SYSTEM = `Root.\n${'```'}cohort-script\n${JSON.stringify({
  steps: Array.from({ length: 100 }, () => [
    { calls: [{ name: 'hold', input: { key: 'root' } }] },
    { text: 'ok' },
  ]).flat(),
})}\n${'```'}`;

type Op =
  /** Spawn an async child; wait until it holds. */
  | { kind: 'spawn' }
  /** Release a child; wait until its result settled. */
  | { kind: 'settle'; pick: number }
  /** Cancel a child; wait until its result settled. */
  | { kind: 'cancel'; pick: number }
  /** Clear; wait until every child it cancelled settled and the turn it aborted ended. */
  | { kind: 'clear' }
  /** Enqueue turns without awaiting them; if the first is the only one, wait until it holds. */
  | { kind: 'send'; count: number }
  /** Let every enqueued turn finish, then run a turn that delivers what is pending. */
  | { kind: 'deliver' }
  /** Close the session with whatever is live, held, or queued. */
  | { kind: 'close' };

// A mid-sequence close is rare per op (about a quarter of the runs have one); the rest end in
// the finale.
const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.constant<Op>({ kind: 'spawn' }) },
  { weight: 8, arbitrary: fc.nat(50).map<Op>((pick) => ({ kind: 'settle', pick })) },
  { weight: 4, arbitrary: fc.nat(50).map<Op>((pick) => ({ kind: 'cancel', pick })) },
  { weight: 2, arbitrary: fc.constant<Op>({ kind: 'clear' }) },
  {
    weight: 4,
    arbitrary: fc.integer({ min: 1, max: 3 }).map<Op>((count) => ({ kind: 'send', count })),
  },
  { weight: 4, arbitrary: fc.constant<Op>({ kind: 'deliver' }) },
  { weight: 1, arbitrary: fc.constant<Op>({ kind: 'close' }) },
);

const scenarioArbitrary = fc.record({
  ops: fc.array(opArbitrary, { minLength: 1, maxLength: 30, size: 'medium' }),
  /** How a run that did not close mid-sequence ends: every child released and its result
   * delivered, or a shutdown with whatever is still live. */
  finale: fc.constantFrom('deliver' as const, 'shutdown' as const),
});

/** Replay a failure with the seed and path fast-check prints (add `path` to the options). */
const SEED = 1130;
const NUM_RUNS = 80;

let rig: Rig;
/** Totals across runs, to show the property exercised what it claims to. */
const seen = {
  runs: 0,
  delivered: 0,
  stale: 0,
  cancelledUser: 0,
  cancelledClear: 0,
  cancelledShutdown: 0,
  closedMidSequence: 0,
  turnsCancelledByClear: 0,
  heldTurnsShutDown: 0,
  queuedTurnsShutDown: 0,
  refusedAfterClose: 0,
};

beforeAll(async () => {
  rig = await startRig({ hostTools: [hold], threads: 2 });
});

afterAll(async () => {
  await rig.close();
});

/**
 * Resolves once every child's task has ended, its port drained and closed (`liveCount` 0), so
 * the port counts are final. The pool has no event for a task's end, so this looks again at each
 * turn of the event loop (no wall-clock wait).
 */
async function portsQuiet(): Promise<void> {
  while (rig.engine.liveCount > 0) await new Promise((resolve) => setImmediate(resolve));
}

interface Child {
  id: string;
  key: string;
  generation: number;
  live: boolean;
  outcome?: AgentOutcome;
  reason?: CancelReason;
}

interface OpenTurn {
  promise: Promise<TurnResult>;
  /** Set when it started: the generation it runs in, and its number among started turns. */
  start?: { generation: number; index: number };
}

describe('exactly one result under random interleavings of spawn / settle / cancel / clear / send / close', () => {
  it('holds its invariants, replayably from its seed (property)', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArbitrary, async ({ ops, finale }) => {
        seen.runs++;
        await portsQuiet();
        const run = new Gates();
        gates = run;
        const statsBefore = rig.engine.stats;
        const session = new Session(rig.engine, { autoWake: false, system: ROOT_SYSTEM });
        const events: SessionEvent[] = [];
        const consume = (async () => {
          for await (const event of session.events()) {
            events.push(event);
            if (event.type === 'agent-settle') run.settled.open(event.agentId);
          }
        })();

        // The model of the session, advanced by each op once its effect is in.
        const children: Child[] = [];
        let generation = 0;
        let closed = false;
        /** Ids in the session's inbox, in settle order. */
        let inbox: string[] = [];
        const expectedDelivered: { id: string; generation: number }[] = [];
        const expectedStale = new Set<string>();
        /** Turns sent and not yet ended: the first one has started and holds, the rest queue. */
        let openTurns: OpenTurn[] = [];
        let startedTurns = 0;

        const pick = (index: number): Child | undefined =>
          children.length === 0 ? undefined : children[index % children.length];

        const settled = (child: Child, outcome: AgentOutcome, reason?: CancelReason) => {
          child.live = false;
          child.outcome = outcome;
          if (reason !== undefined) child.reason = reason;
          if (!closed && child.generation === generation) inbox.push(child.id);
          else expectedStale.add(child.id);
        };

        /** The turn starts: it drains the inbox, then holds at its first step. */
        const started = async (turn: OpenTurn) => {
          turn.start = { generation, index: startedTurns++ };
          expectedDelivered.push(...inbox.map((id) => ({ id, generation })));
          inbox = [];
          await run.entered.opened(`root${turn.start.index}`);
        };

        /** The held turn goes on to its end; the next queued one, if any, starts. */
        const finishHeldTurn = async () => {
          const turn = openTurns.shift()!;
          run.released.open(`root${turn.start!.index}`);
          expect(await turn.promise).toMatchObject({
            outcome: 'ready',
            text: 'ok',
            generation: turn.start!.generation,
          });
          if (openTurns[0]) await started(openTurns[0]);
        };

        const close = async () => {
          const live = children.filter((child) => child.live);
          const turns = openTurns;
          openTurns = [];
          closed = true;
          await session.close();
          // Closing waited for every child's result: each one live was cancelled and is stale.
          for (const child of live) {
            await run.settled.opened(child.id);
            settled(child, 'cancelled', 'shutdown');
          }
          for (const turn of turns) {
            expect(await turn.promise).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
            if (turn.start) seen.heldTurnsShutDown++;
            else seen.queuedTurnsShutDown++;
          }
          // Results that were pending stay undelivered.
          expect(session.pending.map((result) => result.id)).toEqual(inbox);
        };

        for (const [index, op] of ops.entries()) {
          switch (op.kind) {
            case 'spawn': {
              const key = `c${children.length}`;
              const input = {
                title: key,
                prompt: scripted([{ calls: [{ name: 'hold', input: { key } }] }, { reply: key }]),
              };
              if (closed) {
                expect(() => session.spawnAsync(input)).toThrow(UsageError);
                seen.refusedAfterClose++;
                break;
              }
              const receipt = session.spawnAsync(input);
              children.push({ id: receipt.id, key, generation, live: true });
              await run.entered.opened(key);
              break;
            }
            case 'settle': {
              const child = pick(op.pick);
              if (!child) break;
              run.released.open(child.key);
              if (child.live) {
                await run.settled.opened(child.id);
                settled(child, 'complete');
              }
              break;
            }
            case 'cancel': {
              const child = pick(op.pick);
              if (!child) break;
              expect(session.cancel(child.id)).toEqual({ id: child.id, wasLive: child.live });
              if (child.live) {
                await run.settled.opened(child.id);
                settled(child, 'cancelled', 'user');
              }
              break;
            }
            case 'clear': {
              // A closed session has nothing left to clear: every child has its result.
              if (closed) break;
              const live = children.filter((child) => child.live);
              session.clear();
              generation++;
              expect(session.generation).toBe(generation);
              for (const id of inbox) expectedStale.add(id);
              inbox = [];
              for (const child of live) {
                await run.settled.opened(child.id);
                settled(child, 'cancelled', 'clear');
              }
              // The held turn is aborted; the next queued one starts in the new generation.
              const aborted = openTurns.shift();
              if (aborted) {
                expect(await aborted.promise).toMatchObject({
                  outcome: 'cancelled',
                  reason: 'clear',
                  generation: aborted.start!.generation,
                });
                seen.turnsCancelledByClear++;
                if (openTurns[0]) await started(openTurns[0]);
              }
              break;
            }
            case 'send': {
              if (closed) {
                await expect(session.send('late')).rejects.toBeInstanceOf(UsageError);
                seen.refusedAfterClose++;
                break;
              }
              const idle = openTurns.length === 0;
              for (let turn = 0; turn < op.count; turn++) {
                openTurns.push({ promise: session.send(`sent at op ${index}`) });
              }
              if (idle) await started(openTurns[0]!);
              break;
            }
            case 'deliver': {
              if (closed) {
                await expect(session.send('deliver')).rejects.toBeInstanceOf(UsageError);
                seen.refusedAfterClose++;
                break;
              }
              while (openTurns.length > 0) await finishHeldTurn();
              const turn: OpenTurn = { promise: session.send('deliver') };
              openTurns.push(turn);
              await started(turn);
              await finishHeldTurn();
              break;
            }
            case 'close':
              if (!closed) seen.closedMidSequence++;
              await close();
              break;
          }
        }

        if (!closed && finale === 'deliver') {
          // One at a time, so the inbox order is the release order.
          for (const child of children.filter((child) => child.live)) {
            run.released.open(child.key);
            await run.settled.opened(child.id);
            settled(child, 'complete');
          }
          while (openTurns.length > 0) await finishHeldTurn();
          const turn: OpenTurn = { promise: session.send('final delivery') };
          openTurns.push(turn);
          await started(turn);
          await finishHeldTurn();
          expect(session.pending).toEqual([]);
        }
        await close();
        await consume;

        // Exactly one agent-settle per child, with the outcome the schedule implies.
        for (const child of children) {
          const settles = events.flatMap((event) =>
            event.type === 'agent-settle' && event.agentId === child.id ? [event.result] : [],
          );
          expect(settles).toHaveLength(1);
          const result: AgentResult = settles[0]!;
          expect({ key: child.key, outcome: result.outcome, reason: result.reason }).toEqual({
            key: child.key,
            outcome: child.outcome,
            reason: child.reason,
          });
          expect(result.generation).toBe(child.generation);
        }
        expect(events.some((event) => event.type === 'events-dropped')).toBe(false);

        // Delivered once each, in the turn that drained them, of the generation they were
        // spawned in (which is the generation of that turn), and never stale.
        const delivered = session.delivered;
        expect(
          delivered.map((result) => ({ id: result.id, generation: result.generation })),
        ).toEqual(expectedDelivered);
        const deliveredIds = delivered.map((result) => result.id);
        expect(new Set(deliveredIds).size).toBe(deliveredIds.length);
        for (const result of delivered) {
          expect(children.find((child) => child.id === result.id)?.generation).toBe(
            result.generation,
          );
        }
        // Each result dropped as stale is reported once, and only those the schedule implies.
        const stale = events.flatMap((event) =>
          event.type === 'agent-stale' ? [event.agentId] : [],
        );
        expect([...stale].sort()).toEqual([...expectedStale].sort());
        for (const id of deliveredIds) expect(stale.includes(id)).toBe(false);
        const turnStarts = events.filter((event) => event.type === 'turn-start');
        expect(turnStarts).toHaveLength(startedTurns);

        // Counted at the ports, apart from the settle guard: one result sent per child, each
        // delivered once, none dropped as a duplicate.
        await portsQuiet();
        const statsAfter = rig.engine.stats;
        expect({
          sent:
            statsAfter.workerResults -
            statsBefore.workerResults +
            (statsAfter.mainResults - statsBefore.mainResults),
          delivered: statsAfter.delivered - statsBefore.delivered,
          duplicates: statsAfter.duplicateResults - statsBefore.duplicateResults,
        }).toEqual({ sent: children.length, delivered: children.length, duplicates: 0 });

        seen.delivered += deliveredIds.length;
        seen.stale += stale.length;
        for (const child of children) {
          if (child.reason === 'user') seen.cancelledUser++;
          if (child.reason === 'clear') seen.cancelledClear++;
          if (child.reason === 'shutdown') seen.cancelledShutdown++;
        }
      }),
      {
        numRuns: NUM_RUNS,
        seed: SEED,
        // A run that hangs fails (and is reported with its seed and path) instead of running
        // into the test's timeout, which would print nothing.
        timeout: 15_000,
        interruptAfterTimeLimit: 90_000,
      },
    );
    // An interrupted property passes silently; every run must have happened.
    expect(seen.runs, 'runs before the time limit').toBe(NUM_RUNS);
    // Every path the property claims to exercise was taken at least once.
    for (const [name, count] of Object.entries(seen)) {
      expect(count, `${name} across ${NUM_RUNS} runs`).toBeGreaterThan(0);
    }
  }, 120_000);
});
