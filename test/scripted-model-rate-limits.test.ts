/**
 * The scripted model's rate limits: `RateLimits` on an injected clock (refill arithmetic,
 * debt, keys, the ramp limit, header values), the options and flags that set them, and the
 * server over HTTP through the official SDK, in process and as `cohort mock`.
 */

import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ScriptedModel,
  type ScriptedModelOptions,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import { resolveOptions } from '../src/testing/load-model.js';
import {
  type Admission,
  hasRateLimits,
  type RateLimitSettings,
  RateLimits,
} from '../src/testing/rate-limits.js';
import { parseMockFlags } from '../src/testing/serve-command.js';
import { runCli } from './cli-helpers.js';
import { apiError } from './helpers.js';

/** 2026-11-30T19:40:00.200Z: a fixed wall clock, a fifth of a second past a whole second. */
const WALL = Date.UTC(2026, 10, 30, 19, 40, 0, 200);

function limits(settings: Partial<RateLimitSettings>): RateLimits {
  return new RateLimits(
    { rpm: 0, itpm: 0, otpm: 0, bucketSeconds: 60, acceleration: 0, ...settings },
    () => WALL,
  );
}

type Refusal = Extract<Admission, { ok: false }>;

function refused(admission: Admission): Refusal {
  if (admission.ok) throw new Error('Expected a refusal, got an admission');
  return admission;
}

describe('RateLimits: buckets', () => {
  it('holds bucketSeconds of the limit and refills continuously at limit / 60 per second', () => {
    // 120 rpm in a one-second bucket: 2 requests, one more every 500 ms.
    const rate = limits({ rpm: 120, bucketSeconds: 1 });
    expect(rate.admit('k', 0, 0).ok).toBe(true);
    expect(rate.admit('k', 0, 0).ok).toBe(true);
    expect(refused(rate.admit('k', 0, 0)).waitMs).toBe(500);
    expect(refused(rate.admit('k', 0, 250)).waitMs).toBe(250);
    expect(rate.admit('k', 0, 500).ok).toBe(true);
    // A long idle refills only up to the capacity.
    expect(rate.headers('k', 1_000_000)['anthropic-ratelimit-requests-remaining']).toBe('2');
  });

  it('holds the whole minute by default, and at least one request', () => {
    const minute = limits({ rpm: 60 });
    for (let index = 0; index < 60; index++) expect(minute.admit('k', 0, 0).ok).toBe(true);
    expect(refused(minute.admit('k', 0, 0)).waitMs).toBe(1000);
    expect(minute.headers('k', 5000)['anthropic-ratelimit-requests-remaining']).toBe('5');
    const tiny = limits({ rpm: 6, bucketSeconds: 1 });
    expect(tiny.admit('k', 0, 0).ok).toBe(true);
    expect(refused(tiny.admit('k', 0, 0)).waitMs).toBe(10_000);
  });

  it('admits a request larger than the input bucket when it is full, leaving it in debt', () => {
    // 6,000 itpm in a one-second bucket: 100 tokens, refilled at 0.1 per ms.
    const rate = limits({ itpm: 6000, bucketSeconds: 1 });
    expect(rate.admit('k', 50, 0).ok).toBe(true);
    const short = refused(rate.admit('k', 80, 0));
    expect(short.waitMs).toBe(300);
    expect(short.message).toBe(
      'This request would exceed the rate limit of 6,000 input tokens per minute for this API key; retry in 0.3 s',
    );
    // Too large for any bucket: it waits for a full one (500 ms), then goes through.
    expect(refused(rate.admit('k', 1000, 100)).waitMs).toBe(400);
    expect(rate.admit('k', 1000, 500).ok).toBe(true);
    // 100 - 1000 = -900 left: one token needs 901 more, 9,010 ms.
    expect(refused(rate.admit('k', 1, 500)).waitMs).toBe(9010);
    expect(rate.headers('k', 500)['anthropic-ratelimit-input-tokens-remaining']).toBe('0');
    expect(rate.admit('k', 1, 9510).ok).toBe(true);
  });

  it('charges output as generated: a debt blocks the next admission until refilled', () => {
    const rate = limits({ otpm: 6000, bucketSeconds: 1 });
    expect(rate.admit('k', 0, 0).ok).toBe(true);
    rate.chargeOutput('k', 60, 0);
    expect(rate.admit('k', 0, 0).ok).toBe(true);
    rate.chargeOutput('k', 240, 0);
    // 100 - 300 = -200: the bucket must get back to one token, 201 tokens at 0.1 per ms.
    const refusal = refused(rate.admit('k', 0, 10));
    expect(refusal.waitMs).toBe(2000);
    expect(refusal.message).toMatch(/rate limit of 6,000 output tokens per minute/);
    expect(rate.admit('k', 0, 2010).ok).toBe(true);
  });

  it('keeps every API key in its own buckets', () => {
    const rate = limits({ rpm: 1, itpm: 1000 });
    expect(rate.admit('alice', 10, 0).ok).toBe(true);
    expect(rate.admit('alice', 10, 0).ok).toBe(false);
    expect(rate.admit('bob', 10, 0).ok).toBe(true);
    expect(rate.headers('carol', 0)['anthropic-ratelimit-requests-remaining']).toBe('1');
  });

  it('takes nothing on a refusal and names the limit that frees up last', () => {
    // 2 requests, one more every 500 ms; 100 input tokens, 0.1 more per ms.
    const rate = limits({ rpm: 120, itpm: 6000, bucketSeconds: 1 });
    expect(rate.admit('k', 100, 0).ok).toBe(true);
    const tokens = refused(rate.admit('k', 50, 0));
    expect(tokens.waitMs).toBe(500);
    expect(tokens.message).toMatch(/rate limit of 6,000 input tokens per minute/);
    expect(tokens.headers['anthropic-ratelimit-requests-remaining']).toBe('1');
    expect(rate.admit('k', 0, 0).ok).toBe(true);
    // Now the request bucket frees up in 500 ms and the token bucket in 100: requests bind.
    const requests = refused(rate.admit('k', 10, 0));
    expect(requests.waitMs).toBe(500);
    expect(requests.message).toMatch(/rate limit of 120 requests per minute/);
    expect(rate.admit('k', 10, 500).ok).toBe(true);
  });

  it('says retry-after in whole seconds, at least 1, and retry-after-ms exactly', () => {
    const rate = limits({ rpm: 120, bucketSeconds: 1 });
    rate.admit('k', 0, 0);
    rate.admit('k', 0, 0);
    const soon = refused(rate.admit('k', 0, 0));
    expect(soon.headers['retry-after']).toBe('1');
    expect(soon.headers['retry-after-ms']).toBe('500');
    const slow = limits({ rpm: 1 });
    slow.admit('k', 0, 0);
    const later = refused(slow.admit('k', 0, 1));
    expect(later.headers['retry-after']).toBe('60');
    // 59,999 ms, give or take the last floating-point digit of 1/60,000 per ms.
    expect(Number(later.headers['retry-after-ms'])).toBeGreaterThanOrEqual(59_999);
    expect(Number(later.headers['retry-after-ms'])).toBeLessThanOrEqual(60_000);
    expect(later.message).toMatch(
      /rate limit of 1 request per minute for this API key; retry in 60\.0 s$/,
    );
  });

  it('forgets idle keys only when they are as good as new', () => {
    const rate = limits({ rpm: 1 });
    expect(rate.admit('busy', 0, 0).ok).toBe(true);
    // Enough fresh keys to trigger the sweep of idle ones: the busy key keeps its state.
    for (let index = 0; index < 5000; index++) rate.admit(`key-${index}`, 0, 1000);
    expect(rate.admit('busy', 0, 1000).ok).toBe(false);
    expect(rate.admit('busy', 0, 60_000).ok).toBe(true);
  });
});

describe('RateLimits: the ramp (acceleration) limit', () => {
  it('lets an idle key send about F requests per second, then refuses with ramp_limit_exceeded', () => {
    const rate = limits({ acceleration: 2 });
    expect(rate.admit('k', 0, 0).ok).toBe(true);
    expect(rate.admit('k', 0, 0).ok).toBe(true);
    const refusal = refused(rate.admit('k', 0, 0));
    expect(refusal.errorCode).toBe('ramp_limit_exceeded');
    // The allowed rate is 2 × max(average, 1/s) = 2/s: one more request in 500 ms.
    expect(refusal.waitMs).toBe(500);
    expect(refusal.message).toMatch(
      /acceleration limit for this API key.*2\.0 requests per second/,
    );
    // The ramp limit has no header of its own.
    expect(refusal.headers).toEqual({ 'retry-after': '1', 'retry-after-ms': '500' });
  });

  it('estimates the admitted rate of a steady stream and allows F times it', () => {
    const rate = limits({ acceleration: 2 });
    // 1.5 requests a second (under the 2/s an idle key gets) for ten minutes: the average
    // converges on 1.5/s.
    let now = 0;
    for (; now < 600_000; now += 2000 / 3) expect(rate.admit('k', 0, now).ok).toBe(true);
    let burst = 0;
    let admission = rate.admit('k', 0, now);
    while (admission.ok) {
      burst++;
      admission = rate.admit('k', 0, now);
    }
    // The bucket holds one second of 2 × 1.5/s, a hair less just before the next request is due.
    expect(burst).toBeGreaterThanOrEqual(2);
    expect(burst).toBeLessThanOrEqual(3);
    // The burst itself raised the average a little (each admission adds 1/60 s⁻¹).
    expect(refused(admission).message).toMatch(/at most 3\.[0-2] requests per second/);
  });

  it('refuses a sudden jump but admits a gradual ramp to the same rate', () => {
    const jump = limits({ acceleration: 2 });
    let now = 0;
    for (; now < 300_000; now += 1000) jump.admit('k', 0, now);
    // From 1/s to 10/s at once: refused within the first second.
    let refusals = 0;
    for (const end = now + 1000; now < end; now += 100) {
      if (!jump.admit('k', 0, now).ok) refusals++;
    }
    expect(refusals).toBeGreaterThan(0);
    // From 1/s to 10/s over four minutes, growing like e^(t/100 s): well inside e^((F-1)t/60 s).
    const ramp = limits({ acceleration: 2 });
    now = 0;
    let rampRefusals = 0;
    while (now < 240_000) {
      if (!ramp.admit('k', 0, now).ok) rampRefusals++;
      now += 1000 / Math.min(10, Math.exp(now / 100_000));
    }
    expect(rampRefusals).toBe(0);
  });

  it('admits a request that waited exactly the retry-after-ms of its refusal', () => {
    const rate = limits({ acceleration: 2 });
    let now = 0;
    let refusedAgain = 0;
    let waited = false;
    // A client sending every 7 ms, and after a refusal only once the wait it was told is over.
    while (now < 120_000) {
      const admission = rate.admit('k', 0, now);
      if (admission.ok) {
        waited = false;
        now += 7;
        continue;
      }
      if (waited) refusedAgain++;
      waited = true;
      now += admission.waitMs;
    }
    expect(refusedAgain).toBe(0);
  });

  it('grows the allowed rate while the client keeps up with it', () => {
    const rate = limits({ acceleration: 2 });
    const perSecond: number[] = [];
    let now = 0;
    // A greedy client: it sends again as soon as it is told it may.
    while (now < 180_000) {
      const admission = rate.admit('k', 0, now);
      if (admission.ok) {
        const second = Math.floor(now / 1000);
        perSecond[second] = (perSecond[second] ?? 0) + 1;
      } else now += admission.waitMs;
    }
    const sum = (from: number, to: number): number =>
      perSecond.slice(from, to).reduce((total, count) => total + (count ?? 0), 0);
    // Past the 1/s floor the allowed rate grows like e^(t/60 s): 170..180 s carries several
    // times what 10..20 s did.
    expect(sum(170, 180)).toBeGreaterThan(5 * sum(10, 20));
  });
});

describe('RateLimits: headers', () => {
  it('sends nothing when only the ramp limit is set, and knows when any limit is', () => {
    expect(limits({ acceleration: 2 }).headers('k', 0)).toEqual({});
    const settings = { rpm: 0, itpm: 0, otpm: 0, bucketSeconds: 60, acceleration: 0 };
    expect(hasRateLimits(settings)).toBe(false);
    expect(hasRateLimits({ ...settings, otpm: 5 })).toBe(true);
    expect(hasRateLimits({ ...settings, acceleration: 1 })).toBe(true);
  });

  it('gives exact requests, tokens to the nearest thousand, and reset in RFC 3339', () => {
    const rate = limits({ rpm: 60, itpm: 100_000, otpm: 20_000 });
    const first = rate.admit('k', 1499, 0);
    expect(first).toEqual({
      ok: true,
      headers: {
        'anthropic-ratelimit-requests-limit': '60',
        'anthropic-ratelimit-requests-remaining': '59',
        // One request short of full at 1/s: full in 1 s, at 19:40:01.2, rounded up.
        'anthropic-ratelimit-requests-reset': '2026-11-30T19:40:02Z',
        'anthropic-ratelimit-input-tokens-limit': '100000',
        'anthropic-ratelimit-input-tokens-remaining': '99000',
        // 1,499 tokens at 100,000 a minute: 0.9 s, 19:40:01.1, rounded up.
        'anthropic-ratelimit-input-tokens-reset': '2026-11-30T19:40:02Z',
        'anthropic-ratelimit-output-tokens-limit': '20000',
        'anthropic-ratelimit-output-tokens-remaining': '20000',
        // A full bucket is full now: 19:40:00.2, rounded up.
        'anthropic-ratelimit-output-tokens-reset': '2026-11-30T19:40:01Z',
        // Output has less left than input, so it is the tokens-* limit.
        'anthropic-ratelimit-tokens-limit': '20000',
        'anthropic-ratelimit-tokens-remaining': '20000',
        'anthropic-ratelimit-tokens-reset': '2026-11-30T19:40:01Z',
      },
    });
    const second = rate.admit('k', 2, 0);
    expect(second.headers['anthropic-ratelimit-requests-remaining']).toBe('58');
    expect(second.headers['anthropic-ratelimit-input-tokens-remaining']).toBe('98000');
  });

  it('makes tokens-* the input limit once input has less left than output', () => {
    const rate = limits({ itpm: 100_000, otpm: 20_000 });
    expect(rate.admit('k', 90_000, 0).ok).toBe(true);
    rate.chargeOutput('k', 4_000, 0);
    const headers = rate.headers('k', 0);
    expect(headers['anthropic-ratelimit-output-tokens-remaining']).toBe('16000');
    expect(headers['anthropic-ratelimit-tokens-limit']).toBe('100000');
    expect(headers['anthropic-ratelimit-tokens-remaining']).toBe('10000');
    // 90,000 tokens at 100,000 a minute: 54 s after 19:40:00.2.
    expect(headers['anthropic-ratelimit-tokens-reset']).toBe('2026-11-30T19:40:55Z');
  });

  it('never shows a negative remaining, nor more than the limit', () => {
    const rate = limits({ itpm: 1500, otpm: 1500 });
    expect(rate.headers('k', 0)['anthropic-ratelimit-input-tokens-remaining']).toBe('1500');
    rate.chargeOutput('k', 5000, 0);
    expect(rate.headers('k', 0)['anthropic-ratelimit-output-tokens-remaining']).toBe('0');
    expect(rate.headers('k', 0)['anthropic-ratelimit-tokens-remaining']).toBe('0');
  });
});

describe('rate limit options and flags', () => {
  it('defaults to no limits, a 60-second bucket, no ramp and lenient auth', () => {
    expect(resolveOptions()).toMatchObject({
      rpm: 0,
      itpm: 0,
      otpm: 0,
      bucketSeconds: 60,
      acceleration: 0,
      strictAuth: false,
    });
  });

  it('refuses bad values, saying what was expected and what arrived', () => {
    expect(() => resolveOptions({ itpm: -1 })).toThrow(
      'Expected `itpm` to be an integer from 0 and up, got `-1` (number)',
    );
    expect(() => resolveOptions({ rpm: 1.5 })).toThrow(/Expected `rpm` to be an integer/);
    expect(() => resolveOptions({ bucketSeconds: 0 })).toThrow(
      'Expected `bucketSeconds` to be a number above 0 and at most 60, got `0` (number)',
    );
    expect(() => resolveOptions({ bucketSeconds: 61 })).toThrow(/`bucketSeconds`/);
    expect(() => resolveOptions({ acceleration: 0.5 })).toThrow(
      'Expected `acceleration` to be 0 (off) or a number from 1 and up, got `0.5` (number)',
    );
    expect(() => resolveOptions({ strictAuth: 'yes' as unknown as boolean })).toThrow(
      'Expected `strictAuth` to be true or false, got `"yes"` (string)',
    );
  });

  it('parses the cohort mock flags', () => {
    expect(
      parseMockFlags([
        '--rpm',
        '50',
        '--itpm',
        '30000',
        '--otpm',
        '8000',
        '--bucket-seconds',
        '1.5',
        '--acceleration',
        '2',
        '--strict-auth',
      ]),
    ).toEqual({
      rpm: 50,
      itpm: 30_000,
      otpm: 8000,
      bucketSeconds: 1.5,
      acceleration: 2,
      strictAuth: true,
    });
    expect(parseMockFlags([])).toEqual({});
    expect(() => parseMockFlags(['--acceleration', '0.9'])).toThrow(
      'Expected --acceleration to be 0 (off) or a number from 1 and up, got `0.9`',
    );
    expect(() => parseMockFlags(['--otpm', 'lots'])).toThrow(
      'Expected --otpm to be an integer from 0 and up, got `lots`',
    );
  });
});

describe('rate limits over HTTP, through the official SDK', () => {
  const RESET = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
  let model: ScriptedModel | undefined;

  afterEach(async () => {
    await model?.close();
    model = undefined;
  });

  async function serve(options: ScriptedModelOptions): Promise<string> {
    model = await startScriptedModel(options);
    return model.url;
  }

  function clientOf(url: string, apiKey = 'key-a'): Anthropic {
    return new Anthropic({ apiKey, baseURL: url, maxRetries: 0 });
  }

  function params(text = 'ok', content = 'Say it.'): Anthropic.MessageCreateParamsNonStreaming {
    return {
      model: 'scripted',
      max_tokens: 4096,
      system: scriptBlock([{ text }]),
      messages: [{ role: 'user', content }],
    };
  }

  it('sends every configured header, with requests remaining counting down under a burst', async () => {
    // 6 requests a minute: the bucket starts full at exactly 6 and gains one every 10 s, so
    // a burst of 5 sees 5, 4, 3, 2, 1 left.
    const client = clientOf(await serve({ rpm: 6, itpm: 1_000_000, otpm: 1_000_000 }));
    const responses = await Promise.all(
      Array.from({ length: 5 }, () => client.messages.create(params()).withResponse()),
    );
    const remaining = responses.map(({ response }) =>
      Number(response.headers.get('anthropic-ratelimit-requests-remaining')),
    );
    expect(remaining.sort()).toEqual([1, 2, 3, 4, 5]);
    for (const { response } of responses) {
      const headers = response.headers;
      expect(headers.get('anthropic-ratelimit-requests-limit')).toBe('6');
      expect(headers.get('anthropic-ratelimit-input-tokens-limit')).toBe('1000000');
      expect(headers.get('anthropic-ratelimit-output-tokens-limit')).toBe('1000000');
      expect(headers.get('anthropic-ratelimit-tokens-limit')).toBe('1000000');
      // A few dozen tokens out of a million: rounded to the nearest thousand, the full million.
      expect(headers.get('anthropic-ratelimit-input-tokens-remaining')).toBe('1000000');
      for (const name of ['requests', 'input-tokens', 'output-tokens', 'tokens']) {
        expect(headers.get(`anthropic-ratelimit-${name}-reset`)).toMatch(RESET);
      }
      expect(headers.get('retry-after')).toBeNull();
    }
    // After the last of the burst the bucket is 5 short at one a 10 s: full in 50 s.
    const last = responses.find(
      ({ response }) => response.headers.get('anthropic-ratelimit-requests-remaining') === '1',
    );
    const reset = Date.parse(
      last?.response.headers.get('anthropic-ratelimit-requests-reset') ?? '',
    );
    expect(reset - Date.now()).toBeGreaterThan(40_000);
    expect(reset - Date.now()).toBeLessThanOrEqual(51_000);
  });

  it('sends no rate-limit header when no limit is set', async () => {
    const client = clientOf(await serve({}));
    const { response } = await client.messages.create(params()).withResponse();
    const names = [...response.headers.keys()].filter((name) =>
      name.startsWith('anthropic-ratelimit'),
    );
    expect(names).toEqual([]);
  });

  it('answers 429 with retry-after, retry-after-ms and a message naming the limit', async () => {
    const client = clientOf(await serve({ rpm: 1 }));
    await client.messages.create(params());
    const error = await apiError(client.messages.create(params()));
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    expect(error.type).toBe('rate_limit_error');
    expect(error.apiMessage).toMatch(
      /^This request would exceed the rate limit of 1 request per minute for this API key; retry in \d+\.\d s$/,
    );
    expect(error.apiMessage).not.toContain('key-a');
    const seconds = Number(error.headers?.get('retry-after'));
    const milliseconds = Number(error.headers?.get('retry-after-ms'));
    expect(Number.isInteger(seconds) && seconds >= 1 && seconds <= 60).toBe(true);
    expect(milliseconds).toBeGreaterThan(0);
    expect(milliseconds).toBeLessThanOrEqual(60_000);
    expect(seconds).toBe(Math.max(1, Math.ceil(milliseconds / 1000)));
    expect(error.headers?.get('anthropic-ratelimit-requests-remaining')).toBe('0');
    expect(model?.stats).toMatchObject({ completed: 1, rateLimited429: 1 });
  });

  it('keeps two API keys in separate buckets', async () => {
    const url = await serve({ rpm: 1 });
    const alice = clientOf(url, 'key-alice');
    const bob = clientOf(url, 'key-bob');
    await alice.messages.create(params());
    expect((await apiError(alice.messages.create(params()))).status).toBe(429);
    const { response } = await bob.messages.create(params()).withResponse();
    expect(response.headers.get('anthropic-ratelimit-requests-remaining')).toBe('0');
  });

  it('refuses a burst of large requests by input tokens, letting the first through', async () => {
    // About 1,500 input tokens each against 2,000 a minute: one fits, the rest must wait.
    const client = clientOf(await serve({ itpm: 2000 }));
    const large = params('ok', 'word '.repeat(1200));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 3 }, () => client.messages.create(large)),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === 'fulfilled') continue;
      const error = outcome.reason as InstanceType<typeof Anthropic.APIError>;
      expect(error.status).toBe(429);
      expect(error.apiMessage).toMatch(/rate limit of 2,000 input tokens per minute/);
      // About 1,000 tokens short at 2,000 a minute: some 30 s.
      expect(Number(error.headers?.get('retry-after'))).toBeGreaterThan(20);
    }
  });

  it('admits one request larger than the whole input bucket, then refuses the next', async () => {
    const client = clientOf(await serve({ itpm: 500 }));
    const huge = params('ok', 'word '.repeat(2000));
    const { response } = await client.messages.create(huge).withResponse();
    expect(response.headers.get('anthropic-ratelimit-input-tokens-remaining')).toBe('0');
    const error = await apiError(client.messages.create(params()));
    expect(error.apiMessage).toMatch(/rate limit of 500 input tokens per minute/);
  });

  it('charges output tokens as generated: a long answer refuses the next request', async () => {
    // About 2,000 output tokens against 1,000 a minute: the bucket goes into debt.
    const client = clientOf(await serve({ otpm: 1000 }));
    const stream = client.messages.stream({ ...params('x'.repeat(8000)), stream: true });
    await stream.finalMessage();
    const error = await apiError(client.messages.create(params()));
    expect(error.status).toBe(429);
    expect(error.apiMessage).toMatch(/rate limit of 1,000 output tokens per minute/);
    expect(error.headers?.get('anthropic-ratelimit-output-tokens-remaining')).toBe('0');
  });

  it('refuses a sudden burst with the ramp_limit_exceeded error code', async () => {
    // From idle a key may send about F = 1 request per second.
    const client = clientOf(await serve({ acceleration: 1 }));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 5 }, () => client.messages.create(params())),
    );
    const refusals = outcomes.flatMap((outcome) =>
      outcome.status === 'rejected'
        ? [outcome.reason as InstanceType<typeof Anthropic.APIError>]
        : [],
    );
    expect(refusals.length).toBeGreaterThan(0);
    for (const error of refusals) {
      expect(error).toBeInstanceOf(Anthropic.RateLimitError);
      expect(error.errorCode).toBe('ramp_limit_exceeded');
      expect(error.apiMessage).toMatch(/acceleration limit for this API key/);
      expect(Number(error.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
  });

  it('takes its limits from cohort mock flags in a real process', async () => {
    const server = runCli([
      'mock',
      '--port',
      '0',
      '--rpm',
      '2',
      '--itpm',
      '90000',
      '--bucket-seconds',
      '1',
    ]);
    try {
      await server.waitFor(/listening on (http:\/\/\S+)/, 'stdout');
      const url = /listening on (http:\/\/\S+)/.exec(server.stdout())?.[1] ?? '';
      const client = clientOf(url);
      const { response } = await client.messages.create(params()).withResponse();
      expect(response.headers.get('anthropic-ratelimit-requests-limit')).toBe('2');
      expect(response.headers.get('anthropic-ratelimit-input-tokens-limit')).toBe('90000');
      // A one-second bucket of 90,000 a minute holds 1,500: a thousand-odd tokens remain.
      expect(response.headers.get('anthropic-ratelimit-input-tokens-remaining')).toBe('1000');
    } finally {
      server.child.kill('SIGTERM');
      await server.exit;
    }
  });

  it('exits 2 on a bad rate-limit flag, naming it', async () => {
    const bad = runCli(['mock', '--acceleration', '0.5']);
    expect((await bad.exit).code).toBe(2);
    expect(bad.stderr()).toContain(
      'Expected --acceleration to be 0 (off) or a number from 1 and up, got `0.5`',
    );
  });
});
