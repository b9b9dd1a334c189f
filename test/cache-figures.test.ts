import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentResult } from '../src/shared/result.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { type CachingProxy, cachingProxy } from './caching-proxy.js';
import { type CliRun, runCli, writeTasks } from './cli-helpers.js';
import { tempDir } from './helpers.js';
import type { OtlpLine } from './recording-proxy.js';

// The prompt cache's figures where a user reads usage: the batch summary (stderr and --json),
// the result lines, `cohort agent`, `cohort logs show` and the trace file. Real cohort processes
// against the scripted model behind `cachingProxy`, which stands in for a server with a prompt
// cache (the scripted model reports none): the first request writes a prefix, the rest read it.

/** The prefix the proxy says every request wrote or read; below any request's whole input. */
const PREFIX = 100;
/** The default model (`claude-sonnet-5`) at the built-in `claude-sonnet` price, $ per token. */
const INPUT_USD = 3 / 1e6;

let model: ScriptedModel;
const proxies: CachingProxy[] = [];

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await Promise.all(proxies.map((proxy) => proxy.close()));
  await model.close();
});

async function caching(prefixTokens = PREFIX): Promise<CachingProxy> {
  const proxy = await cachingProxy(model.url, { prefixTokens });
  proxies.push(proxy);
  return proxy;
}

async function finished(run: CliRun): Promise<{ code: number | null; out: string; err: string }> {
  const { code } = await run.exit;
  return { code, out: run.stdout(), err: run.stderr() };
}

type ResultLine = AgentResult & { taskId: string };

function jsonLines<T>(file: string): T[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}

function sum(lines: ResultLine[], pick: (usage: AgentResult['usage']) => number | undefined) {
  return lines.reduce((total, line) => total + (pick(line.usage) ?? 0), 0);
}

/** A span line's attributes as a plain object. */
function attributesOf(line: OtlpLine): Record<string, unknown> {
  return Object.fromEntries(
    line.attributes.map(({ key, value }) => [key, Object.values(value)[0]]),
  );
}

/** `cohort batch` of `tasks` tasks through `url`, with a JSON summary and a trace file. */
async function batchThrough(url: string, tasks: number) {
  const dir = tempDir();
  const out = path.join(dir, 'results.jsonl');
  const traceFile = path.join(dir, 'trace.jsonl');
  const args = ['batch', writeTasks(tasks), '--out', out, '--base-url', url, '--json'];
  args.push('--trace-file', traceFile, '--log-dir', path.join(dir, 'logs'));
  return { dir, out, traceFile, run: await finished(runCli(args)) };
}

describe('cache figures against a caching server', () => {
  it('cohort batch: result lines carry the cache counts; the summary adds them up with the hit rate and what caching saved', async () => {
    const proxy = await caching();
    const { dir, out, traceFile, run } = await batchThrough(proxy.url, 6);
    expect(run.code, run.err).toBe(0);

    // Every result line carries what its requests read and wrote, as the server reported it.
    const lines = jsonLines<ResultLine>(out);
    expect(lines).toHaveLength(6);
    for (const line of lines) {
      expect(line.usage.cacheReadTokens + line.usage.cacheWriteTokens).toBe(
        PREFIX * line.usage.providerCalls,
      );
      expect(line.usage.cacheSavedUsd).toEqual(expect.any(Number));
    }
    const input = sum(lines, (usage) => usage.inputTokens);
    const read = sum(lines, (usage) => usage.cacheReadTokens);
    const write = sum(lines, (usage) => usage.cacheWriteTokens);
    const output = sum(lines, (usage) => usage.outputTokens);
    const steps = sum(lines, (usage) => usage.steps);
    const cost = sum(lines, (usage) => usage.costUsd);
    expect({ input, read, write }).toEqual({
      input: proxy.reported.inputTokens,
      read: proxy.reported.cacheReadTokens,
      write: proxy.reported.cacheWriteTokens,
    });
    expect(write).toBe(PREFIX);
    expect(read).toBe(PREFIX * (proxy.reported.responses - 1));
    // A read costs a tenth of the input price, a write 1.25 times it.
    const saved = read * INPUT_USD * 0.9 - write * INPUT_USD * 0.25;
    expect(sum(lines, (usage) => usage.cacheSavedUsd)).toBeCloseTo(saved, 12);
    const hit = (100 * read) / (input + read + write);

    const summary = JSON.parse(run.out.trim());
    expect(summary.spent).toMatchObject({
      inputTokens: input,
      cacheReadTokens: read,
      cacheWriteTokens: write,
      outputTokens: output,
      priced: 6,
    });
    expect(summary.spent.cacheHitPercent).toBeCloseTo(hit, 2);
    expect(summary.spent.cacheSavedUsd).toBeCloseTo(saved, 12);

    const count = (tokens: number) => tokens.toLocaleString('en-US');
    expect(run.err).toContain(
      `cohort batch: spent ${count(input)} input (+${count(read)} cached, ${count(write)} written) + ${count(output)} output tokens, ${steps} steps, $${cost.toFixed(4)}; cache hit ${hit.toFixed(1)}%, cache saved $${saved.toFixed(4)}\n`,
    );

    // Each chat span says what its attempt read and wrote, and its input counts them in (the
    // GenAI conventions' `gen_ai.usage.input_tokens` includes cached input); each agent span
    // carries its agent's totals.
    const spans = jsonLines<OtlpLine>(traceFile);
    const chats = spans.filter((span) => span.name.startsWith('chat ')).map(attributesOf);
    expect(chats).toHaveLength(proxy.reported.responses);
    const chatSum = (key: string) =>
      chats.reduce((total, chat) => total + ((chat[key] as number | undefined) ?? 0), 0);
    expect(chatSum('gen_ai.usage.cache_read.input_tokens')).toBe(read);
    expect(chatSum('gen_ai.usage.cache_creation.input_tokens')).toBe(write);
    expect(chatSum('gen_ai.usage.input_tokens')).toBe(input + read + write);
    // Only the one request that wrote has the write attribute: a zero is not set.
    expect(chats.filter((chat) => 'gen_ai.usage.cache_creation.input_tokens' in chat)).toHaveLength(
      1,
    );
    const agents = spans.filter((span) => span.name.startsWith('invoke_agent '));
    expect(agents).toHaveLength(6);
    for (const span of agents) {
      const attributes = attributesOf(span);
      const line = lines.find((result) => result.id === attributes['gen_ai.agent.id'])!;
      const usage = line.usage;
      expect(attributes['gen_ai.usage.input_tokens']).toBe(
        usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens,
      );
      expect(attributes['gen_ai.usage.cache_read.input_tokens']).toBe(
        usage.cacheReadTokens || undefined,
      );
      expect(attributes['gen_ai.usage.cache_creation.input_tokens']).toBe(
        usage.cacheWriteTokens || undefined,
      );
      expect(attributes['cohort.usage.cache_saved_usd']).toBeCloseTo(usage.cacheSavedUsd!, 12);
    }

    // `cohort logs show` of the task that wrote the prefix and never read it: its cache cost
    // more than it saved.
    const writer = lines.find((line) => line.usage.cacheReadTokens === 0)!;
    const shown = await finished(
      runCli(['logs', 'show', writer.id, '--log-dir', path.join(dir, 'logs')]),
    );
    expect(shown.code, shown.err).toBe(0);
    const usage = writer.usage;
    expect(usage.cacheSavedUsd).toBeLessThan(0);
    expect(shown.out).toContain(
      ` · ${usage.inputTokens} in (+${PREFIX} written) / ${usage.outputTokens} out tokens · $${usage.costUsd!.toFixed(4)} (cache cost $${(-usage.cacheSavedUsd!).toFixed(4)} more) · `,
    );
  });

  it('cohort agent prints what its requests read from the cache beside its input', async () => {
    const proxy = await caching();
    const run = await finished(
      runCli(['agent', 'Say something.', '--base-url', proxy.url, '--log-dir', tempDir()]),
    );
    expect(run.code, run.err).toBe(0);
    // One request: it wrote the prefix (nothing was cached before it).
    expect(proxy.reported.responses).toBe(1);
    expect(run.out).toMatch(
      new RegExp(
        ` · 1 provider calls · ${proxy.reported.inputTokens} in \\(\\+${PREFIX} written\\) / \\d+ out tokens\\n`,
      ),
    );
  });
});

describe('cache figures against a server that does not cache', () => {
  it('the batch summary, result lines and traces read as they did before caching', async () => {
    // The proxy reports every cache count as 0, as a server that ignores cache_control does.
    const proxy = await caching(0);
    const { out, traceFile, run } = await batchThrough(proxy.url, 2);
    expect(run.code, run.err).toBe(0);
    const lines = jsonLines<ResultLine>(out);
    for (const line of lines) {
      expect(line.usage).toMatchObject({ cacheReadTokens: 0, cacheWriteTokens: 0 });
      expect(line.usage).not.toHaveProperty('cacheSavedUsd');
    }
    const summary = JSON.parse(run.out.trim());
    expect(summary.spent).toMatchObject({ cacheReadTokens: 0, cacheWriteTokens: 0 });
    expect(summary.spent).not.toHaveProperty('cacheHitPercent');
    expect(summary.spent).not.toHaveProperty('cacheSavedUsd');
    expect(run.err).toMatch(
      /cohort batch: spent [\d,]+ input \+ [\d,]+ output tokens, \d+ steps, \$\d+\.\d{4}\n/,
    );
    expect(run.err).not.toContain('cache');
    const keys = jsonLines<OtlpLine>(traceFile).flatMap((span) =>
      span.attributes.map((attribute) => attribute.key),
    );
    expect(keys).toContain('gen_ai.usage.input_tokens');
    expect(keys.filter((key) => key.includes('cache'))).toEqual([]);
  });
});
