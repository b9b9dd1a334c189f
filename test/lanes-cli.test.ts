import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { batchesInFlight } from '../src/cli/results/journals.js';
import { type ScriptedModel, type ScriptStep, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli, writeTasks } from './cli-helpers.js';
import { scripted, TEST_TOOLS, tempDir } from './helpers.js';

// `cohort batch --lane batches` as a user meets it: a real process against the scripted model's
// Message Batches API, and the flags' refusals.
let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0, batchLatencyMs: 10 });
});

/** `cohort batch TASKS --out OUT --base-url URL FLAGS…`: what every run of this file starts with. */
function batchArgs(tasks: string, out: string, flags: string[], url = model.url): string[] {
  return ['batch', tasks, '--out', out, '--base-url', url, ...flags];
}

afterAll(async () => {
  await model.close();
});

describe('cohort batch --lane', () => {
  it('runs every task through Message Batches and says what the lane saved', async () => {
    const tasks = writeTasks(6);
    const out = path.join(tempDir(), 'results.jsonl');
    const before = { ...model.stats };
    const run = runCli(
      batchArgs(tasks, out, [
        '--lane',
        'batches',
        '--batch-window',
        '30s',
        '--batch-poll',
        '20ms',
        '--json',
      ]),
    );
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
    const cases: [string[], string][] = [
      [
        ['--lane', 'overnight'],
        'Expected `--lane` to be realtime, batches or auto, got `overnight`',
      ],
      [['--batch-window', '0'], 'Expected `--batch-window` to be a duration above 0'],
      [['--batch-poll', '0s'], 'Expected `--batch-poll` to be a duration above 0'],
      [['--batch-window', 'soon'], 'Expected `--batch-window` to be a duration like'],
      [
        ['--lane', 'auto', '--deadline', '2020-01-01T00:00:00Z'],
        'Expected `--deadline` to be a time in the future',
      ],
      [['--deadline', 'tonight'], 'Expected `--deadline` to be a time in the future'],
      [['--batch-turnaround', '0'], 'Expected `--batch-turnaround` to be a duration above 0'],
    ];
    // Side by side, each with a results path of its own: each reads only its own process.
    const runs = cases.map(([flags, message]) => ({
      message,
      run: runCli(batchArgs(tasks, path.join(tempDir(), 'results.jsonl'), flags)),
    }));
    for (const { run, message } of runs) {
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
    const run = runCli(batchArgs(tasks, out, ['--batch-poll', '20ms']));
    expect((await run.exit).code).toBe(1);
    expect(run.stderr()).toMatch(
      /tasks.jsonl:3: expected `lane` to be realtime, batches or auto, got `overnight`/,
    );
    const lines = readResultLines(out) as { taskId: string; lane?: string }[];
    expect(Object.fromEntries(lines.map((line) => [line.taskId, line.lane ?? 'realtime']))).toEqual(
      {
        cheap: 'batches',
        fast: 'realtime',
      },
    );
  });

  it('runs the auto lane by each task deadline: far ones in batches, near ones in real time, a past one a bad line', async () => {
    const tasks = path.join(tempDir(), 'tasks.jsonl');
    const hour = 60 * 60 * 1000;
    writeFileSync(
      tasks,
      [
        JSON.stringify({ id: 'tonight', prompt: 'One.', deadline: Date.now() + 3 * hour }),
        // --deadline's 30 minutes: less than the hour a batch is taken to need.
        JSON.stringify({ id: 'soon', prompt: 'Two.' }),
        JSON.stringify({ id: 'late', prompt: 'Three.', deadline: '2020-01-01T00:00:00Z' }),
      ].join('\n'),
    );
    const out = path.join(tempDir(), 'results.jsonl');
    const before = { ...model.stats };
    const run = runCli(
      batchArgs(tasks, out, [
        '--lane',
        'auto',
        '--deadline',
        '30m',
        '--batch-window',
        '100ms',
        '--batch-poll',
        '20ms',
        '--json',
      ]),
    );
    expect((await run.exit).code).toBe(1);
    expect(run.stderr()).toMatch(
      /tasks.jsonl:3: expected `deadline` to be a time in the future .*got `2020-01-01T00:00:00Z`/,
    );
    const lines = readResultLines(out) as { taskId: string; outcome: string }[];
    expect(lines.map((line) => [line.taskId, line.outcome]).sort()).toEqual([
      ['soon', 'complete'],
      ['tonight', 'complete'],
    ]);
    expect(model.stats.messages - before.messages).toBe(1);
    expect(model.stats.batchRequests - before.batchRequests).toBe(1);
    const summary = JSON.parse(run.stdout().trim());
    expect(summary).toMatchObject({ lane: 'auto', messageBatches: 1, movedToRealtime: 1 });
    // Saved: the batched task's half; the real-time one saved nothing.
    const byTask = Object.fromEntries(
      (readResultLines(out) as unknown as { taskId: string; usage: { costUsd: number } }[]).map(
        (line) => [line.taskId, line.usage.costUsd],
      ),
    );
    expect(summary.spent.batchSavedUsd).toBeCloseTo(byTask.tonight!, 9);
    expect(run.stderr()).toMatch(
      /lane auto: 1 Message Batch\(es\), 1 step\(s\) sent in real time to meet a deadline, \$[\d.]+ less than in real time/,
    );
  });

  it('asks the model again on --retry-failed: a batch already read is never followed', async () => {
    const tasks = path.join(tempDir(), 'tasks.jsonl');
    // Its first step is answered, its second fails it: a rerun starts it over from its prompt.
    const schema = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] };
    writeFileSync(
      tasks,
      `${JSON.stringify({ id: 'odd', prompt: scripted([{ reply: 'not a number' }]), outputSchema: schema })}\n`,
    );
    const out = path.join(tempDir(), 'results.jsonl');
    const args = batchArgs(tasks, out, [
      '--tools',
      TEST_TOOLS,
      '--lane',
      'batches',
      '--batch-poll',
      '20ms',
    ]);
    const before = model.stats.batchRequests;
    expect((await runCli(args).exit).code).toBe(1);
    expect(readResultLines(out)[0]).toMatchObject({ outcome: 'failed' });
    const first = model.stats.batchRequests - before;
    expect(first).toBeGreaterThan(0);
    expect((await runCli([...args, '--retry-failed']).exit).code).toBe(1);
    // Each of its steps went into a batch again: none took the first run's answers.
    expect(model.stats.batchRequests - before).toBe(2 * first);
  });

  it('reads from earlier runs only the batches never read, and passes over a corrupt record', async () => {
    const out = path.join(tempDir(), 'results.jsonl');
    const runDir = tempDir();
    const batch = (b: string, c: unknown, url = 'http://127.0.0.1:9') =>
      JSON.stringify({ k: 'batch', b, at: 1, url, c, d: ['dA', 'dB'] });
    writeFileSync(
      path.join(runDir, 'journal-1-main.jsonl'),
      [
        batch('b-open', ['idA', 'idB']),
        batch('b-read', ['idC', 'idD']),
        JSON.stringify({ k: 'batch-read', b: 'b-read', at: 2, url: 'http://127.0.0.1:9' }),
        batch('b-corrupt', [1, 2]),
        JSON.stringify({ k: 'batch', b: 7, at: 1, url: 'x', c: ['idE'], d: ['dE'] }),
        '',
      ].join('\n'),
    );
    writeFileSync(`${out}.journals`, `${runDir}\n`);
    const found = await batchesInFlight(out);
    expect([...found]).toEqual([
      ['idA', { batchId: 'b-open', endpoint: 'http://127.0.0.1:9', digest: 'dA' }],
      ['idB', { batchId: 'b-open', endpoint: 'http://127.0.0.1:9', digest: 'dB' }],
    ]);
  });

  it('after a kill -9 mid-batch, a rerun follows the batch in flight: one line per task, no step sent twice', async () => {
    // Batches take ten minutes of the server's clock; after the kill its clock runs 10,000 times
    // faster, so the rerun's batches end in a blink while the first run's could not.
    let fastSince: number | undefined;
    const clock = () =>
      fastSince === undefined
        ? performance.now()
        : fastSince + (performance.now() - fastSince) * 10_000;
    const slow = await startScriptedModel({ port: 0, batchLatencyMs: 600_000, clock });
    try {
      const echo = (value: string): ScriptStep => ({ calls: [{ name: 'echo', input: { value } }] });
      const tasks = writeTasks(
        Array.from({ length: 8 }, (_, index) =>
          scripted(
            [echo(`a${index}`), echo(`b${index}`), { reply: `done ${index}` }],
            `Task ${index}.`,
          ),
        ),
      );
      const out = path.join(tempDir(), 'results.jsonl');
      const args = batchArgs(
        tasks,
        out,
        ['--tools', TEST_TOOLS, '--lane', 'batches', '--batch-poll', '20ms'],
        slow.url,
      );
      const first = runCli(args);
      // The batch is created and in the journal: the run is killed before it could end.
      await vi.waitFor(
        () => {
          const runDir = readFileSync(`${out}.journals`, 'utf8').trim().split('\n')[0]!;
          const journal = readdirSync(runDir)
            .filter((name) => name.startsWith('journal-'))
            .map((name) => readFileSync(path.join(runDir, name), 'utf8'))
            .join('');
          expect(journal).toContain('"k":"batch"');
        },
        { timeout: 20_000, interval: 20 },
      );
      first.child.kill('SIGKILL');
      expect((await first.exit).signal).toBe('SIGKILL');
      expect(slow.stats.batchesCreated).toBe(1);

      fastSince = performance.now();
      const rerun = runCli(args);
      expect((await rerun.exit).code).toBe(0);
      const lines = readResultLines(out);
      expect(lines.map((line) => line.taskId).sort()).toEqual(
        Array.from({ length: 8 }, (_, index) => `t${index}`),
      );
      expect(lines.every((line) => line.outcome === 'complete')).toBe(true);
      expect(slow.stats.messages).toBe(0);

      // Every step went into exactly one batch: 8 tasks × 3 steps, no custom id twice.
      const client = new Anthropic({ authToken: 'cohort-no-key', apiKey: null, baseURL: slow.url });
      const sent = new Map<string, number>();
      for await (const batch of client.messages.batches.list()) {
        for await (const line of await client.messages.batches.results(batch.id)) {
          sent.set(line.custom_id, (sent.get(line.custom_id) ?? 0) + 1);
        }
      }
      expect(sent.size).toBe(24);
      expect([...sent.values()].every((count) => count === 1)).toBe(true);
      expect(slow.stats.batchRequests).toBe(24);
    } finally {
      await slow.close();
    }
  });
});
