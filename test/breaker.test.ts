/**
 * One key's circuit breaker on its own: the real `Breaker`, told how attempts ended, at instants
 * the test chooses (it keeps no timer). Then once inside the real `Governor`, with `Date` alone
 * faked, for the one probe a half-open breaker lets through. No assertion reads a duration.
 */
import { describe, expect, it, vi } from 'vitest';
import { BREAKER_FAILURES, BREAKER_MAX_HOLD_MS, Breaker } from '../src/shared/governor/breaker.js';
import { Governor } from '../src/shared/governor/governor.js';
import type { SettleOutcome, SettleReport } from '../src/shared/governor/types.js';
import { ask, NO_USAGE, never, OK, permitOf, stateOf } from './governor-helpers.js';

const LABEL = 'model at test';
const HOLD = 1000;
const T0 = 1_000_000;

function report(outcome: SettleOutcome, fields: Partial<SettleReport> = {}): SettleReport {
  return { outcome, usage: NO_USAGE, ...fields };
}

const UNREACHABLE = report('unreachable', { message: 'connect ECONNREFUSED 127.0.0.1:9' });
const AUTH = report('auth', { message: 'invalid x-api-key' });

/** `count` connection failures in a row, all at `now`. */
function fail(breaker: Breaker, count: number, now = T0): void {
  for (let index = 0; index < count; index++) breaker.settled(UNREACHABLE, now);
}

describe('the circuit breaker', () => {
  it('opens after five connection failures in a row, and refuses with the cause until the hold ends', () => {
    const breaker = new Breaker(LABEL, HOLD);
    fail(breaker, BREAKER_FAILURES - 1);
    expect(breaker.describe()).toBeUndefined();
    expect(breaker.probing).toBe(false);
    expect(breaker.refusal(T0)).toBeUndefined();
    fail(breaker, 1);
    const open = breaker.describe();
    expect(open).toMatchObject({ state: 'open', code: 'connection', probeAt: T0 + HOLD });
    expect(open?.message).toContain('unreachable (5 connection failures in a row');
    expect(open?.message).toContain('ECONNREFUSED 127.0.0.1:9');
    expect(open?.message).toContain(`stopped sending requests for ${LABEL}`);
    expect(breaker.probing).toBe(true);
    expect(breaker.refusal(T0 + HOLD - 1)).toEqual({
      ok: false,
      reason: 'breaker',
      code: 'connection',
      message: open?.message,
    });
    expect(breaker.describe()?.state).toBe('open');
  });

  it.each([
    ['a success', report('ok')],
    ['a 429', report('rate_limited')],
    ['a 529', report('overloaded')],
    ['a spent quota', report('exhausted')],
    ['a failure the provider answered (a 500)', report('failed', { answered: true })],
  ])('%s between connection failures starts the count again', (_name, answer) => {
    const breaker = new Breaker(LABEL, HOLD);
    fail(breaker, BREAKER_FAILURES - 1);
    breaker.settled(answer, T0);
    fail(breaker, BREAKER_FAILURES - 1);
    expect(breaker.describe()).toBeUndefined();
    fail(breaker, 1);
    expect(breaker.describe()?.state).toBe('open');
  });

  it('a response head counts as an answer too: the count starts again', () => {
    const breaker = new Breaker(LABEL, HOLD);
    fail(breaker, BREAKER_FAILURES - 1);
    breaker.answered();
    fail(breaker, BREAKER_FAILURES - 1);
    expect(breaker.describe()).toBeUndefined();
  });

  it('an aborted attempt, or a failure with no answer, neither counts nor resets', () => {
    const breaker = new Breaker(LABEL, HOLD);
    fail(breaker, BREAKER_FAILURES - 1);
    breaker.settled(report('aborted'), T0);
    breaker.settled(report('failed'), T0);
    expect(breaker.describe()).toBeUndefined();
    fail(breaker, 1);
    expect(breaker.describe()?.state).toBe('open');
  });

  it('a refused API key opens it at once; refusals of requests sent before change nothing', () => {
    const breaker = new Breaker(LABEL, HOLD);
    breaker.settled(AUTH, T0);
    const open = breaker.describe();
    expect(open).toEqual({
      state: 'open',
      code: 'auth',
      message: `invalid x-api-key: stopped sending requests for ${LABEL}`,
      probeAt: T0 + HOLD,
    });
    breaker.settled(AUTH, T0 + 10);
    fail(breaker, BREAKER_FAILURES, T0 + 10);
    expect(breaker.describe()).toEqual(open);
    expect(breaker.refusal(T0)).toMatchObject({ reason: 'breaker', code: 'auth' });
  });

  it('never opens on 429s and 529s, however many', () => {
    const breaker = new Breaker(LABEL, HOLD);
    for (let index = 0; index < 100; index++) {
      breaker.settled(report(index % 2 === 0 ? 'rate_limited' : 'overloaded'), T0);
    }
    expect(breaker.describe()).toBeUndefined();
    expect(breaker.probing).toBe(false);
    expect(breaker.refusal(T0)).toBeUndefined();
  });

  it('turns half-open once the hold is over, and refuses nothing while one request probes', () => {
    const breaker = new Breaker(LABEL, HOLD);
    fail(breaker, BREAKER_FAILURES);
    expect(breaker.refusal(T0 + HOLD)).toBeUndefined();
    const half = breaker.describe();
    expect(half).toMatchObject({ state: 'half-open', code: 'connection' });
    expect(half).not.toHaveProperty('probeAt');
    // Half-open, it stays so whatever the time: the probe decides.
    expect(breaker.refusal(T0 + HOLD + 1)).toBeUndefined();
    expect(breaker.describe()?.state).toBe('half-open');
    expect(breaker.probing).toBe(true);
  });

  it('a failed probe reopens it for twice as long, up to the cap', () => {
    const breaker = new Breaker(LABEL, HOLD);
    fail(breaker, BREAKER_FAILURES);
    const holds: number[] = [];
    let now = T0;
    for (let probe = 0; probe < 10; probe++) {
      now = breaker.describe()!.probeAt!;
      expect(breaker.refusal(now)).toBeUndefined();
      // Alternately a connection failure and a refused key: either reopens it.
      breaker.settled(probe % 2 === 0 ? UNREACHABLE : AUTH, now);
      const reopened = breaker.describe()!;
      expect(reopened.state).toBe('open');
      holds.push(reopened.probeAt! - now);
    }
    expect(holds).toEqual([2, 4, 8, 16, 32, 60, 60, 60, 60, 60].map((s) => s * 1000));
    expect(BREAKER_MAX_HOLD_MS).toBe(60_000);
  });

  it('a first hold longer than the cap is kept, and a failed probe does not lengthen it', () => {
    const breaker = new Breaker(LABEL, 2 * BREAKER_MAX_HOLD_MS);
    fail(breaker, BREAKER_FAILURES);
    const probeAt = breaker.describe()!.probeAt!;
    expect(probeAt).toBe(T0 + 2 * BREAKER_MAX_HOLD_MS);
    breaker.refusal(probeAt);
    breaker.settled(UNREACHABLE, probeAt);
    expect(breaker.describe()!.probeAt).toBe(probeAt + 2 * BREAKER_MAX_HOLD_MS);
  });

  it.each([
    ['a success', report('ok')],
    ['a 529', report('overloaded')],
    ['a failure the provider answered (a 500)', report('failed', { answered: true })],
  ])('%s from the probe closes it, and the count starts from nothing', (_name, answer) => {
    const breaker = new Breaker(LABEL, HOLD);
    breaker.settled(AUTH, T0);
    breaker.refusal(T0 + HOLD);
    breaker.settled(answer, T0 + HOLD);
    expect(breaker.describe()).toBeUndefined();
    expect(breaker.probing).toBe(false);
    fail(breaker, BREAKER_FAILURES - 1, T0 + HOLD);
    expect(breaker.describe()).toBeUndefined();
  });

  it('an answer closes it even while open: a request sent before it opened was answered', () => {
    const breaker = new Breaker(LABEL, HOLD);
    fail(breaker, BREAKER_FAILURES);
    breaker.settled(report('ok'), T0 + 1);
    expect(breaker.describe()).toBeUndefined();
    expect(breaker.refusal(T0 + 1)).toBeUndefined();
  });
});

describe('the circuit breaker in the governor', () => {
  it('half-open, lets exactly one request probe; its answer closes it and the rest go', async () => {
    // Only `Date` is faked: the hold is read from the clock, and no timer is waited on.
    vi.useFakeTimers({ toFake: ['Date'], now: T0 });
    try {
      const governor = new Governor({ initialConcurrency: 8 }, { breakerHoldMs: HOLD });
      const sent = await Promise.all(
        Array.from({ length: BREAKER_FAILURES }, () => governor.admit(ask(), never())),
      );
      for (const admission of sent) governor.settle(permitOf(admission), UNREACHABLE);
      expect(stateOf(governor).breaker).toMatchObject({ state: 'open', code: 'connection' });
      expect(await governor.admit(ask(), never())).toMatchObject({
        ok: false,
        reason: 'breaker',
        code: 'connection',
      });

      vi.setSystemTime(T0 + HOLD);
      const asked = [1, 2, 3].map(() => governor.admit(ask(), never()));
      const probe = permitOf(await asked[0]!);
      expect(stateOf(governor)).toMatchObject({
        inFlight: 1,
        queued: 2,
        breaker: { state: 'half-open' },
      });
      governor.settle(probe, OK);
      const rest = await Promise.all(asked.slice(1));
      expect(rest.every((admission) => admission.ok)).toBe(true);
      const state = stateOf(governor);
      expect(state.breaker).toBeUndefined();
      expect(state.inFlight).toBe(2);
      for (const admission of rest) governor.settle(permitOf(admission), OK);
      expect(governor.held).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
