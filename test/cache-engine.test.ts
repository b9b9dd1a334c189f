/**
 * Prompt caching end to end: a real engine with real workers, both transports (undici and the
 * official SDK), the scripted model over HTTP with its cache on, off, and ignored by the server.
 * Siblings that share a system prompt, or a preamble, write it once between them (warm, then
 * release), read it back, and are billed for it at the cache's prices.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseTasks, taskAgentOptions } from '../src/cli/task-lines.js';
import type { EngineOptions } from '../src/main/engine.js';
import { costUsd, priceOf, uncachedCostUsd } from '../src/shared/prices.js';
import type { AgentResult } from '../src/shared/result.js';
import type { ScriptedModelOptions } from '../src/testing/index.js';
import { type Rig, scripted, startRig, tempDir } from './helpers.js';

/** About 6,000 tokens at the scripted model's four characters a token: far above 1,024. */
const SYSTEM = `You review code.\n${'Review every line with care. '.repeat(830)}`;
const PREFIX_TOKENS = Math.floor(SYSTEM.length / 4);
const SIBLINGS = 24;

/** A two-step agent: one tool call, then a reply. */
const twoSteps = (index: number) =>
  scripted(
    [{ calls: [{ name: 'echo', input: { value: `v${index}` } }] }, { reply: `done ${index}` }],
    `Sibling ${index}.`,
  );

const rigs: Rig[] = [];
afterAll(async () => {
  await Promise.all(rigs.map((rig) => rig.close()));
});

/** A fresh model (its cache empty) and an engine on one thread: the cache is the model's and main's affair. */
async function rig(options: EngineOptions = {}, model: ScriptedModelOptions = {}): Promise<Rig> {
  const started = await startRig({ threads: 1, ...options }, model);
  rigs.push(started);
  return started;
}

async function siblings(
  started: Rig,
  spawn: (index: number) => Parameters<Rig['engine']['run']>[0],
): Promise<AgentResult[]> {
  const results = await Promise.all(
    Array.from({ length: SIBLINGS }, (_, index) => started.engine.run(spawn(index))),
  );
  for (const result of results) expect(result.outcome, result.reason).toBe('complete');
  return results;
}

/** Agents that wrote the shared prefix: their writes hold it whole. */
const writers = (results: AgentResult[], tokens: number) =>
  results.filter((result) => result.usage.cacheWriteTokens >= tokens);

describe('siblings that share a system prompt', () => {
  for (const transport of ['undici', 'sdk'] as const) {
    it(`write it once and read it back (${transport})`, async () => {
      const started = await rig({ provider: { transport } });
      const results = await siblings(started, (index) => ({
        prompt: twoSteps(index),
        system: SYSTEM,
      }));
      // Warm, then release: one of them wrote the prefix, every other read it.
      expect(writers(results, PREFIX_TOKENS)).toHaveLength(1);
      const readers = results.filter((result) => result.usage.cacheReadTokens >= PREFIX_TOKENS);
      expect(readers.length).toBeGreaterThanOrEqual(SIBLINGS - 1);
      const price = priceOf('cohort-scripted');
      if (!price) throw new Error('Expected a price for cohort-scripted');
      let paid = 0;
      let uncached = 0;
      for (const result of results) {
        // The whole input is the three counts; costUsd prices each at its own rate.
        expect(result.usage.costUsd).toBeCloseTo(costUsd(result.usage, price), 9);
        paid += result.usage.costUsd ?? 0;
        uncached += uncachedCostUsd(result.usage, price);
      }
      expect(paid).toBeLessThan(uncached * 0.35);
    });
  }

  it('send no breakpoint with cache off, and are billed for everything', async () => {
    const started = await rig({ cache: 'off' });
    const results = await siblings(started, (index) => ({
      prompt: twoSteps(index),
      system: SYSTEM,
    }));
    for (const result of results) {
      expect(result.usage.cacheReadTokens).toBe(0);
      expect(result.usage.cacheWriteTokens).toBe(0);
      expect(result.usage.inputTokens).toBeGreaterThan(2 * PREFIX_TOKENS);
    }
  });

  it('a spawn may turn caching off for itself', async () => {
    const started = await rig();
    const result = await started.engine.run({ prompt: twoSteps(0), system: SYSTEM, cache: 'off' });
    expect(result.outcome).toBe('complete');
    expect(result.usage.cacheReadTokens + result.usage.cacheWriteTokens).toBe(0);
  });

  it('work as before against a server that ignores cache_control', async () => {
    const started = await rig({}, { cache: false });
    const results = await siblings(started, (index) => ({
      prompt: twoSteps(index),
      system: SYSTEM,
    }));
    for (const result of results) {
      expect(result.usage.cacheReadTokens + result.usage.cacheWriteTokens).toBe(0);
    }
    // The prefix gate learned that nothing is cached and holds no one back any more.
    expect(started.engine.governor?.prefixes.waiting).toBe(0);
  });

  it('read back their own history on the next step', async () => {
    const started = await rig();
    const result = await started.engine.run({ prompt: twoSteps(7), system: SYSTEM });
    // Step 2 reads the prefix and step 1's conversation, which step 1 wrote.
    expect(result.usage.cacheReadTokens).toBeGreaterThan(PREFIX_TOKENS);
    expect(result.usage.inputTokens).toBeLessThan(200);
  });
});

describe('siblings that share a preamble', () => {
  it('write the document once and ask their own questions', async () => {
    const document = `The design record.\n${'Every part is written down. '.repeat(600)}`;
    const started = await rig();
    const results = await siblings(started, (index) => ({
      prompt: twoSteps(index),
      preamble: document,
    }));
    const docTokens = Math.floor(document.length / 4);
    expect(writers(results, docTokens)).toHaveLength(1);
    expect(
      results.filter((result) => result.usage.cacheReadTokens >= docTokens).length,
    ).toBeGreaterThanOrEqual(SIBLINGS - 1);
    // The questions were their own: each sibling replied with its own index.
    expect(new Set(results.map((result) => result.text)).size).toBe(SIBLINGS);
  });
});

describe('cache settings from an agent file and a task line', () => {
  it("an agent file turns caching off for its agents, over the engine's auto", async () => {
    const agentsDir = tempDir('cohort-agents-');
    mkdirSync(agentsDir, { recursive: true });
    const file = [
      '---',
      'name: plain',
      'description: Caches nothing.',
      'cache: off',
      'cacheTtl: 1h',
      '---',
    ];
    writeFileSync(path.join(agentsDir, 'plain.md'), `${file.join('\n')}\n${SYSTEM}\n`);
    const started = await rig({ agentsDir });
    const plain = await started.engine.run({ prompt: twoSteps(1), agent: 'plain' });
    expect(plain.outcome).toBe('complete');
    expect(plain.usage.cacheReadTokens + plain.usage.cacheWriteTokens).toBe(0);
    // The spawn's own field wins over the file's.
    const cached = await started.engine.run({ prompt: twoSteps(2), agent: 'plain', cache: 'auto' });
    expect(cached.usage.cacheWriteTokens).toBeGreaterThan(PREFIX_TOKENS);
  });

  it('a task line sets cache, cacheTtl and preamble, and a bad value is a bad line', async () => {
    const parsed = parseTasks(
      [
        JSON.stringify({ id: 'a', prompt: twoSteps(3), preamble: SYSTEM, cacheTtl: '1h' }),
        JSON.stringify({ id: 'b', prompt: 'x', cache: 'sometimes' }),
        JSON.stringify({ id: 'c', prompt: 'x', cacheTtl: '2h' }),
      ].join('\n'),
    );
    expect(parsed.errors.map((error) => error.line)).toEqual([2, 3]);
    expect(parsed.errors[0]?.message).toContain('`cache`');
    expect(parsed.errors[0]?.message).toContain('auto or off');
    expect(parsed.errors[1]?.message).toContain('5m or 1h');
    const started = await rig();
    const task = parsed.tasks[0];
    if (!task) throw new Error('Expected task a to parse');
    const result = await started.engine.run(taskAgentOptions(task));
    expect(result.outcome).toBe('complete');
    // The preamble went before the prompt and was cached.
    expect(result.usage.cacheWriteTokens).toBeGreaterThan(PREFIX_TOKENS);
  });
});
