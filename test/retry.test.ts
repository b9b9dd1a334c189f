import { describe, expect, it } from 'vitest';
import { parseDuration } from '../src/shared/duration.js';
import { backoffMs, retryAfterMs, shouldRetry } from '../src/shared/provider/retry.js';
import type { ProviderErrorCode } from '../src/shared/provider/types.js';

describe('backoff', () => {
  it('prefers retry-after-ms over retry-after', () => {
    const headers = new Headers({ 'retry-after-ms': '250', 'retry-after': '9' });
    expect(retryAfterMs(headers)).toBe(250);
    expect(backoffMs({ retry: 0, baseMs: 500, maxMs: 30_000, headers })).toBe(250);
  });

  it('reads retry-after in seconds and as an HTTP date', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '2' }))).toBe(2000);
    const inFive = new Date(Date.now() + 5000).toUTCString();
    const ms = retryAfterMs(new Headers({ 'retry-after': inFive }))!;
    expect(ms).toBeGreaterThan(3000);
    expect(ms).toBeLessThanOrEqual(5000);
  });

  it('falls back to exponential backoff with jitter, capped', () => {
    const low = () => 0;
    const high = () => 0.999_999;
    expect(backoffMs({ retry: 0, baseMs: 100, maxMs: 10_000, random: low })).toBe(50);
    expect(backoffMs({ retry: 3, baseMs: 100, maxMs: 10_000, random: high })).toBe(800);
    expect(backoffMs({ retry: 20, baseMs: 100, maxMs: 1000, random: high })).toBe(1000);
  });

  it('never waits longer than the cap, even when the server asks', () => {
    expect(
      backoffMs({ retry: 0, baseMs: 1, maxMs: 50, headers: new Headers({ 'retry-after': '60' }) }),
    ).toBe(50);
  });
});

describe('what is retried', () => {
  const failure = (code: ProviderErrorCode, final?: boolean) => ({
    error: { code, message: 'm' },
    ...(final === undefined ? {} : { final }),
  });

  it('retries load, server faults, the network and garbled streams; never the request or the key', () => {
    for (const code of [
      'rate_limited',
      'overloaded',
      'server_error',
      'connection',
      'stalled',
      'bad_response',
    ] as const) {
      expect(shouldRetry(failure(code)), code).toBe(true);
    }
    for (const code of ['bad_request', 'auth', 'aborted'] as const) {
      expect(shouldRetry(failure(code)), code).toBe(false);
    }
  });

  it('never retries a failure marked final, whatever its code', () => {
    expect(shouldRetry(failure('connection', true))).toBe(false);
    expect(shouldRetry(failure('bad_response', true))).toBe(false);
  });
});

describe('parseDuration', () => {
  it('accepts units and plain milliseconds', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2s')).toBe(2000);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration('250')).toBe(250);
  });

  it('says what was expected and what arrived', () => {
    expect(() => parseDuration('soon', '--ceiling')).toThrow(
      'Expected `--ceiling` to be a duration like 500ms, 2s, 5m, 1h or a number of milliseconds, at most 2147483647 ms (about 24.8 days), got `soon` (string)',
    );
    expect(() => parseDuration('-1s')).toThrow(/got `-1s`/);
  });

  it('refuses durations a Node timer cannot honour (over 2³¹−1 ms), by flag and in the library', () => {
    expect(parseDuration(2 ** 31 - 1)).toBe(2 ** 31 - 1);
    expect(parseDuration('596h')).toBe(596 * 3_600_000);
    // 30 days: a setTimeout this long would fire after 1 ms and reap every agent at once.
    expect(() => parseDuration('720h', '--ceiling')).toThrow(/at most 2147483647 ms.*got `720h`/);
    expect(() => parseDuration(2 ** 31)).toThrow(/got `2147483648` \(number\)/);
  });
});
