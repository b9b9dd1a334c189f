/**
 * Where the request builder puts prompt-cache breakpoints (src/shared/provider/cache.ts), and the
 * prices and governor accounting that go with them. The whole path, from the engine through the
 * official SDK to the scripted model's cache, is in cache-engine.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Governor } from '../src/shared/governor/governor.js';
import { checkPriceTable, costUsd, priceOf, uncachedCostUsd } from '../src/shared/prices.js';
import { planCache } from '../src/shared/provider/cache.js';
import { minimumCacheable } from '../src/shared/provider/cache-minimums.js';
import type { MessageParam, ProviderRequest, ToolParam } from '../src/shared/provider/types.js';
import { ask, never, permitOf, stateOf } from './governor-helpers.js';

/** A system prompt of about `tokens` tokens, at the client's four characters a token. */
const systemOf = (tokens: number, seed = 'a') => `${seed} `.repeat(tokens * 2);
const TOOL: ToolParam = {
  name: 'read_file',
  description: 'reads a file',
  input_schema: { type: 'object', properties: { path: { type: 'string' } } },
};

/** Every `cache_control` in the request as sent, as `where: ttl`. */
function breakpoints(request: ReturnType<typeof planCache>['parts']): string[] {
  const found: string[] = [];
  const look = (value: unknown, where: string) => {
    if (typeof value !== 'object' || value === null) return;
    const control = (value as { cache_control?: { ttl?: string } }).cache_control;
    if (control) found.push(`${where}: ${control.ttl ?? '5m'}`);
  };
  request.tools.forEach((tool, index) => {
    look(tool, `tools[${index}]`);
  });
  if (Array.isArray(request.system)) {
    request.system.forEach((block, index) => {
      look(block, `system[${index}]`);
    });
  }
  request.messages.forEach((message, index) => {
    if (Array.isArray(message.content)) {
      message.content.forEach((block, at) => {
        look(block, `messages[${index}][${at}]`);
      });
    }
  });
  return found;
}

function conversation(steps: number, prompt = 'question'): MessageParam[] {
  const messages: MessageParam[] = [{ role: 'user', content: prompt }];
  for (let step = 1; step < steps; step++) {
    messages.push({
      role: 'assistant',
      content: [{ type: 'tool_use', id: `t${step}`, name: 'read_file', input: { path: 'a' } }],
    });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: `t${step}`, content: 'x'.repeat(400) }],
    });
  }
  return messages;
}

describe('breakpoints', () => {
  it('mark the static prefix and the end of the conversation, and leave the transcript alone', () => {
    const messages = conversation(3);
    const before = JSON.stringify(messages);
    const request: ProviderRequest = { system: systemOf(5000), tools: [TOOL], messages };
    const plan = planCache(request, 'claude-sonnet-5', '5m');
    expect(breakpoints(plan.parts)).toEqual(['system[0]: 5m', 'messages[4][0]: 5m']);
    expect(JSON.stringify(messages)).toBe(before);
    // Not a first request: nothing to warm, and the history up to the last step's breakpoint
    // (the static prefix and the first three messages) is expected to be read back.
    expect(plan.shared).toBeUndefined();
    expect(plan.history).toBeGreaterThan(5000);
  });

  it('give the shared prefixes the one-hour lifetime and keep the moving one at five minutes', () => {
    const request: ProviderRequest = {
      system: systemOf(3000),
      tools: [TOOL],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: systemOf(2000, 'doc') },
            { type: 'text', text: 'what is it about?' },
          ],
        },
      ],
    };
    const plan = planCache(request, 'claude-sonnet-5', '1h');
    // One-hour entries come before five-minute ones, as the API requires; three of its four.
    expect(breakpoints(plan.parts)).toEqual([
      'system[0]: 1h',
      'messages[0][0]: 1h',
      'messages[0][1]: 5m',
    ]);
    expect(plan.shared?.ttlMs).toBe(3_600_000);
  });

  it('put the static breakpoint on the last tool when there is no system prompt', () => {
    const big = { ...TOOL, description: systemOf(2000) };
    const plan = planCache(
      { tools: [TOOL, big], messages: [{ role: 'user', content: 'q' }] },
      'claude-sonnet-5',
      '5m',
    );
    expect(breakpoints(plan.parts)).toEqual(['tools[1]: 5m', 'messages[0][0]: 5m']);
  });

  it('place none on a prefix below the model’s minimum', () => {
    const small = planCache(
      { system: 'be brief', tools: [TOOL], messages: conversation(2) },
      'claude-sonnet-5',
      '5m',
    );
    expect(breakpoints(small.parts)).toEqual([]);
    expect(small.parts.system).toBe('be brief');
    expect(small.history).toBe(0);
    // 3,000 tokens is above Sonnet's 1,024 and below Haiku 4.5's 4,096.
    const system = systemOf(3000);
    const messages: MessageParam[] = [{ role: 'user', content: 'q' }];
    expect(
      breakpoints(planCache({ system, tools: [], messages }, 'claude-sonnet-5', '5m').parts),
    ).toHaveLength(2);
    expect(
      breakpoints(planCache({ system, tools: [], messages }, 'claude-haiku-4-5', '5m').parts),
    ).toEqual([]);
    expect(minimumCacheable('claude-haiku-4-5-20251001')).toBe(4096);
    expect(minimumCacheable('claude-sonnet-4-6')).toBe(2048);
    expect(minimumCacheable('cohort-scripted')).toBe(1024);
  });

  it('name one shared prefix for siblings with different prompts, another for another system', () => {
    const system = systemOf(3000);
    const first = (prompt: string, over = system) =>
      planCache(
        { system: over, tools: [TOOL], messages: [{ role: 'user', content: prompt }] },
        'claude-sonnet-5',
        '5m',
      ).shared;
    const a = first('summarise a.ts');
    const b = first('summarise b.ts');
    expect(a?.key).toBeDefined();
    expect(a?.key).toBe(b?.key);
    expect(a?.tokens).toBeGreaterThan(3000);
    expect(first('summarise a.ts', systemOf(3000, 'z'))?.key).not.toBe(a?.key);
  });
});

describe('prices of cached tokens', () => {
  const sonnet = priceOf('claude-sonnet-5');
  it('are a tenth of the input price to read, 1.25x to write, 2x for an hour', () => {
    if (!sonnet) throw new Error('Expected a price for claude-sonnet-5');
    const usage = {
      inputTokens: 1_000_000,
      outputTokens: 0,
      cacheReadTokens: 1_000_000,
      cacheWriteTokens: 2_000_000,
      cacheWrite1hTokens: 1_000_000,
    };
    // $3 input + $0.30 read + $3.75 (5-minute write) + $6 (one-hour write).
    expect(costUsd(usage, sonnet)).toBeCloseTo(3 + 0.3 + 3.75 + 6, 9);
    expect(uncachedCostUsd(usage, sonnet)).toBeCloseTo(4 * 3, 9);
  });

  it('can be set in a price table, and a bad one is refused naming the key', () => {
    const table = checkPriceTable('--prices', {
      m: { inputPerMTok: 1, outputPerMTok: 2, cacheReadPerMTok: 0.5 },
    });
    const price = table?.m;
    if (!price) throw new Error('Expected the table to hold `m`');
    expect(costUsd({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 2e6 }, price)).toBe(1);
    expect(() =>
      checkPriceTable('--prices', {
        m: { inputPerMTok: 1, outputPerMTok: 2, cacheReadPerMTok: -1 },
      }),
    ).toThrow('Expected `--prices.m.cacheReadPerMTok` to be a finite number');
    expect(() =>
      checkPriceTable('--prices', { m: { inputPerMTok: 1, outputPerMTok: 2, cached: 1 } }),
    ).toThrow('got `cached`');
  });
});

describe('the governor and the prompt cache', () => {
  it('does not charge a request the history it should read back', async () => {
    const governor = new Governor({ itpm: 60_000 });
    const permit = permitOf(
      await governor.admit(ask({ inputTokens: 20_000, cache: { history: 19_000 } }), never()),
    );
    // A second's worth of burst (1,000) less the 1,000 uncached tokens it was charged.
    expect(stateOf(governor).inputTokens?.remaining).toBeLessThan(100);
    governor.settle(permit, {
      outcome: 'ok',
      usage: { inputTokens: 800, outputTokens: 5, cacheReadTokens: 19_000, cacheWriteTokens: 200 },
    });
    expect(governor.held).toBe(0);
  });

  it('counts cache writes against the input limit, and not cache reads', async () => {
    const governor = new Governor({ itpm: 600_000 });
    const one = permitOf(await governor.admit(ask({ inputTokens: 100 }), never()));
    const before = stateOf(governor).inputTokens?.remaining ?? 0;
    governor.settle(one, {
      outcome: 'ok',
      usage: {
        inputTokens: 100,
        outputTokens: 1,
        cacheReadTokens: 50_000,
        cacheWriteTokens: 5_000,
      },
    });
    const after = stateOf(governor).inputTokens?.remaining ?? 0;
    // Charged 100 at admission; the response said 100 + 5,000 written: 5,000 more comes off,
    // the 50,000 read does not (the bucket refills a little meanwhile).
    expect(before - after).toBeGreaterThan(4_900);
    expect(before - after).toBeLessThan(5_500);
  });
});
