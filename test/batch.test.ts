import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openResults } from '../src/cli/results/file.js';
import { checkTaskLine, parseTasks } from '../src/cli/task-lines.js';
import { mapAgents } from '../src/main/map-agents.js';
import { DEFAULT_INITIAL_CONCURRENCY } from '../src/shared/governor/governor.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, requests, runCli, writeTasks } from './cli-helpers.js';
import { type Rig, scripted, startRig, tempDir } from './helpers.js';

describe('tasks file parsing', () => {
  it('reports every bad line with its number and what was wrong, and keeps the good ones', () => {
    const text = [
      '{"id":"a","prompt":"one"}',
      '',
      'not json',
      '{"prompt":"no id"}',
      '{"id":"a","prompt":"dup"}',
      '{"id":7,"prompt":"numeric id","maxSteps":0}',
      '{"id":"b","prompt":"two","tools":"read_file","colour":"red"}',
      '[1,2]',
      '{"id":"c","prompt":"three","title":"T","system":"S","tools":["x"],"maxSteps":3,"model":"m"}',
    ].join('\n');
    const { tasks, errors } = parseTasks(text);
    expect(tasks.map((task) => task.id)).toEqual(['a', 'c']);
    expect(tasks[1]).toEqual({
      id: 'c',
      prompt: 'three',
      title: 'T',
      system: 'S',
      tools: ['x'],
      maxSteps: 3,
      model: 'm',
    });
    expect(errors.map((error) => error.line)).toEqual([3, 4, 5, 6, 7, 8]);
    expect(errors[0]!.message).toMatch(/^invalid JSON/);
    expect(errors[1]!.message).toBe('missing `id`');
    expect(errors[2]!.message).toBe('duplicate id `a` (first on line 1)');
    expect(errors[3]!.message).toBe(
      'expected `maxSteps` to be a whole number from 1 to 10000, got `0` (number)',
    );
    expect(errors[4]!.message).toMatch(
      /unknown field\(s\) `colour`.*expected `tools` to be an array of strings, got `read_file` \(string\)/,
    );
    expect(errors[5]!.message).toBe('expected a JSON object, got `[1,2]` (array)');
    expect(checkTaskLine('{"id":"", "prompt":"x"}')).toMatchObject({ ok: false });
  });
});

describe('results file', () => {
  it('drops a torn last line and interrupted cancels, keeps the rest, and compacts in place', () => {
    const file = path.join(tempDir(), 'results.jsonl');
    writeFileSync(
      file,
      [
        JSON.stringify({ taskId: 'a', outcome: 'complete' }),
        JSON.stringify({ taskId: 'b', outcome: 'cancelled', reason: 'user' }),
        JSON.stringify({ taskId: 'c', outcome: 'failed', reason: 'provider:overloaded: x' }),
        JSON.stringify({ taskId: 'd', outcome: 'cancelled', reason: 'ceiling' }),
        '{"id":"ag_e","taskId":"e","outco',
      ].join('\n'),
    );
    const inode = statSync(file).ino;
    const results = openResults(file);
    results.close();
    expect([...results.done].sort()).toEqual(['a', 'c', 'd']);
    expect(results.dropped).toBe(2);
    expect(readResultLines(file).map((line) => line.taskId)).toEqual(['a', 'c', 'd']);
    // Rewritten in place, never renamed over: whoever holds the file keeps the same file.
    expect(statSync(file).ino).toBe(inode);
  });
});

describe('mapAgents', () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig({ threads: 1 });
  });
  afterAll(async () => {
    await rig.close();
  });

  it('keeps at most `concurrency` children in flight and yields one result per spec', async () => {
    let live = 0;
    let peak = 0;
    const specs = Array.from({ length: 40 }, (_, index) => ({
      prompt: scripted([{ delayMs: 5, reply: `r${index}` }]),
      onEvent: (event: { type: string }) => {
        if (event.type === 'step-start') peak = Math.max(peak, ++live);
        if (event.type === 'agent-settle') live--;
      },
      streamText: false,
    }));
    const texts: string[] = [];
    for await (const { result } of mapAgents(rig.engine, specs, { concurrency: 4 }))
      texts.push(result.text);
    expect(texts.sort()).toEqual(specs.map((_, index) => `r${index}`).sort());
    expect(peak).toBeLessThanOrEqual(4);
  });

  it('on abort stops admitting, cancels the running children and still yields their results', async () => {
    const controller = new AbortController();
    const specs = Array.from({ length: 20 }, () => ({
      prompt: scripted([{ delayMs: 60_000, reply: 'x' }]),
    }));
    const seen: string[] = [];
    let first = true;
    const waiting = new Promise<void>((resolve) => rig.model.once('request', () => resolve()));
    const iterate = (async () => {
      for await (const { result } of mapAgents(rig.engine, specs, {
        concurrency: 5,
        signal: controller.signal,
      })) {
        seen.push(`${result.outcome}:${result.reason}`);
        if (first) first = false;
      }
    })();
    await waiting;
    controller.abort();
    await iterate;
    expect(seen).toEqual(Array.from({ length: 5 }, () => 'cancelled:user'));
  });
});

describe('cohort batch (the CLI as a child process)', () => {
  let slow: ScriptedModel;
  let fast: ScriptedModel;
  beforeAll(async () => {
    slow = await startScriptedModel({
      port: 0,
      ttftMs: 20,
      tokensPerSecond: 400,
      jitter: 0.9,
      seed: 3,
    });
    fast = await startScriptedModel({ port: 0 });
  });
  afterAll(async () => {
    await slow.close();
    await fast.close();
  });

  it('killed with SIGKILL mid-run and rerun, the output ends with exactly one line per task', async () => {
    const tasks = writeTasks(300);
    const out = path.join(tempDir(), 'results.jsonl');
    const first = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--concurrency',
      '8',
      '--base-url',
      slow.url,
      '--threads',
      '1',
    ]);
    // Kill it once some results are on disk: watch the file grow.
    await new Promise<void>((resolve) => {
      const watch = () => {
        const text = existsSync(out) ? readFileSync(out, 'utf8') : '';
        if (text.split('\n').length > 20) resolve();
        else setTimeout(watch, 5);
      };
      watch();
    });
    first.child.kill('SIGKILL');
    expect((await first.exit).signal).toBe('SIGKILL');
    const partial = readResultLines(out).length;
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(300);
    const second = runCli(['batch', tasks, '--out', out, '--base-url', fast.url, '--threads', '1']);
    expect((await second.exit).code).toBe(0);
    const lines = readResultLines(out);
    expect(lines.map((line) => line.taskId).sort()).toEqual(
      Array.from({ length: 300 }, (_, index) => `t${index}`).sort(),
    );
    expect(lines.every((line) => line.outcome === 'complete')).toBe(true);
    expect(second.stderr()).toMatch(/already in/);
  });

  it('Ctrl-C stops admitting, writes cancelled results, says how to resume; the resume completes', async () => {
    const tasks = writeTasks(50);
    const out = path.join(tempDir(), 'results.jsonl');
    const hanging = await startScriptedModel({ port: 0, ttftMs: 60_000 });
    try {
      const run = runCli([
        'batch',
        tasks,
        '--out',
        out,
        '--concurrency',
        '10',
        '--base-url',
        hanging.url,
      ]);
      await run.waitFor(/to run/);
      // Ten tasks run; the governor's slow start lets the first few of their requests out.
      await requests(hanging, DEFAULT_INITIAL_CONCURRENCY);
      run.child.kill('SIGINT');
      const exit = await run.exit;
      expect(exit.code).toBe(130);
      expect(run.stderr()).toMatch(/Resume with the same command/);
      const lines = readResultLines(out);
      expect(lines).toHaveLength(10);
      expect(lines.every((line) => line.outcome === 'cancelled' && line.reason === 'user')).toBe(
        true,
      );
      const resumed = runCli(['batch', tasks, '--out', out, '--base-url', fast.url]);
      expect((await resumed.exit).code).toBe(0);
      const final = readResultLines(out);
      expect(final).toHaveLength(50);
      expect(new Set(final.map((line) => line.taskId)).size).toBe(50);
    } finally {
      await hanging.close();
    }
  });

  it('exit codes: 1 with bad lines (good lines still run), 2 with --strict or a usage error', async () => {
    const file = path.join(tempDir(), 'tasks.jsonl');
    writeFileSync(file, '{"id":"ok","prompt":"fine"}\n{"id":"bad"}\n');
    const out = path.join(tempDir(), 'results.jsonl');
    const lenient = runCli(['batch', file, '--out', out, '--base-url', fast.url, '--quiet']);
    expect((await lenient.exit).code).toBe(1);
    expect(lenient.stderr()).toContain(`${file}:2: missing \`prompt\``);
    expect(readResultLines(out).map((line) => line.taskId)).toEqual(['ok']);
    const strict = runCli([
      'batch',
      file,
      '--out',
      path.join(tempDir(), 'r.jsonl'),
      '--strict',
      '--base-url',
      fast.url,
    ]);
    expect((await strict.exit).code).toBe(2);
    const usage = runCli(['batch', file]);
    expect((await usage.exit).code).toBe(2);
    expect(usage.stderr()).toContain('Expected `--out RESULTS.jsonl`, got nothing');
  });
});
