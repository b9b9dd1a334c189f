import { getEventListeners } from 'node:events';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AgentOptions, Engine } from '../src/main/engine.js';
import { mapAgents } from '../src/main/map-agents.js';
import { type AgentResult, type CancelReason, emptyUsage } from '../src/shared/result.js';

/** Taken from the engine, so the fake follows the handle wherever the pool keeps it. */
type ChildHandle = ReturnType<Engine['spawn']>;

interface FakeChild {
  spec: AgentOptions;
  id: string;
  cancels: CancelReason[];
  settled: boolean;
  /** Settles it `complete`; returns false when it had settled already. */
  finish(): boolean;
}

/**
 * A stand-in for the engine: spawn() returns a handle whose result the test settles by hand.
 * Elsewhere the suite runs real workers (test/batch.test.ts does so for mapAgents); a fake is
 * right here because what is under test is the generator's own bookkeeping (admission, settle
 * order, cancellation, how often it touches each result), and only a fake can count `.then`
 * calls on a result or settle children in an order the test picks.
 */
function fakeEngine() {
  const children: FakeChild[] = [];
  const counter = { thenCalls: 0 };
  let spawnWaiters: { count: number; resolve(): void }[] = [];

  // Derived promises (from then) are counted too: Promise.race calls then on whatever it is
  // given, and the old mapAgents raced promises derived from each result.
  class CountingPromise<T> extends Promise<T> {
    // biome-ignore lint/suspicious/noThenProperty: counting the calls to then is its purpose.
    override then<A = T, B = never>(
      onFulfilled?: ((value: T) => A | PromiseLike<A>) | null,
      onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
    ): Promise<A | B> {
      counter.thenCalls++;
      return super.then(onFulfilled, onRejected);
    }
  }

  const engine = {
    spawn(spec: AgentOptions): ChildHandle {
      const id = `child-${children.length}`;
      let resolve!: (result: AgentResult) => void;
      const result = new CountingPromise<AgentResult>((settle) => {
        resolve = settle;
      });
      const settle = (outcome: AgentResult['outcome'], reason?: CancelReason) => {
        if (child.settled) return false;
        child.settled = true;
        resolve({
          id,
          title: spec.prompt,
          outcome,
          text: outcome === 'complete' ? `done ${spec.prompt}` : '',
          ...(reason === undefined ? {} : { reason }),
          logDir: '',
          truncated: false,
          elapsedMs: 0,
          generation: 0,
          usage: emptyUsage(),
        });
        return true;
      };
      const child: FakeChild = {
        spec,
        id,
        cancels: [],
        settled: false,
        finish: () => settle('complete'),
      };
      children.push(child);
      spawnWaiters = spawnWaiters.filter((waiter) => {
        if (children.length < waiter.count) return true;
        waiter.resolve();
        return false;
      });
      return {
        id,
        title: spec.prompt,
        get status(): ChildHandle['status'] {
          return child.settled ? 'settled' : 'running';
        },
        spawnedAt: 0,
        result,
        cancel: (reason: CancelReason = 'user') => {
          child.cancels.push(reason);
          return settle('cancelled', reason);
        },
      };
    },
  };

  /** Resolves once `count` children have been spawned. */
  const spawned = (count: number) =>
    new Promise<void>((resolve) => {
      if (children.length >= count) resolve();
      else spawnWaiters.push({ count, resolve });
    });

  return { engine, children, counter, spawned };
}

const specsOf = (count: number): AgentOptions[] =>
  Array.from({ length: count }, (_, index) => ({ prompt: `p${index}` }));

describe('mapAgents bookkeeping (fake engine)', () => {
  it('touches each result a constant number of times, however many run at once', async () => {
    const count = 500;
    const { engine, children, counter, spawned } = fakeEngine();
    const results = mapAgents(engine, specsOf(count), { concurrency: count });
    const first = results.next();
    await spawned(count);
    // Settle them all, newest first, before reading any.
    for (let index = count - 1; index >= 0; index--) children[index]!.finish();
    const order = [(await first).value!.result.id];
    for await (const { result } of results) order.push(result.id);

    // Racing every running result after each settle made this ~count²/2 (125,000 here).
    expect(counter.thenCalls).toBeLessThanOrEqual(3 * count);
    expect(order).toEqual(children.map((child) => child.id).reverse());
  });

  it('yields one result per spec in settle order, with at most `concurrency` in flight (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 20 }),
        fc.array(fc.record({ pick: fc.nat(), burst: fc.integer({ min: 1, max: 3 }) }), {
          minLength: 20,
          maxLength: 20,
        }),
        async (concurrency, total, choices) => {
          const { engine, children, spawned } = fakeEngine();
          const results = mapAgents(engine, specsOf(total), { concurrency });
          const settleOrder: string[] = [];
          const yielded: string[] = [];
          for (let round = 0; yielded.length < total; round++) {
            const pending = results.next();
            const admitted = Math.min(total, yielded.length + concurrency);
            await spawned(admitted);
            expect(children).toHaveLength(admitted);
            // Settle a few running children at once, in an order the property picks.
            const { pick, burst } = choices[round % choices.length]!;
            for (let index = 0; index < burst; index++) {
              const running = children.filter((child) => !child.settled);
              if (running.length === 0) break;
              const child = running[(pick + index) % running.length]!;
              child.finish();
              settleOrder.push(child.id);
            }
            const next = await pending;
            expect(next.done).toBe(false);
            yielded.push(next.value!.result.id);
            expect(yielded).toEqual(settleOrder.slice(0, yielded.length));
          }
          expect(await results.next()).toEqual({ value: undefined, done: true });
          expect(children).toHaveLength(total);
          expect(new Set(yielded).size).toBe(total);
          expect(children.every((child) => child.cancels.length === 0)).toBe(true);
        },
      ),
    );
  });

  it('cancels the running children when the consumer breaks early, and spawns no more', async () => {
    const { engine, children, spawned } = fakeEngine();
    const controller = new AbortController();
    const results = mapAgents(engine, specsOf(10), { concurrency: 3, signal: controller.signal });
    const first = results.next();
    await spawned(3);
    children[1]!.finish();
    expect((await first).value!.result.id).toBe('child-1');
    await results.return(undefined);

    expect(children).toHaveLength(3);
    expect(children.map((child) => child.cancels)).toEqual([['user'], [], ['user']]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('on abort admits no more, cancels the running ones with `user` and still yields them', async () => {
    const { engine, children, spawned } = fakeEngine();
    const controller = new AbortController();
    const results = mapAgents(engine, specsOf(10), { concurrency: 3, signal: controller.signal });
    const first = results.next();
    await spawned(3);
    children[0]!.finish();
    expect((await first).value!.result).toMatchObject({ id: 'child-0', outcome: 'complete' });

    // child-0's slot is free, but the abort comes before the generator can refill it.
    controller.abort();
    const rest: string[] = [];
    for await (const { result } of results)
      rest.push(`${result.id}:${result.outcome}:${result.reason}`);

    expect(rest).toEqual(['child-1:cancelled:user', 'child-2:cancelled:user']);
    expect(children).toHaveLength(3);
    expect(children.map((child) => child.cancels)).toEqual([[], ['user'], ['user']]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('runs nothing for a signal aborted before it starts, and leaves no listener', async () => {
    const { engine, children } = fakeEngine();
    const signal = AbortSignal.abort();
    const results: string[] = [];
    for await (const { result } of mapAgents(engine, specsOf(5), { signal })) {
      results.push(result.id);
    }
    expect(results).toEqual([]);
    expect(children).toHaveLength(0);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('takes specs from an async iterable and removes its listener after a full run', async () => {
    const { engine, children, spawned } = fakeEngine();
    const controller = new AbortController();
    async function* specs() {
      yield* specsOf(4);
    }
    const results = mapAgents(engine, specs(), { concurrency: 2, signal: controller.signal });
    const seen: string[] = [];
    for (let index = 0; index < 4; index++) {
      const pending = results.next();
      await spawned(Math.min(4, index + 2));
      children.find((child) => !child.settled)!.finish();
      seen.push((await pending).value!.result.id);
    }
    expect(await results.next()).toEqual({ value: undefined, done: true });
    expect(seen).toEqual(['child-0', 'child-1', 'child-2', 'child-3']);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('spawns nothing a slow source hands over after the signal aborted, and closes the source', async () => {
    const { engine, children, spawned } = fakeEngine();
    const controller = new AbortController();
    let releaseSecond!: () => void;
    let closed = false;
    async function* specs() {
      try {
        yield { prompt: 'first' };
        // The second spec arrives only after the caller has aborted.
        await new Promise<void>((resolve) => {
          releaseSecond = resolve;
        });
        yield { prompt: 'second' };
        yield { prompt: 'third' };
      } finally {
        closed = true;
      }
    }
    const results = mapAgents(engine, specs(), { concurrency: 5, signal: controller.signal });
    const first = results.next();
    await spawned(1);
    controller.abort();
    releaseSecond();
    const seen: string[] = [];
    const head = await first;
    if (!head.done) seen.push(`${head.value.spec.prompt}:${head.value.result.outcome}`);
    for await (const { spec, result } of results) seen.push(`${spec.prompt}:${result.outcome}`);
    expect(seen).toEqual(['first:cancelled']);
    expect(children.map((child) => child.spec.prompt)).toEqual(['first']);
    expect(closed).toBe(true);
  });

  it('checks `concurrency` up front', async () => {
    const { engine } = fakeEngine();
    await expect(mapAgents(engine, specsOf(1), { concurrency: 0 }).next()).rejects.toThrow(
      'Expected `concurrency` to be a whole number from 1 and up, got `0` (number)',
    );
  });
});
