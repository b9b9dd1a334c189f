import { copyFileSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { scripted, tempDir } from './helpers.js';

// `cohort results` as a user meets it: the built CLI as a real process, on a results file made
// by a real `cohort batch` run against the scripted model over HTTP (one task fails, one replies
// with commas, quotes, a newline and a pipe, one is typed), and on hand-written lines for what a
// batch does not write on demand (a torn last line, repeats, fields of a newer cohort).

const AWKWARD = 'Commas, "quotes" and | pipes\nsecond line';
const REFUSAL = 'refused, "on purpose"\nsecond line of the reason';

let model: ScriptedModel;
let hanging: ScriptedModel;
/** The batch's results file: t0 complete, t1 awkward text, t2 failed, t3 typed. Read only. */
let results: string;
let tasksFile: string;

function taskLines(): object[] {
  return [
    { id: 't0', prompt: 'Plain task.' },
    { id: 't1', prompt: scripted([{ reply: AWKWARD }]) },
    { id: 't2', prompt: scripted([{ error: { status: 400, message: REFUSAL } }]) },
    {
      id: 't3',
      prompt: scripted([{ reply: { title: 'Typed | title', score: 3 } }]),
      outputSchema: {
        type: 'object',
        properties: { title: { type: 'string' }, score: { type: 'number' } },
        required: ['title', 'score'],
      },
    },
  ];
}

function writeLines(file: string, lines: object[]): string {
  writeFileSync(file, lines.map((line) => JSON.stringify(line)).join('\n'));
  return file;
}

async function cli(args: string[], stdin?: string) {
  const run = runCli(args, {}, stdin === undefined ? {} : { stdin });
  const { code } = await run.exit;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

function fileLines(file: string): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

/** A small RFC 4180 reader: records end with CRLF, quoted fields hold anything, "" is a quote. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let index = 0;
  while (index < text.length) {
    if (text[index] === '"') {
      index++;
      while (!(text[index] === '"' && text[index + 1] !== '"')) {
        if (index >= text.length) throw new Error('an unclosed quote');
        field += text[index];
        index += text[index] === '"' ? 2 : 1;
      }
      index++;
    } else if (text[index] === ',') {
      record.push(field);
      field = '';
      index++;
    } else if (text.startsWith('\r\n', index)) {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
      index += 2;
    } else {
      // An unquoted field may not hold a quote, a CR or an LF.
      expect(text[index]).not.toMatch(/["\r\n]/);
      field += text[index];
      index++;
    }
  }
  expect(field).toBe('');
  return records;
}

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
  hanging = await startScriptedModel({ port: 0, ttftMs: 60_000 });
  const dir = tempDir();
  tasksFile = writeLines(path.join(dir, 'tasks.jsonl'), taskLines());
  results = path.join(dir, 'results.jsonl');
  const batch = await cli(['batch', tasksFile, '--out', results, '--base-url', model.url]);
  expect(batch.code, batch.stderr).toBe(1);
});

afterAll(async () => {
  await model.close();
  await hanging.close();
});

describe('cohort results on a real batch', () => {
  it('status sums the lines as the batch does, and --json is one object', async () => {
    const before = readFileSync(results);
    const mtime = statSync(results).mtimeMs;
    const lines = fileLines(results);
    const usage = lines.map((line) => line.usage as Record<string, number>);
    const sum = (key: string) => usage.reduce((total, each) => total + (each[key] ?? 0), 0);

    const [json, plain] = await Promise.all([
      cli(['results', results, 'status', '--json']),
      cli(['results', results, 'status']),
    ]);
    expect(json.code, json.stderr).toBe(0);
    const status = JSON.parse(json.stdout);
    expect(status).toMatchObject({
      type: 'status',
      file: results,
      lines: 4,
      tasks: 4,
      counts: { complete: 3, failed: 1, empty: 0, cancelled: 0, capped: 0 },
      failures: { bad_request: 1 },
      rerun: 0,
      duplicates: 0,
    });
    expect(status.spent.inputTokens).toBe(sum('inputTokens'));
    expect(status.spent.outputTokens).toBe(sum('outputTokens'));
    expect(status.spent.costUsd).toBeCloseTo(sum('costUsd'), 9);
    expect(status.spent.costUsd).toBeGreaterThan(0);
    expect(status.elapsedMs.total).toBe(lines.reduce((t, l) => t + (l.elapsedMs as number), 0));
    expect(status.tornBytes).toBeUndefined();
    // Every line says when it was written; the span ends at the last of them.
    const settled = lines.map((l) => Date.parse(l.settledAt as string));
    expect(settled.every(Number.isFinite)).toBe(true);
    expect(status.span.to).toBe(new Date(Math.max(...settled)).toISOString());
    expect(status.span.ms).toBeGreaterThanOrEqual(
      Math.max(...lines.map((l) => l.elapsedMs as number)),
    );

    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain('4 task(s) in 4 line(s)');
    expect(plain.stdout).toContain('outcomes: 3 complete, 1 failed (1 bad_request)');
    const input = sum('inputTokens').toLocaleString('en-US');
    expect(plain.stdout).toMatch(new RegExp(`spent: ${input} input \\+ [\\d,]+ output tokens`));
    expect(plain.stdout).toMatch(/agent time: .* in all, longest .* \(task t\d\)/);
    expect(plain.stdout).toMatch(/\nspan: .*, from \d{4}-\d\d-\d\dT.* to \d{4}-/);

    // Read only: the same bytes, the same time, and no lock was taken.
    expect(readFileSync(results).equals(before)).toBe(true);
    expect(statSync(results).mtimeMs).toBe(mtime);
    expect(existsSync(`${results}.lock`)).toBe(false);
  });

  it('failed lists the failed task on one line; --json gives its reason whole', async () => {
    const [plain, json] = await Promise.all([
      cli(['results', results, 'failed']),
      cli(['results', results, 'failed', '--json']),
    ]);
    expect(plain.code).toBe(0);
    expect(plain.stdout.split('\n').filter((line) => line !== '')).toHaveLength(1);
    expect(plain.stdout).toMatch(/^t2 \[bad_request\]: .*refused, "on purpose"\\nsecond line/);

    const failed = fileLines(results).find((line) => line.taskId === 't2')!;
    expect(JSON.parse(json.stdout)).toEqual({
      taskId: 't2',
      id: failed.id,
      code: 'bad_request',
      reason: failed.reason,
    });
    expect(failed.reason).toContain('refused, "on purpose"');
  });

  it('export csv quotes commas, quotes and newlines per RFC 4180, in file order', async () => {
    const run = await cli(['results', results, 'export']);
    expect(run.code).toBe(0);
    expect(run.stdout.endsWith('\r\n')).toBe(true);
    const [header, ...rows] = parseCsv(run.stdout);
    expect(header).toEqual([
      'taskId',
      'outcome',
      'code',
      'reason',
      'text',
      'value',
      'usage.inputTokens',
      'usage.outputTokens',
      'usage.costUsd',
    ]);
    const lines = fileLines(results);
    expect(rows.map((row) => row[0])).toEqual(lines.map((line) => line.taskId));
    const byId = new Map(rows.map((row) => [row[0], row]));
    expect(byId.get('t1')!.slice(1, 5)).toEqual(['complete', '', '', AWKWARD]);
    expect(byId.get('t2')!.slice(1, 3)).toEqual(['failed', 'bad_request']);
    expect(byId.get('t2')![3]).toBe(
      fileLines(results).find((line) => line.taskId === 't2')!.reason,
    );
    expect(JSON.parse(byId.get('t3')![5]!)).toEqual({ title: 'Typed | title', score: 3 });
    const t0 = lines.find((line) => line.taskId === 't0')!;
    expect(byId.get('t0')![8]).toBe(String((t0.usage as { costUsd: number }).costUsd));
  });

  it('export md escapes pipes and line breaks; jsonl keys by field, null where a line has none', async () => {
    const [md, jsonl] = await Promise.all([
      cli(['results', results, 'export', '--format', 'md', '--fields', 'taskId,text,value.title']),
      cli(['results', results, 'export', '--json', '--fields', 'taskId,value.title,code']),
    ]);
    expect(md.code).toBe(0);
    const table = md.stdout.trimEnd().split('\n');
    expect(table).toHaveLength(2 + 4);
    expect(table[0]).toBe('| taskId | text | value.title |');
    expect(table[1]).toBe('| --- | --- | --- |');
    const t1 = table.find((row) => row.startsWith('| t1 '))!;
    expect(t1).toBe('| t1 | Commas, "quotes" and \\| pipes<br>second line |  |');
    expect(table.find((row) => row.startsWith('| t3 '))).toMatch(/\| Typed \\\| title \|$/);
    // Every row has as many unescaped pipes as the header.
    for (const row of table) expect(row.split(/(?<!\\)\|/)).toHaveLength(5);

    const rows = jsonl.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    const byId = new Map(rows.map((row) => [row.taskId, row]));
    expect(byId.get('t3')).toEqual({ taskId: 't3', 'value.title': 'Typed | title', code: null });
    expect(byId.get('t2')).toEqual({ taskId: 't2', 'value.title': null, code: 'bad_request' });
  });

  it('export --tasks follows the tasks file, with an empty outcome for a task with no line', async () => {
    const dir = tempDir();
    const order = writeLines(path.join(dir, 'order.jsonl'), [
      { id: 't3', prompt: 'x' },
      { id: 'later', prompt: 'not run yet' },
      { id: 't0', prompt: 'x' },
      { id: 't2', prompt: 'x' },
    ]);
    const out = path.join(dir, 'table.jsonl');
    const fields = ['--fields', 'taskId,outcome'];
    const [run, piped] = await Promise.all([
      cli(['results', results, 'export', '--tasks', order, ...fields]),
      // From stdin too, written to --out.
      cli(
        ['results', results, 'export', '--tasks', '-', '--format', 'jsonl', ...fields, '-o', out],
        readFileSync(order, 'utf8'),
      ),
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(parseCsv(run.stdout)).toEqual([
      ['taskId', 'outcome'],
      ['t3', 'complete'],
      ['later', ''],
      ['t0', 'complete'],
      ['t2', 'failed'],
    ]);
    expect(run.stderr).toMatch(/1 task\(s\) of --tasks have no result line yet/);
    expect(run.stderr).toMatch(/1 result line\(s\) for tasks not in --tasks were left out/);

    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stdout).toBe('');
    expect(piped.stderr).toContain(`4 row(s) in ${out}`);
    expect(fileLines(out)).toEqual([
      { taskId: 't3', outcome: 'complete' },
      { taskId: 'later', outcome: null },
      { taskId: 't0', outcome: 'complete' },
      { taskId: 't2', outcome: 'failed' },
    ]);
  });

  it('show renders one task; --json prints its line as it is in the file', async () => {
    const raw = readFileSync(results, 'utf8').split('\n');
    const line = raw.find((text) => text.includes('"taskId":"t2"'))!;
    const [json, plain, missing] = await Promise.all([
      cli(['results', results, 'show', 't2', '--json']),
      cli(['results', results, 'show', 't2']),
      cli(['results', results, 'show', 'nope']),
    ]);
    expect(json.code).toBe(0);
    expect(json.stdout).toBe(`${line}\n`);
    expect(plain.code).toBe(0);
    const parsed = JSON.parse(line);
    expect(plain.stdout).toContain(`task t2 · line ${raw.indexOf(line) + 1}`);
    expect(plain.stdout).toContain(`── t2 · ${parsed.id} · failed (bad_request: `);
    expect(plain.stdout).toMatch(/cost \$\d+\.\d{4}/);

    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /Expected the id of a task in .*, got `nope`; it has 4 task\(s\): t\d, t\d, t\d, t\d/,
    );
  });

  it('reads a file a running batch holds, without its lock; a stopped task counts to rerun', async () => {
    const dir = tempDir();
    const out = path.join(dir, 'results.jsonl');
    copyFileSync(results, out);
    const tasks = writeLines(path.join(dir, 'tasks.jsonl'), [
      ...taskLines(),
      { id: 't4', prompt: 'Waits on a model that never answers.' },
    ]);
    const batch = runCli(['batch', tasks, '--out', out, '--base-url', hanging.url]);
    await batch.waitFor(/1 to run/);
    const lock = readFileSync(`${out}.lock`, 'utf8');
    const during = await cli(['results', out, 'status', '--json']);
    expect(during.code, during.stderr).toBe(0);
    expect(JSON.parse(during.stdout)).toMatchObject({ tasks: 4, counts: { complete: 3 } });
    expect(readFileSync(`${out}.lock`, 'utf8')).toBe(lock);

    batch.child.kill('SIGINT');
    expect((await batch.exit).code).toBe(130);
    const after = await cli(['results', out, 'status']);
    expect(after.stdout).toContain('5 task(s) in 5 line(s)');
    expect(after.stdout).toContain('1 cancelled');
    expect(after.stdout).toMatch(/rerun: 1 task\(s\) run again when the batch is rerun/);
  });
});

describe('cohort results on hand-written lines', () => {
  const usage = { inputTokens: 100, outputTokens: 10, cacheReadTokens: 800, cacheWriteTokens: 100 };
  const line = (taskId: string, extra: object = {}) => ({
    id: `ag_${taskId}`,
    title: taskId,
    outcome: 'complete',
    text: `text of ${taskId}`,
    usage: { ...usage, providerCalls: 1, steps: 1, costUsd: 0.5 },
    elapsedMs: 10,
    taskId,
    ...extra,
  });

  it('skips a torn last line and repeats with a note, tolerates a newer field and a bare line', async () => {
    const file = path.join(tempDir(), 'r.jsonl');
    const text = [
      JSON.stringify(line('a', { taskHash: 'h1', settledAt: '2026-12-02T10:00:01.000Z' })),
      JSON.stringify(line('b', { settledAt: '2026-12-02T10:00:05.000Z' })),
      JSON.stringify(line('a', { outcome: 'failed', code: 'internal' })),
      // A line an older cohort (or a hand) wrote: no usage, no text.
      JSON.stringify({ taskId: 'c', outcome: 'empty' }),
      '{"id":"ag_d","title":"d","outcome":"compl',
    ].join('\n');
    writeFileSync(file, text);

    const empty = path.join(tempDir(), 'empty.jsonl');
    writeFileSync(empty, '');
    const [json, plain, rows, show, bare, none] = await Promise.all([
      cli(['results', file, 'status', '--json']),
      cli(['results', file, 'status']),
      cli(['results', file, 'export', '--fields', 'taskId,outcome,usage.costUsd']),
      cli(['results', file, 'show', 'a']),
      cli(['results', file, 'show', 'c']),
      cli(['results', empty, 'status']),
    ]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toBe(`${empty}: 0 task(s) in 0 line(s), no result yet\n`);
    expect(json.code, json.stderr).toBe(0);
    const status = JSON.parse(json.stdout);
    expect(status).toMatchObject({
      lines: 4,
      tasks: 3,
      counts: { complete: 2, empty: 1, failed: 0 },
      duplicates: 1,
      duplicateIds: ['a'],
      tornBytes: '{"id":"ag_d","title":"d","outcome":"compl'.length,
      // From a's start (its settle less its 10 ms) to b's settle; c has no clock time.
      span: { from: '2026-12-02T10:00:00.990Z', to: '2026-12-02T10:00:05.000Z', ms: 4010 },
    });
    // Cache reads over all input: 1600 / (200 + 1600 + 200).
    expect(status.spent.cacheHitPercent).toBe(80);
    expect(status.spent.costUsd).toBe(1);

    expect(plain.stdout).toContain(
      'spent: 200 input (+1,600 cached, 200 written) + 20 output tokens, 2 steps, $1.0000 for the 2 priced task(s); cache hit 80.0%',
    );
    expect(plain.stdout).toMatch(/duplicates: 1 line\(s\) repeat a task already in the file \(a\)/);
    expect(plain.stdout).toMatch(/torn: the last line \(\d+ bytes\) is incomplete and was skipped/);

    expect(parseCsv(rows.stdout)).toEqual([
      ['taskId', 'outcome', 'usage.costUsd'],
      ['a', 'complete', '0.5'],
      ['b', 'complete', '0.5'],
      ['c', 'empty', ''],
    ]);
    expect(rows.stderr).toMatch(/1 line\(s\) repeat a task/);
    expect(rows.stderr).toMatch(/torn: the last line/);

    expect(show.stdout).toContain('taskHash: h1');
    expect(bare.code, bare.stderr).toBe(0);
    expect(bare.stdout).toContain('── c ·  · empty');
    // Nothing was cut or ended: the torn line is still there for the batch to deal with.
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('escapes control characters on a terminal-bound line and cuts a long reason', async () => {
    const file = writeLines(path.join(tempDir(), 'r.jsonl'), [
      line('x\u001b[31m', {
        outcome: 'failed',
        code: 'tool_error',
        reason: `\u001b]0;title\u0007${'y'.repeat(300)}`,
      }),
    ]);
    const run = await cli(['results', file, 'failed']);
    expect(run.stdout).not.toContain('\u001b');
    expect(run.stdout).not.toContain('\u0007');
    expect(run.stdout).toMatch(/^x\\x1b\[31m \[tool_error\]: \\x1b\]0;title\\x07y+…\n$/);
    expect(run.stdout.length).toBeLessThan(220);
  });

  it('refuses bad input with Expected …, got … and exit 2, and changes nothing', async () => {
    const dir = tempDir();
    const notes = path.join(dir, 'notes.md');
    writeFileSync(notes, '# Notes\n\nNot results.\n');
    const good = writeLines(path.join(dir, 'r.jsonl'), [line('a')]);
    const cases: [string[], RegExp][] = [
      [['results'], /Expected a results FILE and a subcommand .*got nothing/],
      [
        ['results', path.join(dir, 'missing.jsonl'), 'status'],
        /Expected a results file .*got no file at/,
      ],
      [
        ['results', notes, 'export'],
        /Expected .*notes\.md to be a cohort results file .*got line 1: not JSON/,
      ],
      [['results', dir, 'failed'], /Expected a results file, got the directory/],
      [
        ['results', good, 'summary'],
        /Expected a subcommand after FILE \(status, failed, export, show\), got `summary`/,
      ],
      [['results', 'status', good], /The file comes first: cohort results .*r\.jsonl status/],
      [
        ['results', good, 'export', '--fields', 'taskId,outcom'],
        /Expected --fields .*got `outcom`/,
      ],
      [
        ['results', good, 'export', '--fields', 'taskId,usage.cost'],
        /Expected --fields .*got `usage\.cost`/,
      ],
      [
        ['results', good, 'export', '--format', 'xlsx'],
        /Expected --format to be one of csv, jsonl, md, got `xlsx`/,
      ],
      [
        ['results', good, 'export', '--json', '--format', 'md'],
        /Expected --json .*got --format `md`/,
      ],
      [
        ['results', good, 'export', '--tasks', notes],
        /Expected --tasks .*notes\.md to be a tasks file .*got line 1: invalid JSON/,
      ],
      [['results', good, 'export', '--out', good], /Expected --out to be a file of its own/],
      [
        ['results', good, 'status', '--tasks', notes],
        /Expected only --json after `status`, got `--tasks`/,
      ],
    ];
    const before = readFileSync(good, 'utf8');
    // A few at a time: the machine is shared.
    for (let start = 0; start < cases.length; start += 5) {
      const chunk = cases.slice(start, start + 5);
      const runs = await Promise.all(chunk.map(([args]) => cli(args)));
      runs.forEach((run, index) => {
        const [args, pattern] = chunk[index]!;
        expect(run.code, args.join(' ')).toBe(2);
        expect(run.stderr, args.join(' ')).toMatch(pattern);
        expect(run.stdout, args.join(' ')).toBe('');
      });
    }
    expect(readFileSync(good, 'utf8')).toBe(before);
    expect(readFileSync(notes, 'utf8')).toBe('# Notes\n\nNot results.\n');
  });

  it('--help lists the subcommands, the flags and the exit codes', async () => {
    const [own, help, top] = await Promise.all([
      cli(['results', '--help']),
      cli(['help', 'results']),
      cli(['--help']),
    ]);
    for (const run of [own, help]) {
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/^Usage: cohort results FILE status/);
      expect(run.stdout).toContain('--fields A,B.C');
      expect(run.stdout).toMatch(/Exit codes:\n {2}0 {2}done/);
    }
    expect(top.stdout).toContain('results FILE SUBCOMMAND');
  });
});
