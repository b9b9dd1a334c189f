/**
 * A batch stopped or killed mid-task goes on from the task's last committed step when the same
 * command runs again (issue 28): the real CLI in child processes, the scripted model over HTTP
 * counting the requests, and the journal the first run wrote.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { nextEvent, readJournal, scripted, TEST_TOOLS, tempDir } from './helpers.js';

let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await model.close();
});

/** One task of three steps: count, count (its request slow), reply. */
function setUp(): { tasks: string; out: string; counter: string; args: string[] } {
  const dir = tempDir();
  const counter = path.join(dir, 'count.txt');
  const prompt = scripted([
    { calls: [{ name: 'count', input: { file: counter } }] },
    { delayMs: 1500, calls: [{ name: 'count', input: { file: counter } }] },
    { reply: 'all three steps done' },
  ]);
  const tasks = path.join(dir, 'tasks.jsonl');
  writeFileSync(tasks, `${JSON.stringify({ id: 'long', prompt })}\n`);
  const out = path.join(dir, 'results.jsonl');
  const args = ['batch', tasks, '--out', out, '--base-url', model.url, '--tools', TEST_TOOLS];
  return { tasks, out, counter, args };
}

/** The first run's journal holds the task's prompt and its first step: it is in its second. */
async function inSecondStep(out: string): Promise<void> {
  const secondRequest = nextEvent<{ turn: number }>(model, 'request', (event) => event.turn === 1);
  await secondRequest;
  await vi.waitFor(
    () => {
      const runDir = readFileSync(`${out}.journals`, 'utf8').trim().split('\n').at(-1)!;
      const [history] = readJournal(runDir).values();
      expect(history?.messages).toHaveLength(3);
    },
    { timeout: 10_000 },
  );
}

describe('a rerun of a batch goes on with a task from its last committed step', () => {
  it.each([
    ['SIGKILL', 'killed', 137],
    ['SIGINT', 'stopped with Ctrl-C', 130],
  ] as const)(
    '%s: the task %s mid-way pays for none of its finished steps again',
    async (signal, _what, code) => {
      const { out, counter, args } = setUp();
      const first = runCli(args);
      await inSecondStep(out);
      const before = model.stats.requests;
      first.child.kill(signal);
      const stopped = await first.exit;
      if (signal === 'SIGKILL') expect(stopped.signal).toBe('SIGKILL');
      else expect(stopped.code).toBe(code);
      // The first step's tool ran once, before the stop.
      expect(readFileSync(counter, 'utf8')).toBe('ran\n');

      const requestsAtRerun = model.stats.requests;
      const again = runCli(args);
      expect((await again.exit).code, again.stderr()).toBe(0);
      expect(again.stderr()).toMatch(/1 to run, 1 going on from where they stopped/);
      const [line] = readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((text) => JSON.parse(text));
      expect(line).toMatchObject({
        taskId: 'long',
        outcome: 'complete',
        text: 'all three steps done',
      });
      expect(line.usage.steps).toBe(3);
      // Only the second and third steps went to the model again, and the first step's tool did
      // not run again: the second's ran once in the rerun.
      expect(model.stats.requests - requestsAtRerun).toBe(2);
      expect(readFileSync(counter, 'utf8')).toBe('ran\nran\n');
      expect(before).toBeGreaterThan(0);
    },
  );

  it('a task whose earlier run finished is not taken from the journal: a finished line skips it', async () => {
    const { args } = setUp();
    const first = runCli(args);
    expect((await first.exit).code).toBe(0);
    const requests = model.stats.requests;
    const again = runCli(args);
    expect((await again.exit).code).toBe(0);
    expect(again.stderr()).toMatch(/1 already in .*0 to run/);
    expect(model.stats.requests).toBe(requests);
  });
});
