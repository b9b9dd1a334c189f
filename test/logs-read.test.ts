import { appendFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runFolderPid } from '../src/main/run-folder.js';
import type { AgentHistory } from '../src/shared/journal/reader.js';
import type { AgentResult } from '../src/shared/result.js';
import { type CliRun, runCli } from './cli-helpers.js';
import { readJournal, scripted, TEST_TOOLS, tempDir } from './helpers.js';

// `cohort logs show|tail|export|list` read back journals that real runs wrote (`cohort agent`
// and `cohort batch` on the built-in scripted model, as real processes), and journals written by
// hand where a test needs a record a run would not write at the moment it wants.

/** What a finished command printed. */
async function finished(run: CliRun): Promise<{ code: number | null; out: string; err: string }> {
  const { code } = await run.exit;
  return { code, out: run.stdout(), err: run.stderr() };
}

/** Lines of JSON text, parsed. */
function jsonLines<T = Record<string, unknown>>(text: string): T[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as T);
}

/** A reply longer than the reply cap (32,000 characters): it spills whole to replies/. */
const LONG_REPLY = `${'long reply line\n'.repeat(2100)}the end`;

/** The shared runs: one `agent` run named `first`, then a `batch` run named as the engine does. */
let root: string;
let agentResult: AgentResult;
let batchRun: string;
let batchStderr: string;
let byTask: Map<string, AgentResult>;

beforeAll(async () => {
  root = tempDir('cohort-logs-read-');
  const agent = runCli([
    'agent',
    scripted([
      {
        text: 'Let me look.',
        calls: [
          { name: 'echo', input: { value: 'a line\n'.repeat(40) } },
          { name: 'throw', input: {} },
        ],
      },
      { reply: 'The answer is 42.' },
    ]),
    '--title',
    'looker',
    '--tools',
    TEST_TOOLS,
    '--threads',
    '1',
    '--log-dir',
    root,
    '--run',
    'first',
    '--json',
  ]);
  const ran = await finished(agent);
  expect(ran.code, ran.err).toBe(0);
  agentResult = JSON.parse(ran.out) as AgentResult;

  const tasks = path.join(tempDir(), 'tasks.jsonl');
  const lines = [
    { id: 'ok', title: 'fine', prompt: scripted([{ reply: 'fine' }]) },
    { id: 'bad', title: 'refused', prompt: scripted([{ error: { status: 400, message: 'no' } }]) },
    { id: 'long', title: 'long one', prompt: scripted([{ reply: LONG_REPLY }]) },
    { id: 'object', title: 'typed', prompt: scripted([{ reply: { answer: 42, items: [1, 2] } }]) },
  ];
  writeFileSync(tasks, lines.map((line) => JSON.stringify(line)).join('\n'));
  const out = path.join(tempDir(), 'results.jsonl');
  const batch = runCli([
    'batch',
    tasks,
    '--out',
    out,
    '--threads',
    '1',
    '--log-dir',
    root,
    // Room for the long reply in one turn.
    '--max-tokens',
    '50000',
    '--json',
  ]);
  const batched = await finished(batch);
  expect(batched.code, batched.err).toBe(1); // one task failed
  batchStderr = batched.err;
  batchRun = readdirSync(root).find((name) => name !== 'first')!;
  byTask = new Map(
    jsonLines<AgentResult & { taskId: string }>(readFileSync(out, 'utf8')).map((line) => [
      line.taskId,
      line,
    ]),
  );
  // The batch's summary names its run folder too.
  expect(jsonLines(batched.out).at(-1)).toMatchObject({
    type: 'summary',
    logDir: path.join(root, batchRun),
  });
});

describe('--log-dir is the root, --run names the run', () => {
  it('a run goes in ROOT/<time>-<pid>, or ROOT/ID with --run, and says so on stderr', async () => {
    expect(agentResult.logDir).toBe(path.join(root, 'first'));
    // The batch's folder is named as the engine names them, after the batch's own pid.
    expect(runFolderPid(batchRun)).toBeGreaterThan(0);
    expect(readdirSync(root).sort()).toEqual([batchRun, 'first'].sort());
    const folder = path.join(root, batchRun);
    expect(batchStderr).toContain(
      `cohort: journal in ${folder} (cohort logs show ID --run ${batchRun} --log-dir ${root})\n`,
    );
    expect(batchStderr).toContain(`cohort batch: logs: ${folder}\n`);
    expect(byTask.get('ok')!.logDir).toBe(folder);
  });

  it('--quiet prints no journal line; a run named after an existing folder is added to', async () => {
    const run = runCli([
      'agent',
      scripted([{ reply: 'again' }]),
      '--log-dir',
      root,
      '--run',
      'first',
      '--json',
      '--threads',
      '1',
    ]);
    const { code, out, err } = await finished(run);
    expect(code, err).toBe(0);
    const again = JSON.parse(out) as AgentResult;
    const journal = readJournal(path.join(root, 'first'));
    expect([...journal.keys()].sort()).toEqual([agentResult.id, again.id].sort());

    const tasks = path.join(tempDir(), 'tasks.jsonl');
    writeFileSync(tasks, JSON.stringify({ id: 'q', prompt: scripted([{ reply: 'q' }]) }));
    const quietRoot = tempDir();
    const quiet = runCli([
      'batch',
      tasks,
      '--out',
      path.join(tempDir(), 'results.jsonl'),
      '--log-dir',
      quietRoot,
      '--quiet',
      '--threads',
      '1',
    ]);
    const done = await finished(quiet);
    expect(done.code, done.err).toBe(0);
    expect(done.err).not.toMatch(/journal in|logs:/);
    expect(readdirSync(quietRoot)).toHaveLength(1);
  });

  it.each([['../elsewhere'], ['a/b'], ['..'], ['.hidden'], ['two words']])(
    'refuses --run %j with exit 2, saying what it takes, before anything runs',
    async (id) => {
      const empty = tempDir();
      const { code, err } = await finished(
        runCli(['agent', 'hi', '--log-dir', empty, '--run', id]),
      );
      expect(code).toBe(2);
      expect(err).toContain('Expected `--run` to be a plain folder name under the log root');
      expect(err).toContain(`got \`${id}\``);
      expect(readdirSync(empty)).toEqual([]);
    },
  );
});

describe('cohort logs show', () => {
  it('prints the transcript: meta, prompt, each step with its calls and results, reply, outcome', async () => {
    const { code, out, err } = await finished(
      runCli(['logs', 'show', agentResult.id, '--run', 'first', '--log-dir', root]),
    );
    expect(code, err).toBe(0);
    expect(out).toContain(`── ${agentResult.id} · looker · complete\n`);
    expect(out).toContain(`   run first (${path.join(root, 'first')})\n`);
    expect(out).toMatch(/model cohort-scripted · at http:\/\/127\.0\.0\.1:\d+ · depth 1/);
    expect(out).toMatch(/tools: cleanup, echo, throw/);
    expect(out).toContain('── prompt\nScripted task.');
    expect(out).toContain('── step 1\nLet me look.\n  → echo {"value":"a line\\na line');
    expect(out).toContain('  → throw {}\n');
    // A long result is clipped to its first lines; a failed tool is marked.
    expect(out).toMatch(/ {2}← echo: a line\n {4}a line\n[\s\S]*… \(\d+ more characters\)\n/);
    expect(out).toContain('  ← throw ✗: `throw` failed: a tool that throws\n');
    expect(out).toContain('── step 2\n  → reply {"result":"The answer is 42."}\n');
    expect(out).toContain('── reply\nThe answer is 42.\n');
    expect(out).toMatch(/── complete · 2 steps · 2 provider calls · \d+ in \/ \d+ out tokens/);
  });

  it('without --run finds the agent in the runs under the root, newest first', async () => {
    const older = await finished(runCli(['logs', 'show', agentResult.id, '--log-dir', root]));
    expect(older.code, older.err).toBe(0);
    expect(older.out).toContain('   run first (');
    const failed = byTask.get('bad')!;
    const newer = await finished(runCli(['logs', 'show', failed.id, '--log-dir', root]));
    expect(newer.code, newer.err).toBe(0);
    expect(newer.out).toContain(`── ${failed.id} · refused · failed\n`);
    expect(newer.out).toMatch(/── failed \(bad_request: .*no\) · 1 steps · 1 provider calls/);
  });

  it('--json prints the AgentHistory the journal holds, as one line', async () => {
    const { code, out, err } = await finished(
      runCli(['logs', 'show', agentResult.id, '--log-dir', root, '--json']),
    );
    expect(code, err).toBe(0);
    expect(out.endsWith('\n') && out.indexOf('\n') === out.length - 1).toBe(true);
    const history = JSON.parse(out) as AgentHistory;
    const journaled = readJournal(path.join(root, 'first')).get(agentResult.id)!;
    expect(history).toEqual(JSON.parse(JSON.stringify(journaled)));
    expect(history).toMatchObject({ id: agentResult.id, steps: 2, keep: true, corrupt: false });
    expect(history.result).toEqual(agentResult);
  });

  it('an unknown agent exits 1 naming where it looked; a malformed one exits 2', async () => {
    const unknown = 'ag_aaaaaaaaaaaa';
    const everywhere = await finished(runCli(['logs', 'show', unknown, '--log-dir', root]));
    expect(everywhere.code).toBe(1);
    expect(everywhere.err).toBe(`cohort logs: no agent ${unknown} in the 2 run(s) under ${root}\n`);
    const inRun = await finished(
      runCli(['logs', 'show', unknown, '--log-dir', root, '--run', batchRun]),
    );
    expect(inRun.code).toBe(1);
    expect(inRun.err).toBe(
      `cohort logs: no agent ${unknown} in run ${batchRun} (${path.join(root, batchRun)})\n`,
    );
    const malformed = await finished(runCli(['logs', 'show', 'ag_NOPE', '--log-dir', root]));
    expect(malformed.code).toBe(2);
    expect(malformed.err).toMatch(
      /Expected an agent ID \(ag_ and 12 characters.*\), got `ag_NOPE`/,
    );
    const none = await finished(runCli(['logs', 'show', '--log-dir', root]));
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/Expected one agent ID after `show`.*, got nothing/);
  });

  it('a missing run or root exits 1; a bad --run or a root that is a file exits 2', async () => {
    const id = agentResult.id;
    const noRun = await finished(runCli(['logs', 'show', id, '--log-dir', root, '--run', 'nope']));
    expect(noRun.code).toBe(1);
    expect(noRun.err).toBe(
      `cohort logs: no run nope under ${root} (cohort logs list shows the runs there)\n`,
    );
    const missing = path.join(tempDir(), 'missing');
    const noRoot = await finished(runCli(['logs', 'show', id, '--log-dir', missing]));
    expect(noRoot.code).toBe(1);
    expect(noRoot.err).toBe(`cohort logs: no agent ${id}: no runs under ${missing}\n`);
    const badRun = await finished(runCli(['logs', 'show', id, '--log-dir', root, '--run', '..']));
    expect(badRun.code).toBe(2);
    expect(badRun.err).toMatch(/Expected `--run` to be a plain folder name.*, got `\.\.`/);
    const file = path.join(tempDir(), 'file');
    writeFileSync(file, '');
    const fileRoot = await finished(runCli(['logs', 'show', id, '--log-dir', file]));
    expect(fileRoot.code).toBe(2);
    expect(fileRoot.err).toContain(
      `Expected \`--log-dir\` to be a folder of run logs, got \`${file}\``,
    );
  });
});

describe('cohort logs export', () => {
  it('writes meta.json, transcript.jsonl, reply.md and result.json as the journal has them', async () => {
    const into = tempDir();
    const { code, out, err } = await finished(
      runCli(['logs', 'export', agentResult.id, '--dir', into, '--log-dir', root]),
    );
    expect(code, err).toBe(0);
    const dir = path.join(into, agentResult.id);
    expect(out).toBe(
      `cohort logs: exported ${agentResult.id} from run first to ${dir} (meta.json, transcript.jsonl, reply.md, result.json)\n`,
    );
    expect(readdirSync(dir).sort()).toEqual([
      'meta.json',
      'reply.md',
      'result.json',
      'transcript.jsonl',
    ]);
    const history = readJournal(path.join(root, 'first')).get(agentResult.id)!;
    expect(JSON.parse(readFileSync(path.join(dir, 'meta.json'), 'utf8'))).toEqual(history.meta);
    expect(jsonLines(readFileSync(path.join(dir, 'transcript.jsonl'), 'utf8'))).toEqual(
      history.messages,
    );
    expect(readFileSync(path.join(dir, 'reply.md'), 'utf8')).toBe('The answer is 42.');
    expect(JSON.parse(readFileSync(path.join(dir, 'result.json'), 'utf8'))).toEqual(agentResult);
  });

  it('the reply is whole: the spilled file of a long one; reply.json for an object', async () => {
    const into = tempDir();
    const long = byTask.get('long')!;
    expect(long).toMatchObject({ truncated: true });
    const spilled = await finished(
      runCli(['logs', 'export', long.id, '--dir', into, '--log-dir', root, '--run', batchRun]),
    );
    expect(spilled.code, spilled.err).toBe(0);
    expect(readFileSync(path.join(into, long.id, 'reply.md'), 'utf8')).toBe(LONG_REPLY);

    const object = byTask.get('object')!;
    const typed = await finished(
      runCli(['logs', 'export', object.id, '--dir', into, '--log-dir', root]),
    );
    expect(typed.code, typed.err).toBe(0);
    expect(readdirSync(path.join(into, object.id))).toContain('reply.json');
    expect(JSON.parse(readFileSync(path.join(into, object.id, 'reply.json'), 'utf8'))).toEqual({
      answer: 42,
      items: [1, 2],
    });

    // A failed agent made no reply: its folder has no reply file.
    const failed = byTask.get('bad')!;
    const none = await finished(
      runCli(['logs', 'export', failed.id, '--dir', into, '--log-dir', root]),
    );
    expect(none.code, none.err).toBe(0);
    expect(readdirSync(path.join(into, failed.id)).sort()).toEqual([
      'meta.json',
      'result.json',
      'transcript.jsonl',
    ]);
  });

  it('needs --dir (exit 2), and an agent that is there (exit 1)', async () => {
    const noDir = await finished(runCli(['logs', 'export', agentResult.id, '--log-dir', root]));
    expect(noDir.code).toBe(2);
    expect(noDir.err).toContain('Expected `--dir DIR` to export into, got nothing');
    const into = tempDir();
    const unknown = await finished(
      runCli(['logs', 'export', 'ag_bbbbbbbbbbbb', '--dir', into, '--log-dir', root]),
    );
    expect(unknown.code).toBe(1);
    expect(readdirSync(into)).toEqual([]);
  });
});

describe('cohort logs list', () => {
  it('lists the runs newest first: start, agents, results by outcome, size, process', async () => {
    const json = await finished(runCli(['logs', 'list', '--log-dir', root, '--json']));
    expect(json.code, json.err).toBe(0);
    const listed = JSON.parse(json.out) as {
      type: string;
      root: string;
      runs: { run: string; agents: number; results: Record<string, number>; bytes: number }[];
    };
    expect(listed).toMatchObject({ type: 'runs', root });
    // `first` has the agent of its first run and the one a later test may have added to it.
    expect(listed.runs.map((run) => run.run)).toEqual([batchRun, 'first']);
    expect(listed.runs[0]).toMatchObject({
      path: path.join(root, batchRun),
      agents: 4,
      results: { complete: 3, failed: 1 },
      unsettled: 0,
      alive: false,
    });
    expect(listed.runs[0]!.bytes).toBeGreaterThan(0);
    expect(
      Date.parse((listed.runs[0] as unknown as { startedAt: string }).startedAt),
    ).toBeGreaterThan(Date.parse((listed.runs[1] as unknown as { startedAt: string }).startedAt));

    const text = await finished(runCli(['logs', 'list', '--log-dir', root]));
    expect(text.code, text.err).toBe(0);
    const [header, newest, older] = text.out.trimEnd().split('\n');
    expect(header).toMatch(/^RUN +STARTED +AGENTS +RESULTS +SIZE +PROCESS$/);
    expect(newest).toMatch(
      new RegExp(`^${batchRun} +\\S+Z +4 +3 complete, 1 failed +\\d+\\.\\d KB +-$`),
    );
    expect(older).toMatch(/^first +/);
  });

  it('a root with no runs lists none (exit 0); a root that is a file is a usage error', async () => {
    const missing = path.join(tempDir(), 'missing');
    const none = await finished(runCli(['logs', 'list', '--log-dir', missing]));
    expect(none).toEqual({ code: 0, out: '', err: `cohort logs: no runs under ${missing}\n` });
    const file = path.join(tempDir(), 'file');
    writeFileSync(file, '');
    const bad = await finished(runCli(['logs', 'list', '--log-dir', file]));
    expect(bad.code).toBe(2);
  });

  it('lists a journal of another version as unreadable; show refuses it with exit 1', async () => {
    const base = tempDir();
    mkdirSync(path.join(base, 'future'));
    const header = { k: 'segment', v: 99, pid: 1, thread: 'main', at: Date.UTC(2026, 0, 1) };
    writeFileSync(
      path.join(base, 'future', 'journal-1-main.jsonl'),
      `${JSON.stringify(header)}\n${JSON.stringify(start('ag_futurefuture', 'later', 1))}\n`,
    );
    const list = await finished(runCli(['logs', 'list', '--log-dir', base]));
    expect(list.code, list.err).toBe(0);
    expect(list.out).toMatch(
      /^future .* unreadable: .*journal of version 99; this cohort reads version 1/m,
    );
    const show = await finished(runCli(['logs', 'show', 'ag_futurefuture', '--log-dir', base]));
    expect(show.code).toBe(1);
    expect(show.err).toMatch(/is a journal of version 99; this cohort reads version 1/);
  });
});

/** A run folder written by hand: one segment with a header and an agent's start. */
function handRun(id = 'live'): { root: string; dir: string; segment: string } {
  const base = tempDir('cohort-logs-hand-');
  const dir = path.join(base, id);
  mkdirSync(dir);
  const segment = path.join(dir, 'journal-4242-t1.jsonl');
  writeFileSync(
    segment,
    [
      { k: 'segment', v: 1, pid: 4242, thread: 't1', at: Date.UTC(2026, 0, 1) },
      start('ag_handhandhand', 'by hand', Date.UTC(2026, 0, 1)),
    ]
      .map((record) => `${JSON.stringify(record)}\n`)
      .join(''),
  );
  return { root: base, dir, segment };
}

function start(id: string, title: string, at: number) {
  return {
    k: 'start',
    a: id,
    inc: 0,
    at,
    meta: { id, title },
    m: [{ role: 'user', content: `prompt of ${title}` }],
  };
}

/**
 * A step as the journal has it: its response's record (the tool calls), then the record of the
 * answers to them; the last call failed.
 */
function step(id: string, calls: string[]): [string, string] {
  const response = {
    k: 'step',
    a: id,
    inc: 0,
    m: [
      {
        role: 'assistant',
        content: calls.map((name, index) => ({
          type: 'tool_use',
          id: `t${index}`,
          name,
          input: {},
        })),
      },
    ],
  };
  const answers = {
    k: 'step',
    a: id,
    inc: 0,
    m: [
      {
        role: 'user',
        content: calls.map((_, index) => ({
          type: 'tool_result',
          tool_use_id: `t${index}`,
          content: 'ok',
          ...(index === calls.length - 1 ? { is_error: true } : {}),
        })),
      },
    ],
  };
  return [`${JSON.stringify(response)}\n`, `${JSON.stringify(answers)}\n`];
}

describe('cohort logs tail', () => {
  it('prints the newest run by default, a line per record, in time order', async () => {
    const { code, out, err } = await finished(runCli(['logs', 'tail', '--log-dir', root]));
    expect(code, err).toBe(0);
    const lines = out.trimEnd().split('\n');
    // Four agents: each started, took its steps and has a result.
    expect(lines.filter((line) => / started$/.test(line))).toHaveLength(4);
    expect(lines.filter((line) => / result /.test(line))).toHaveLength(4);
    const ok = byTask.get('ok')!;
    expect(lines).toContain(`                         ${ok.id} [fine] step 1 → reply`);
    expect(
      lines.find((line) => line.includes(`${byTask.get('bad')!.id} [refused] result`)),
    ).toMatch(
      /^\d{4}-\d\d-\d\dT[\d:.]+Z ag_\w+ \[refused\] result failed \[bad_request\]: .*no · 1 steps · \d+ ms$/,
    );
    // Each agent's lines come in its order: started, its steps, its result.
    const mine = lines.filter((line) => line.includes(ok.id));
    expect(mine.map((line) => line.replace(/^.*\] /, '').replace(/ ·.*$/, ''))).toEqual([
      'started',
      'step 1 → reply',
      'step 1 ← reply',
      'result complete',
    ]);
  });

  it('a run with no records yet says so on stderr instead of printing nothing', async () => {
    const empty = tempDir('cohort-logs-root-');
    mkdirSync(path.join(empty, 'just-begun'));
    const { code, out, err } = await finished(
      runCli(['logs', 'tail', '--log-dir', empty, '--run', 'just-begun']),
    );
    expect(code, err).toBe(0);
    expect(out).toBe('');
    expect(err).toMatch(/run just-begun has no records yet .*--follow waits for them/);
  });

  it('--json prints the records as the journal holds them', async () => {
    const { code, out, err } = await finished(
      runCli(['logs', 'tail', '--log-dir', root, '--run', 'first', '--json']),
    );
    expect(code, err).toBe(0);
    const printed = jsonLines(out);
    const dir = path.join(root, 'first');
    const onDisk = readdirSync(dir)
      .filter((name) => name.startsWith('journal-'))
      .flatMap((name) => jsonLines(readFileSync(path.join(dir, name), 'utf8')));
    expect(printed).toHaveLength(onDisk.length);
    expect(printed).toEqual(expect.arrayContaining(onDisk));
    expect(printed.filter((record) => record.k === 'segment').length).toBeGreaterThan(0);
  });

  it('--follow prints records appended after it started, new segments too; SIGTERM ends it, exit 0', async () => {
    const hand = handRun();
    const follow = runCli(['logs', 'tail', '--follow', '--log-dir', hand.root, '--run', 'live']);
    await follow.waitFor(/ag_handhandhand \[by hand\] started\n/, 'stdout');
    // Appended after it started: a step written in two pieces (a line is taken only whole), then
    // a second segment, as another thread opens one.
    const [response, answers] = step('ag_handhandhand', ['echo', 'count']);
    appendFileSync(hand.segment, response.slice(0, 20));
    appendFileSync(hand.segment, response.slice(20));
    await follow.waitFor(/ag_handhandhand \[by hand\] step 1 → echo, count\n/, 'stdout');
    appendFileSync(hand.segment, answers);
    await follow.waitFor(/ag_handhandhand \[by hand\] step 1 ← echo, count ✗\n/, 'stdout');
    writeFileSync(
      path.join(hand.dir, 'journal-4242-t2.jsonl'),
      `${JSON.stringify(start('ag_secondsecond', 'second', Date.UTC(2026, 0, 2)))}\n`,
    );
    await follow.waitFor(
      /2026-01-02T00:00:00\.000Z ag_secondsecond \[second\] started\n/,
      'stdout',
    );
    follow.child.kill('SIGTERM');
    const { code, err } = await finished(follow);
    expect(code, err).toBe(0);
    expect(err).toBe('');
    expect(
      follow
        .stdout()
        .split('\n')
        .filter((text) => text.includes('step 1')),
    ).toHaveLength(2);
  });

  it('--follow of a run that starts after it: each record of the run, as a line', async () => {
    const base = tempDir('cohort-logs-follow-');
    mkdirSync(path.join(base, 'watched'));
    const follow = runCli(['logs', 'tail', '--follow', '--log-dir', base, '--run', 'watched']);
    const agent = runCli([
      'agent',
      scripted([{ calls: [{ name: 'echo', input: {} }] }, { reply: 'watched' }]),
      '--tools',
      TEST_TOOLS,
      '--title',
      'watched one',
      '--log-dir',
      base,
      '--run',
      'watched',
      '--threads',
      '1',
    ]);
    expect((await agent.exit).code, agent.stderr()).toBe(0);
    await follow.waitFor(/\[watched one\] result complete · 2 steps/, 'stdout');
    follow.child.kill('SIGINT');
    expect((await finished(follow)).code).toBe(0);
    expect(follow.stdout()).toMatch(
      /\[watched one\] started\n.*\[watched one\] step 1 → echo\n.*\[watched one\] step 1 ← echo\n.*\[watched one\] step 2 → reply\n.*\[watched one\] step 2 ← reply\n.*\[watched one\] result complete/,
    );
  });

  it('--follow whose stdout closes (| head) stops at its next line, quietly, exit 141', async () => {
    const hand = handRun();
    const follow = runCli(['logs', 'tail', '--follow', '--log-dir', hand.root]);
    follow.child.stdout!.destroy();
    // Whatever it wrote before it noticed, the next record's line finds the pipe closed.
    const more = setInterval(() => {
      appendFileSync(hand.segment, step('ag_handhandhand', ['echo']).join(''));
    }, 100);
    try {
      const { code, err } = await finished(follow);
      expect(code).toBe(141);
      expect(err).not.toMatch(/EPIPE|\n\s+at /);
    } finally {
      clearInterval(more);
    }
  });

  it('an empty root has no run to tail (exit 1); tail takes no ID (exit 2)', async () => {
    const empty = tempDir();
    const none = await finished(runCli(['logs', 'tail', '--log-dir', empty]));
    expect(none).toMatchObject({ code: 1, err: `cohort logs: no runs under ${empty}\n` });
    const extra = await finished(runCli(['logs', 'tail', 'ag_aaaaaaaaaaaa', '--log-dir', empty]));
    expect(extra.code).toBe(2);
  });
});

describe('what is read back is shown safely', () => {
  it('redacts a key-shaped string and neutralises control characters in show, tail and export', async () => {
    const key = `sk-ant-api03-${'K'.repeat(40)}`;
    const hand = handRun('unsafe');
    const id = 'ag_handhandhand';
    appendFileSync(
      hand.segment,
      `${JSON.stringify({
        k: 'step',
        a: id,
        inc: 0,
        m: [{ role: 'assistant', content: `my key ${key} \u001b[2Jcleared` }],
      })}\n`,
    );
    const show = await finished(runCli(['logs', 'show', id, '--log-dir', hand.root]));
    expect(show.code, show.err).toBe(0);
    expect(show.out).toContain('my key [redacted] \\x1b[2Jcleared');
    const tail = await finished(runCli(['logs', 'tail', '--log-dir', hand.root, '--json']));
    expect(tail.out).toContain('[redacted]');
    const into = tempDir();
    await finished(runCli(['logs', 'export', id, '--dir', into, '--log-dir', hand.root]));
    const transcript = readFileSync(path.join(into, id, 'transcript.jsonl'), 'utf8');
    for (const output of [show.out, tail.out, transcript]) {
      expect(output).not.toContain(key);
      expect(output).not.toContain('\u001b');
    }
  });
});
