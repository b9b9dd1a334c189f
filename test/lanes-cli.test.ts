import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli, writeTasks } from './cli-helpers.js';
import { tempDir } from './helpers.js';

// `cohort batch --lane batches` as a user meets it: a real process against the scripted model's
// Message Batches API, and the flags' refusals.
let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0, batchLatencyMs: 10 });
});

afterAll(async () => {
  await model.close();
});

describe('cohort batch --lane', () => {
  it('runs every task through Message Batches and says what the lane saved', async () => {
    const tasks = writeTasks(6);
    const out = path.join(tempDir(), 'results.jsonl');
    const before = { ...model.stats };
    const run = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--base-url',
      model.url,
      '--lane',
      'batches',
      '--batch-window',
      '30s',
      '--batch-poll',
      '20ms',
      '--json',
    ]);
    expect((await run.exit).code).toBe(0);
    const lines = readResultLines(out) as { outcome: string; lane?: string }[];
    expect(lines.map((line) => [line.outcome, line.lane])).toEqual(
      Array(6).fill(['complete', 'batches']),
    );
    expect(model.stats.messages).toBe(before.messages);
    expect(model.stats.batchRequests - before.batchRequests).toBe(6);
    const summary = JSON.parse(run.stdout().trim());
    expect(summary).toMatchObject({ type: 'summary', lane: 'batches' });
    expect(summary.messageBatches).toBe(model.stats.batchesCreated - before.batchesCreated);
    expect(summary.spent.batchSavedUsd).toBeCloseTo(summary.spent.costUsd, 9);
    expect(run.stderr()).toMatch(
      /lane batches: \d+ Message Batch\(es\), \$[\d.]+ less than in real time/,
    );
  });

  it('refuses a lane it does not know, and a window or a poll of 0, with exit 2', async () => {
    const tasks = writeTasks(1);
    const out = path.join(tempDir(), 'results.jsonl');
    const cases: [string[], string][] = [
      [['--lane', 'overnight'], 'Expected `--lane` to be realtime or batches, got `overnight`'],
      [['--batch-window', '0'], 'Expected `--batch-window` to be a duration above 0'],
      [['--batch-poll', '0s'], 'Expected `--batch-poll` to be a duration above 0'],
      [['--batch-window', 'soon'], 'Expected `--batch-window` to be a duration like'],
    ];
    for (const [flags, message] of cases) {
      const run = runCli(['batch', tasks, '--out', out, '--base-url', model.url, ...flags]);
      expect((await run.exit).code).toBe(2);
      expect(run.stderr()).toContain(message);
    }
  });

  it('takes a lane from a task line and refuses a bad one there', async () => {
    const tasks = path.join(tempDir(), 'tasks.jsonl');
    writeFileSync(
      tasks,
      [
        JSON.stringify({ id: 'cheap', prompt: 'One.', lane: 'batches' }),
        JSON.stringify({ id: 'fast', prompt: 'Two.' }),
        JSON.stringify({ id: 'odd', prompt: 'Three.', lane: 'overnight' }),
      ].join('\n'),
    );
    const out = path.join(tempDir(), 'results.jsonl');
    const run = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--base-url',
      model.url,
      '--batch-poll',
      '20ms',
    ]);
    expect((await run.exit).code).toBe(1);
    expect(run.stderr()).toMatch(
      /tasks.jsonl:3: expected `lane` to be realtime or batches, got `overnight`/,
    );
    const lines = readResultLines(out) as { taskId: string; lane?: string }[];
    expect(Object.fromEntries(lines.map((line) => [line.taskId, line.lane ?? 'realtime']))).toEqual(
      {
        cheap: 'batches',
        fast: 'realtime',
      },
    );
  });
});
