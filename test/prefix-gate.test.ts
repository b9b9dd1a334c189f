/**
 * Warm, then release (src/shared/governor/prefix-gate.ts), through the real `Governor`: siblings
 * that share a cold prefix wait for one of them to start writing it, and every way the writer
 * can fail hands the write on instead of leaving the others waiting.
 */
import { describe, expect, it } from 'vitest';
import { Governor } from '../src/shared/governor/governor.js';
import type { Admission, AdmitRequest, SettleReport } from '../src/shared/governor/types.js';
import { ask, never, permitOf } from './governor-helpers.js';

const SHARED = { key: 'prefix-a', tokens: 20_000, ttlMs: 300_000 };
const first = (shared = SHARED): Partial<AdmitRequest> => ({
  inputTokens: 20_100,
  cache: { history: 0, shared },
});
const WROTE: SettleReport = {
  outcome: 'ok',
  usage: { inputTokens: 100, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 20_000 },
};
const NOTHING_CACHED: SettleReport = {
  outcome: 'ok',
  usage: { inputTokens: 20_100, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
};

/** Admissions in the order they resolve. */
function track(governor: Governor, count: number, signal = never()) {
  const done: Admission[] = [];
  const all = Array.from({ length: count }, () =>
    governor.admit(ask(first()), signal).then((admission) => {
      done.push(admission);
      return admission;
    }),
  );
  return { done, all };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('warm, then release', () => {
  it('lets one sibling write a cold prefix and the others go once its response has started', async () => {
    const governor = new Governor({ initialConcurrency: 100 });
    const writer = permitOf(await governor.admit(ask(first()), never()));
    const siblings = track(governor, 5);
    await tick();
    expect(siblings.done).toHaveLength(0);
    expect(governor.prefixes).toMatchObject({ waiting: 5 });
    governor.opened(writer, {});
    const admitted = await Promise.all(siblings.all);
    expect(admitted.every((admission) => admission.ok)).toBe(true);
    // Warm now: a later sibling does not wait at all.
    const late = await governor.admit(ask(first()), never());
    expect(late.ok).toBe(true);
    for (const admission of [...admitted, late]) governor.settle(permitOf(admission), WROTE);
    governor.settle(writer, WROTE);
    expect(governor.held).toBe(0);
    expect(governor.prefixes).toMatchObject({ waiting: 0, waited: 5 });
  });

  it('hands the write to the next sibling when the writer fails before its response starts', async () => {
    const governor = new Governor({ initialConcurrency: 100 });
    const writer = permitOf(await governor.admit(ask(first()), never()));
    const siblings = track(governor, 3);
    await tick();
    governor.settle(writer, { outcome: 'overloaded', usage: { inputTokens: 0, outputTokens: 0 } });
    await tick();
    // One sibling took the write over; the other two still wait for it.
    expect(siblings.done).toHaveLength(1);
    const next = permitOf(siblings.done[0] as Admission);
    governor.opened(next, {});
    await Promise.all(siblings.all);
    expect(siblings.done).toHaveLength(3);
    for (const admission of siblings.done) governor.settle(permitOf(admission), WROTE);
    expect(governor.held).toBe(0);
  });

  it('takes an aborted sibling out of the wait, and an aborted writer hands the write on', async () => {
    const governor = new Governor({ initialConcurrency: 100 });
    const writer = permitOf(await governor.admit(ask(first()), never()));
    const controller = new AbortController();
    const leaving = governor.admit(ask(first()), controller.signal);
    const staying = track(governor, 1);
    await tick();
    controller.abort();
    expect(await leaving).toEqual({ ok: false, reason: 'aborted' });
    expect(governor.prefixes).toMatchObject({ waiting: 1 });
    governor.settle(writer, { outcome: 'aborted', usage: { inputTokens: 0, outputTokens: 0 } });
    const [admission] = await Promise.all(staying.all);
    governor.settle(permitOf(admission as Admission), WROTE);
    expect(governor.held).toBe(0);
    expect(governor.prefixes).toMatchObject({ waiting: 0 });
  });

  it('waits at most warmWaitMs for a writer whose response does not start', async () => {
    const governor = new Governor({ initialConcurrency: 100 }, { warmWaitMs: 50 });
    const writer = permitOf(await governor.admit(ask(first()), never()));
    const sibling = await governor.admit(ask(first()), never());
    expect(sibling.ok).toBe(true);
    governor.settle(permitOf(sibling), WROTE);
    governor.settle(writer, WROTE);
  });

  it('stops holding siblings back for a provider that neither reads nor writes the cache', async () => {
    const governor = new Governor({ initialConcurrency: 100 });
    const writer = permitOf(await governor.admit(ask(first()), never()));
    const siblings = track(governor, 2);
    await tick();
    // A server that ignores cache_control: its response starts, and says nothing was cached.
    governor.opened(writer, {});
    governor.settle(writer, NOTHING_CACHED);
    for (const admission of await Promise.all(siblings.all)) {
      governor.settle(permitOf(admission), NOTHING_CACHED);
    }
    // Long after the entry would have expired, a new sibling still goes at once.
    const again = permitOf(await governor.admit(ask(first()), never()));
    const alongside = permitOf(await governor.admit(ask(first()), never()));
    governor.settle(again, NOTHING_CACHED);
    governor.settle(alongside, NOTHING_CACHED);
    expect(governor.held).toBe(0);
  });

  it('keeps different prefixes apart', async () => {
    const governor = new Governor({ initialConcurrency: 100 });
    const a = permitOf(await governor.admit(ask(first()), never()));
    // Another prefix has its own writer: it does not wait for `a`'s.
    const b = permitOf(await governor.admit(ask(first({ ...SHARED, key: 'prefix-b' })), never()));
    governor.settle(a, WROTE);
    governor.settle(b, WROTE);
    expect(governor.held).toBe(0);
  });
});
