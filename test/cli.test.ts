import { readdirSync } from 'node:fs';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../src/main/session.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { makeWorkspace, readJournal, scripted, tempDir } from './helpers.js';

let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await model.close();
});

type Line =
  | SessionEvent
  | {
      type: 'final';
      outcome: string;
      text: string;
      agents: { total: number; byOutcome: Record<string, number> };
    };

function jsonl(text: string): Line[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Line);
}

describe('cohort agent', () => {
  it('--json prints the AgentResult alone on stdout, with DESIGN field names', async () => {
    const run = runCli([
      'agent',
      scripted([{ reply: 'the answer' }]),
      '--json',
      '--title',
      'one',
      '--base-url',
      model.url,
    ]);
    expect((await run.exit).code).toBe(0);
    const result = JSON.parse(run.stdout());
    expect(Object.keys(result).sort()).toEqual(
      [
        'elapsedMs',
        'generation',
        'id',
        'logDir',
        'outcome',
        'text',
        'title',
        'truncated',
        'usage',
      ].sort(),
    );
    expect(result).toMatchObject({
      title: 'one',
      outcome: 'complete',
      text: 'the answer',
      truncated: false,
      generation: 0,
    });
    // The default model (claude-sonnet-5) is priced by the built-in table's `claude-sonnet`.
    expect(Object.keys(result.usage).sort()).toEqual([
      'cacheReadTokens',
      'cacheWriteTokens',
      'costUsd',
      'inputTokens',
      'outputTokens',
      'providerCalls',
      'steps',
    ]);
    const { inputTokens, outputTokens, costUsd } = result.usage;
    expect(costUsd).toBeCloseTo((inputTokens * 3 + outputTokens * 15) / 1e6, 12);
  });

  it('without a provider in the environment it starts the scripted model and says so on stderr', async () => {
    const root = tempDir();
    const run = runCli(['agent', 'Say something.', '--log-dir', root]);
    expect((await run.exit).code).toBe(0);
    const [first, ...rest] = run.stderr().split('\n');
    expect(first).toMatch(
      /^cohort: no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL set; using the built-in scripted model at http:\/\/127\.0\.0\.1:\d+$/,
    );
    // Then where the run's journal is: its run folder under the root, and how to read it.
    const [folder] = readdirSync(root);
    expect(rest).toEqual([
      `cohort: journal in ${path.join(root, folder!)} (cohort logs show ID --run ${folder} --log-dir ${root})`,
      '',
    ]);
    expect(run.stdout()).toMatch(/· complete/);
  });

  it('rejects bad options with what was expected and what arrived, exit 2', async () => {
    const run = runCli(['agent', 'x', '--max-steps', 'lots']);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain(
      'Expected `--max-steps` to be a whole number from 1 to 10000, got `lots`',
    );
    const unknown = runCli(['frobnicate']);
    expect((await unknown.exit).code).toBe(2);
    expect(unknown.stderr()).toMatch(/Expected a command \(.*\), got `frobnicate`/);
    const duration = runCli(['run', 'x', '--ceiling', 'soon']);
    expect((await duration.exit).code).toBe(2);
    expect(duration.stderr()).toContain(
      'Expected `--ceiling` to be a duration like 500ms, 2s, 5m, 1h',
    );
  });
});

describe('cohort run', () => {
  it('--json: one event per line, async results delivered by autoWake, a final line', async () => {
    const child = (title: string) => ({
      name: 'agent',
      input: { title, mode: 'async', prompt: scripted([{ reply: `${title} says hi` }]) },
    });
    const prompt = scripted([
      { calls: [child('a'), child('b')] },
      { text: 'started' },
      { text: 'all in' },
      { text: 'really all in' },
    ]);
    const run = runCli(['run', prompt, '--json', '--base-url', model.url]);
    expect((await run.exit).code).toBe(0);
    const lines = jsonl(run.stdout());
    const final = lines.at(-1)!;
    expect(final).toMatchObject({
      type: 'final',
      outcome: 'ready',
      agents: { total: 2, byOutcome: { complete: 2 } },
    });
    const delivered = lines
      .filter(
        (line): line is Extract<SessionEvent, { type: 'turn-start' }> => line.type === 'turn-start',
      )
      .reduce((sum, line) => sum + line.delivered, 0);
    expect(delivered).toBe(2);
    const settles = lines.filter((line) => line.type === 'agent-settle');
    expect(settles).toHaveLength(2);
    expect(
      lines
        .filter((line) => line.type === 'agent-start')
        .map((line) => (line as { mode: string }).mode),
    ).toEqual(['async', 'async']);
  });

  it('first Ctrl-C cancels the foreground turn and its sync child; async agents go on and are delivered', async () => {
    const prompt = scripted([
      {
        calls: [
          {
            name: 'agent',
            input: {
              title: 'bg',
              mode: 'async',
              prompt: scripted([{ delayMs: 300, reply: 'background done' }]),
            },
          },
          {
            name: 'agent',
            input: { title: 'fg', prompt: scripted([{ delayMs: 60_000, reply: 'never' }]) },
          },
        ],
      },
      { text: 'after the interrupt' },
    ]);
    const run = runCli(['run', prompt, '--json', '--base-url', model.url]);
    // The sync child has made its request: the foreground turn is waiting on it.
    await run.waitFor(/"type":"step-start","agentId":"ag_[a-z2-7]{12}"/, 'stdout');
    run.child.kill('SIGINT');
    const exit = await run.exit;
    expect(exit.code).toBe(0);
    expect(run.stderr()).toMatch(/cancelled the foreground turn/);
    const lines = jsonl(run.stdout());
    const settles = lines.flatMap((line) => (line.type === 'agent-settle' ? [line.result] : []));
    expect(settles.find((result) => result.title === 'fg')).toMatchObject({
      outcome: 'cancelled',
      reason: 'parent',
    });
    expect(settles.find((result) => result.title === 'bg')).toMatchObject({
      outcome: 'complete',
      text: 'background done',
    });
    expect(lines.at(-1)).toMatchObject({
      type: 'final',
      outcome: 'ready',
      text: 'after the interrupt',
    });
  });

  it('a second Ctrl-C cancels everything and still prints every settled result', async () => {
    const slow = (title: string) => ({
      name: 'agent',
      input: { title, mode: 'async', prompt: scripted([{ delayMs: 60_000, reply: 'never' }]) },
    });
    const prompt = scripted([{ calls: [slow('s1'), slow('s2')] }, { text: 'waiting' }]);
    const run = runCli(['run', prompt, '--json', '--base-url', model.url]);
    await run.waitFor(/"type":"turn-end"/, 'stdout');
    run.child.kill('SIGINT');
    await run.waitFor(/no foreground turn/);
    run.child.kill('SIGINT');
    await run.exit;
    const lines = jsonl(run.stdout());
    const settles = lines.flatMap((line) => (line.type === 'agent-settle' ? [line.result] : []));
    expect(
      settles.map((result) => `${result.title}:${result.outcome}:${result.reason}`).sort(),
    ).toEqual(['s1:cancelled:shutdown', 's2:cancelled:shutdown']);
    expect(lines.at(-1)).toMatchObject({ type: 'final', agents: { total: 2 } });
  });
});

describe('cohort mock', () => {
  it('serves the official SDK, streaming and not, until it is stopped', async () => {
    const server = runCli(['mock', '--port', '0', '--chunk-chars', '4']);
    await server.waitFor(/listening on (http:\/\/\S+)/, 'stdout');
    const url = /listening on (http:\/\/\S+)/.exec(server.stdout())![1]!;
    const client = new Anthropic({ apiKey: 'unused', baseURL: url, maxRetries: 0 });
    const prompt = scripted([{ text: 'hello from the mock process' }]);
    const plain = await client.messages.create({
      model: 'cohort-scripted',
      max_tokens: 100,
      messages: [{ role: 'user', content: prompt }],
    });
    expect(plain.content).toEqual([{ type: 'text', text: 'hello from the mock process' }]);
    const stream = client.messages.stream({
      model: 'cohort-scripted',
      max_tokens: 100,
      messages: [{ role: 'user', content: prompt }],
    });
    const deltas: string[] = [];
    stream.on('text', (text) => deltas.push(text));
    const final = await stream.finalMessage();
    expect(deltas.length).toBeGreaterThan(3);
    expect(final.content).toEqual([{ type: 'text', text: 'hello from the mock process' }]);
    server.child.kill('SIGTERM');
    expect((await server.exit).code).toBe(0);
  });

  it('refuses a bad flag with exit code 2', async () => {
    const bad = runCli(['mock', '--tps', 'fast']);
    expect((await bad.exit).code).toBe(2);
    expect(bad.stderr()).toMatch(/--tps/);
  });
});

describe('cohort demo', () => {
  it('runs to completion offline: one async child per file, a composed report', async () => {
    const workspace = makeWorkspace();
    const run = runCli(['demo', workspace, '--log-dir', tempDir()]);
    const exit = await run.exit;
    expect(exit.code).toBe(0);
    const out = run.stdout();
    expect(out).toMatch(/surveying/);
    expect(out).toMatch(/async agent started: alpha\.ts/);
    expect(out).toMatch(/async agent started: beta\.md/);
    expect(out).toMatch(/# Report/);
    expect(out).toMatch(/done: root ready; 2 agent\(s\): 2 complete/);
    // The run's journal holds each child's result, and the root session's.
    const logs = /logs: (.*)\n/.exec(out)![1]!.trim();
    const journal = readJournal(logs);
    const results = [...journal.values()].map((agent) => agent.result);
    expect(results.map((result) => result?.outcome)).toEqual(['complete', 'complete', 'complete']);
    expect(journal.get('root')?.result?.text).toMatch(/# Report/);
  });
});
