/**
 * The rate-limit governor at its edges: what a response may report oddly, what a listener may
 * do, and the races of main's end of a child's port. The real `Governor` and `GovernorLink`,
 * driven directly; no assertion reads a duration.
 */
import { describe, expect, it } from 'vitest';
import { GovernorLink } from '../src/main/runners/local/governor-link.js';
import { Governor } from '../src/shared/governor/governor.js';
import type { GovernorState } from '../src/shared/governor/types.js';
import type { MainMessage } from '../src/shared/protocol.js';
import { ask, KEY, never, OK as OK_USAGE, permitOf, stateOf } from './governor-helpers.js';
import { latch } from './helpers.js';

/** `anthropic-ratelimit-*` headers for one limit, full again in `fullInMs`. */
function limitHeaders(name: string, limit: number, remaining: number, fullInMs = 60_000) {
  const prefix = `anthropic-ratelimit-${name}`;
  return {
    [`${prefix}-limit`]: String(limit),
    [`${prefix}-remaining`]: String(remaining),
    [`${prefix}-reset`]: new Date(Date.now() + fullInMs).toISOString(),
  };
}

describe('the governor at its edges', () => {
  it('a refusal settled after a bucket was first learned gives back nothing it never took', async () => {
    const governor = new Governor({ initialConcurrency: 3 });
    const [a, b, c] = await Promise.all(
      [1, 2, 3].map(() => governor.admit(ask({ inputTokens: 20_000 }), never()).then(permitOf)),
    );
    // The last one's response teaches the input bucket: 30,000 a minute, nothing left.
    governor.settle(c!, {
      outcome: 'ok',
      usage: { inputTokens: 20_000, outputTokens: 10 },
      headers: limitHeaders('input-tokens', 30_000, 0),
    });
    // The first two were sent before the bucket existed: their refusals owe it nothing.
    for (const permit of [a!, b!]) {
      governor.settle(permit, {
        outcome: 'rate_limited',
        usage: { inputTokens: 0, outputTokens: 0 },
      });
    }
    const input = stateOf(governor).inputTokens!;
    expect(input.limit).toBe(30_000);
    // A little has refilled since, but nowhere near the 40,000 the phantom refunds made.
    expect(input.remaining).toBeLessThan(5_000);
  });

  it('usage that is not a number leaves the output bucket a number, and pacing on', async () => {
    const governor = new Governor({ otpm: 10_000 });
    const permit = permitOf(await governor.admit(ask(), never()));
    governor.settle(permit, {
      outcome: 'ok',
      usage: { inputTokens: 10, outputTokens: undefined as unknown as number },
    });
    const output = stateOf(governor).outputTokens!;
    expect(Number.isFinite(output.remaining)).toBe(true);
    // Pacing still works: a response that spent 5,000 output tokens leaves the bucket in debt,
    // so the next request waits instead of going at once.
    governor.settle(permitOf(await governor.admit(ask(), never())), {
      outcome: 'ok',
      usage: { inputTokens: 10, outputTokens: 5_000 },
    });
    const controller = new AbortController();
    const pending = governor.admit(ask(), controller.signal);
    await new Promise((resolve) => setImmediate(resolve));
    expect(stateOf(governor).queued).toBe(1);
    controller.abort();
    expect(await pending).toEqual({ ok: false, reason: 'aborted' });
  });

  it('a learned limit below the configured one shrinks the bucket to it', async () => {
    const governor = new Governor({ rpm: 4_000 });
    const permit = permitOf(await governor.admit(ask(), never()));
    governor.settle(permit, { ...OK_USAGE, headers: limitHeaders('requests', 50, 49) });
    const requests = stateOf(governor).requests!;
    expect(requests).toMatchObject({ limit: 50, source: 'learned' });
    expect(requests.remaining).toBeLessThanOrEqual(50);
  });

  it('a bucket learned larger than the configured burst grants the difference at once', async () => {
    // 600 a minute starts with a second's worth, 10; the provider says its bucket holds a minute.
    const governor = new Governor({ rpm: 600 });
    const permit = permitOf(await governor.admit(ask(), never()));
    governor.settle(permit, { ...OK_USAGE, headers: limitHeaders('requests', 600, 599, 1_000) });
    expect(stateOf(governor).requests!.remaining).toBeGreaterThan(500);
  });

  it('a retry-after longer than the patience pauses the key only as long as the patience', async () => {
    const governor = new Governor({ patienceMs: 150, initialConcurrency: 1, maxConcurrency: 1 });
    const permit = permitOf(await governor.admit(ask(), never()));
    const waiting = governor.admit(ask(), never());
    const refusedAt = Date.now();
    governor.settle(permit, {
      outcome: 'rate_limited',
      usage: { inputTokens: 0, outputTokens: 0 },
      headers: { 'retry-after': '3600' },
    });
    expect(stateOf(governor).pausedUntil).toBeLessThanOrEqual(refusedAt + 1_000);
    permitOf(await waiting);
  });

  it('a listener that throws harms neither the governor nor the other listeners', async () => {
    const governor = new Governor();
    const seen: GovernorState[] = [];
    governor.subscribe(() => {
      throw new Error('an onlooker fails');
    });
    const updated = latch();
    governor.subscribe((state) => {
      seen.push(state);
      updated.open();
    });
    governor.settle(permitOf(await governor.admit(ask(), never())), OK_USAGE);
    await updated.opened;
    expect(seen[0]).toMatchObject({ key: KEY, inFlight: 0 });
  });
});

describe("main's end of a child's governor traffic", () => {
  it('a withdrawal that lands before its grant is recorded gives the permit back', async () => {
    const governor = new Governor({ initialConcurrency: 1, maxConcurrency: 1 });
    const posted: MainMessage[] = [];
    const link = new GovernorLink(governor, (message) => posted.push(message));
    link.handle({ type: 'gov-admit', id: 1, request: ask() });
    await new Promise((resolve) => setImmediate(resolve));
    link.handle({ type: 'gov-admit', id: 2, request: ask() });
    // As `readPending()` handles them: no microtask between the settle that admits 2 and 2's withdrawal.
    link.handle({ type: 'gov-settle', id: 1, report: OK_USAGE });
    link.handle({ type: 'gov-withdraw', id: 2 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(governor.held).toBe(0);
    expect(link.holding).toBe(0);
    expect(stateOf(governor)).toMatchObject({ inFlight: 0, queued: 0 });
    // The worker was told of 1's admission only: 2 was withdrawn.
    expect(
      posted.filter((message) => message.type === 'gov-admission' && message.admission.ok),
    ).toHaveLength(1);
  });
});
