/**
 * The scripted model's "retrying is pointless" answers: a script error's `errorCode`
 * (`error.details.error_code`) and `shouldRetry` (`x-should-retry`), and the spend cap
 * per API key that answers the real API's spend-limit 429. Through the official SDK over
 * HTTP, in process and as `cohort mock`.
 */

import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import {
  parseScript,
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptStep,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';
import { resolveOptions } from '../src/testing/load-model.js';
import { parseMockFlags } from '../src/testing/serve-command.js';
import { runCli } from './cli-helpers.js';
import { apiError } from './helpers.js';

type ApiError = InstanceType<typeof Anthropic.APIError>;

let model: ScriptedModel | undefined;

afterEach(async () => {
  await model?.close();
  model = undefined;
});

async function serve(options: ScriptedModelOptions = {}): Promise<string> {
  model = await startScriptedModel(options);
  return model.url;
}

function clientOf(url: string, apiKey = 'key-a', maxRetries = 0): Anthropic {
  return new Anthropic({ apiKey, baseURL: url, maxRetries });
}

function params(steps: ScriptStep[] = [{ text: 'ok' }]): Anthropic.MessageCreateParamsNonStreaming {
  return {
    model: 'scripted',
    max_tokens: 4096,
    system: scriptBlock(steps),
    messages: [{ role: 'user', content: 'Say it.' }],
  };
}

/** Checks that `error` is the spend-limit 429 the real API sends. */
function expectSpendLimit(error: ApiError): void {
  expect(error).toBeInstanceOf(Anthropic.EnforcedSpendLimitReachedError);
  expect(error).toBeInstanceOf(Anthropic.RateLimitError);
  expect(error.status).toBe(429);
  expect(error.type).toBe('rate_limit_error');
  expect(error.errorCode).toBe('enforced_spend_limit_reached');
  expect(error.apiMessage).toMatch(
    /^This request would exceed your organization's spend limit: this API key has used [\d,]+ tokens of its limit of [\d,]+\. Retrying will not help; the spend limit must be raised/,
  );
  expect(error.headers?.get('retry-after')).toBeNull();
  expect(error.headers?.get('retry-after-ms')).toBeNull();
  expect(error.headers?.get('x-should-retry')).toBeNull();
}

describe('script errors: errorCode and shouldRetry', () => {
  it('sends errorCode as error.details.error_code, which picks the SDK error class', async () => {
    const client = clientOf(await serve());
    const spend = await apiError(
      client.messages.create(
        params([{ error: { status: 429, errorCode: 'enforced_spend_limit_reached' } }]),
      ),
    );
    expect(spend).toBeInstanceOf(Anthropic.EnforcedSpendLimitReachedError);
    expect(spend.errorCode).toBe('enforced_spend_limit_reached');
    expect(spend.details).toEqual({ error_code: 'enforced_spend_limit_reached' });
    const contract = await apiError(
      client.messages.create(
        params([{ error: { status: 429, errorCode: 'contract_spend_limit_reached' } }]),
      ),
    );
    expect(contract).toBeInstanceOf(Anthropic.ContractSpendLimitReachedError);
    const custom = await apiError(
      client.messages.create(params([{ error: { status: 503, errorCode: 'made_up_2' } }])),
    );
    expect(custom.status).toBe(503);
    expect(custom.errorCode).toBe('made_up_2');
  });

  it('gives a spend-limit 429 no retry-after of its own, and any other 429 one', async () => {
    const client = clientOf(await serve());
    for (const errorCode of ['enforced_spend_limit_reached', 'contract_spend_limit_reached']) {
      const error = await apiError(
        client.messages.create(params([{ error: { status: 429, errorCode } }])),
      );
      expect(error.headers?.get('retry-after')).toBeNull();
      expect(error.headers?.get('retry-after-ms')).toBeNull();
    }
    // One it sets is still sent, and a 429 with another code gets the default.
    const told = await apiError(
      client.messages.create(
        params([
          { error: { status: 429, errorCode: 'enforced_spend_limit_reached', retryAfter: 7 } },
        ]),
      ),
    );
    expect(told.headers?.get('retry-after')).toBe('7');
    const ramp = await apiError(
      client.messages.create(
        params([{ error: { status: 429, errorCode: 'ramp_limit_exceeded' } }]),
      ),
    );
    expect(ramp.headers?.get('retry-after')).toBe('1');
  });

  it('sends shouldRetry: false as x-should-retry, and the SDK does not retry a 500', async () => {
    const client = clientOf(await serve(), 'key-a', 2);
    const error = await apiError(
      client.messages.create(params([{ error: { status: 500, shouldRetry: false } }])),
    );
    expect(error.status).toBe(500);
    expect(error.headers?.get('x-should-retry')).toBe('false');
    expect(model?.stats.requests).toBe(1);
  });

  it('sends shouldRetry: true as x-should-retry, and the SDK retries a 400', async () => {
    const client = clientOf(await serve(), 'key-a', 2);
    const step: ScriptStep = {
      text: 'Recovered.',
      error: { status: 400, shouldRetry: true, retryAfterMs: 1 },
      faultAttempts: 1,
    };
    const message = await client.messages.create(params([step]));
    expect(message.content).toEqual([{ type: 'text', text: 'Recovered.' }]);
    expect(model?.stats).toMatchObject({ requests: 2, rejected400: 1, completed: 1 });
    // Without the header the SDK gives up on a 400 at once.
    const plain = await apiError(
      client.messages.create(params([{ error: { status: 400, retryAfterMs: 1 } }])),
    );
    expect(plain.headers?.get('x-should-retry')).toBeNull();
    expect(model?.stats.requests).toBe(3);
  });

  it('carries details in a mid-stream error event, and both fields in its JSON form', async () => {
    const client = clientOf(await serve());
    const steps: ScriptStep[] = [
      {
        text: 'partial answer',
        error: {
          status: 429,
          errorCode: 'enforced_spend_limit_reached',
          shouldRetry: false,
          midStream: true,
        },
      },
    ];
    const stream = client.messages.stream({ ...params(steps), stream: true });
    const streamed = await apiError(stream.finalMessage());
    // An SSE error has no status: the SDK makes a plain APIError, with the code from details.
    expect(streamed.status).toBeUndefined();
    expect(streamed.errorCode).toBe('enforced_spend_limit_reached');
    const json = await apiError(client.messages.create(params(steps)));
    expect(json).toBeInstanceOf(Anthropic.EnforcedSpendLimitReachedError);
    expect(json.headers?.get('x-should-retry')).toBe('false');
    expect(json.headers?.get('retry-after')).toBeNull();
  });

  it('refuses bad values of the new fields, saying what was expected and what arrived', () => {
    const bad = (error: Record<string, unknown>): string => {
      const parsed = parseScript(JSON.stringify({ steps: [{ error: { status: 429, ...error } }] }));
      if (parsed.ok) throw new Error('Expected a refusal, got a script');
      return parsed.error;
    };
    expect(bad({ errorCode: '' })).toBe(
      'Invalid cohort-script: expected `steps.0.error.errorCode` to be a non-empty string of lowercase letters, digits and _, got `""` (string)',
    );
    expect(bad({ errorCode: 'Spend-Limit' })).toMatch(
      /`steps\.0\.error\.errorCode`.*got `"Spend-Limit"`/,
    );
    expect(bad({ errorCode: 7 })).toMatch(/`steps\.0\.error\.errorCode`.*got `7` \(number\)/);
    expect(bad({ shouldRetry: 'no' })).toBe(
      'Invalid cohort-script: expected `steps.0.error.shouldRetry` to be a boolean, got `"no"` (string)',
    );
    expect(bad({ errorCodes: 'x' })).toMatch(
      /only the keys .*errorCode, shouldRetry.*got `errorCodes`/,
    );
  });

  it('answers a request whose script has a bad errorCode with a 400 that names it', async () => {
    const client = clientOf(await serve());
    const body = params();
    body.system = scriptBlock([{ error: { status: 429, errorCode: 'no spaces' } }]);
    const error = await apiError(client.messages.create(body));
    expect(error.status).toBe(400);
    expect(error.apiMessage).toContain('`steps.0.error.errorCode`');
  });
});

describe('the spend cap', () => {
  /** The usage (input + output tokens) one `params()` request reports, from an uncapped server. */
  async function usageOfOneRequest(): Promise<number> {
    const probe = await startScriptedModel();
    try {
      const { usage } = await clientOf(probe.url).messages.create(params());
      return usage.input_tokens + usage.output_tokens;
    } finally {
      await probe.close();
    }
  }

  it('answers requests until the total reaches the cap, then the spend-limit 429', async () => {
    const each = await usageOfOneRequest();
    const client = clientOf(await serve({ spendCapTokens: 3 * each }));
    for (let index = 0; index < 3; index++) {
      const message = await client.messages.create(params());
      expect(message.content).toEqual([{ type: 'text', text: 'ok' }]);
    }
    const error = await apiError(client.messages.create(params()));
    expectSpendLimit(error);
    expect(error.apiMessage).toContain(`has used ${3 * each} tokens of its limit of ${3 * each}.`);
    expect(error.apiMessage).not.toContain('key-a');
    // A stream is refused the same way, before any event.
    expectSpendLimit(
      await apiError(client.messages.stream({ ...params(), stream: true }).finalMessage()),
    );
    expect(model?.stats).toMatchObject({ completed: 3, rateLimited429: 2 });
  });

  it('answers the request that reaches the cap, one token short of it', async () => {
    const each = await usageOfOneRequest();
    const client = clientOf(await serve({ spendCapTokens: 2 * each + 1 }));
    await client.messages.create(params());
    await client.messages.create(params());
    // 2 × each used, one token under the cap: admitted, and it carries the total past it.
    await client.messages.create(params());
    expectSpendLimit(await apiError(client.messages.create(params())));
  });

  it('keeps each API key to its own total', async () => {
    const url = await serve({ spendCapTokens: 1 });
    const alice = clientOf(url, 'key-alice');
    const bob = clientOf(url, 'key-bob');
    await alice.messages.create(params());
    expectSpendLimit(await apiError(alice.messages.create(params())));
    await bob.messages.create(params());
    expectSpendLimit(await apiError(bob.messages.create(params())));
  });

  it('lets a request in flight when the cap is crossed finish normally', async () => {
    const client = clientOf(await serve({ spendCapTokens: 1 }));
    // The first request is admitted at 0 tokens and then stalls mid-stream for a while.
    const slow = client.messages.stream({
      ...params([{ text: 'a long and slow answer', stall: { ms: 300 } }]),
      stream: true,
    });
    await new Promise<void>((resolve) => slow.once('text', () => resolve()));
    expectSpendLimit(await apiError(client.messages.create(params())));
    const message = await slow.finalMessage();
    expect(message.content).toEqual([{ type: 'text', text: 'a long and slow answer' }]);
    expect(message.stop_reason).toBe('end_turn');
  });

  it('bills only messages: a scripted error or a 529 costs nothing', async () => {
    const client = clientOf(await serve({ spendCapTokens: 1 }));
    await apiError(client.messages.create(params([{ error: { status: 500 } }])));
    const overloaded = await apiError(
      client.messages.create(params(), { headers: { 'x-cohort-overload': '1' } }),
    );
    expect(overloaded.status).toBe(529);
    await client.messages.create(params());
    expectSpendLimit(await apiError(client.messages.create(params())));
  });

  it('leaves count_tokens and the models endpoints alone', async () => {
    const client = clientOf(await serve({ spendCapTokens: 1 }));
    await client.messages.create(params());
    expectSpendLimit(await apiError(client.messages.create(params())));
    const counted = await client.messages.countTokens({
      model: 'scripted',
      system: scriptBlock([{ text: 'ok' }]),
      messages: [{ role: 'user', content: 'Say it.' }],
    });
    expect(counted.input_tokens).toBeGreaterThan(0);
    const models = await client.models.list();
    expect(models.data.length).toBeGreaterThan(0);
    expect((await client.models.retrieve('claude-haiku-4-5')).id).toBe('claude-haiku-4-5-20251001');
  });

  it('takes nothing from the rate-limit buckets and sends their headers, no retry-after', async () => {
    // Two requests a minute: the first leaves one; spend refusals must not take it.
    const client = clientOf(await serve({ spendCapTokens: 1, rpm: 2 }));
    await client.messages.create(params());
    for (let index = 0; index < 3; index++) {
      const error = await apiError(client.messages.create(params()));
      expectSpendLimit(error);
      expect(error.headers?.get('anthropic-ratelimit-requests-remaining')).toBe('1');
    }
  });

  it('has no cap by default and refuses a bad spendCapTokens', () => {
    expect(resolveOptions().spendCapTokens).toBe(0);
    expect(resolveOptions({ spendCapTokens: 5000 }).spendCapTokens).toBe(5000);
    expect(() => resolveOptions({ spendCapTokens: -1 })).toThrow(
      'Expected `spendCapTokens` to be an integer from 0 and up, got `-1` (number)',
    );
    expect(() => resolveOptions({ spendCapTokens: 2.5 })).toThrow(/`spendCapTokens`.*`2\.5`/);
    expect(() => resolveOptions({ spendCapTokens: '9' as unknown as number })).toThrow(
      'Expected `spendCapTokens` to be an integer from 0 and up, got `"9"` (string)',
    );
  });

  it('has no cap at 0: many requests are answered', async () => {
    const client = clientOf(await serve({ spendCapTokens: 0 }));
    for (let index = 0; index < 5; index++) await client.messages.create(params());
    expect(model?.stats.completed).toBe(5);
  });
});

describe('cohort mock --spend-cap-tokens', () => {
  it('parses the flag and refuses a bad value', () => {
    expect(parseMockFlags(['--spend-cap-tokens', '1200'])).toEqual({ spendCapTokens: 1200 });
    expect(() => parseMockFlags(['--spend-cap-tokens', 'lots'])).toThrow(
      'Expected --spend-cap-tokens to be an integer from 0 and up, got `lots`',
    );
  });

  it('caps spend in a real process', async () => {
    const server = runCli(['mock', '--port', '0', '--spend-cap-tokens', '1']);
    try {
      await server.waitFor(/listening on (http:\/\/\S+)/, 'stdout');
      const url = /listening on (http:\/\/\S+)/.exec(server.stdout())?.[1] ?? '';
      const client = clientOf(url);
      await client.messages.create(params());
      expectSpendLimit(await apiError(client.messages.create(params())));
    } finally {
      server.child.kill('SIGTERM');
      await server.exit;
    }
  });

  it('exits 2 on a bad value, naming the flag, and lists it in the help', async () => {
    const bad = runCli(['mock', '--spend-cap-tokens=-3']);
    expect((await bad.exit).code).toBe(2);
    expect(bad.stderr()).toContain(
      'Expected --spend-cap-tokens to be an integer from 0 and up, got `-3`',
    );
    const help = runCli(['mock', '--help']);
    expect((await help.exit).code).toBe(0);
    expect(help.stdout()).toMatch(/--spend-cap-tokens N\n\s+spend limit per API key/);
  });
});
