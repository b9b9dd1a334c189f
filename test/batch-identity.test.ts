/**
 * A rerun of `cohort batch` tells a task that is the one that ran from a task that only kept
 * its id: each result line carries the hash of its task as it ran, and a task changed since
 * stops the rerun until `--rerun-changed` or `--keep-changed` says what to do. The built CLI in
 * child processes, the scripted model over HTTP, real files.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { batchJobId } from '../src/main/runners/queue/job.js';
import { type ScriptedModel, scriptBlock, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { readJournal, scripted, TEST_TOOLS, tempDir } from './helpers.js';

let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await model.close();
});

interface Line {
  taskId: string;
  outcome: string;
  text: string;
  value?: unknown;
  taskHash?: string;
}

/** A folder with a tasks file (one JSON line per object, written as given) and a results path. */
function batchDir(): { dir: string; tasks: string; out: string } {
  const dir = tempDir();
  return { dir, tasks: path.join(dir, 'tasks.jsonl'), out: path.join(dir, 'results.jsonl') };
}

function writeLines(file: string, lines: readonly object[]): void {
  writeFileSync(file, `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`);
}

/** Runs `cohort batch TASKS --out OUT` on the scripted model; resolves with its exit and output. */
async function batch(tasks: string, out: string, ...extra: string[]) {
  const run = runCli(['batch', tasks, '--out', out, '--base-url', model.url, ...extra]);
  const { code } = await run.exit;
  return { code, stderr: run.stderr(), stdout: run.stdout() };
}

function lines(out: string): Line[] {
  return readResultLines(out) as Line[];
}

// Each test has its own files and counts nothing on the shared model: they run side by side.
describe.concurrent('cohort batch: task identity on a rerun', () => {
  it('same ids with new prompts: exit 2 naming 20 and how many more, nothing run or written; --rerun-changed runs them and replaces their lines', async () => {
    const { tasks, out } = batchDir();
    const ids = Array.from({ length: 23 }, (_, index) => `t${index}`);
    const week = (word: string, id: string) =>
      // t22 is the same both weeks; the others get new prompts.
      ({ id, prompt: scripted([{ reply: `${id === 't22' ? 'old' : word} ${id}` }]) });
    writeLines(
      tasks,
      ids.map((id) => week('old', id)),
    );
    const first = await batch(tasks, out, '--quiet');
    expect(first.code, first.stderr).toBe(0);
    expect(lines(out)).toHaveLength(23);
    for (const line of lines(out)) expect(line.taskHash).toMatch(/^sha256:[0-9a-f]{64}$/);
    const before = readFileSync(out);

    writeLines(
      tasks,
      ids.map((id) => week('new', id)),
    );
    const refused = await batch(tasks, out);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toContain('got 22 changed since');
    // The first 20 in the tasks file's order, then how many more; the unchanged task is not named.
    expect(refused.stderr).toContain('"t0", "t1", "t2"');
    expect(refused.stderr).toContain('"t19" and 2 more');
    expect(refused.stderr).not.toContain('"t20"');
    expect(refused.stderr).not.toContain('"t22"');
    expect(refused.stderr).toMatch(/--rerun-changed .*--keep-changed/);
    // Nothing started, nothing written.
    expect(refused.stderr).not.toMatch(/journal in/);
    expect(readFileSync(out).equals(before)).toBe(true);

    const rerun = await batch(tasks, out, '--rerun-changed', '--json');
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stderr).toMatch(/23 task\(s\), 1 already in .*22 to run \(22 changed, to rerun\)/);
    expect(JSON.parse(rerun.stdout)).toMatchObject({ changed: 22, rerunChanged: 22, ran: 22 });
    const after = lines(out);
    // Exactly one line per task, the changed ones from their new prompts.
    expect(after.map((line) => line.taskId).sort()).toEqual([...ids].sort());
    for (const line of after) {
      expect(line.text).toBe(`${line.taskId === 't22' ? 'old' : 'new'} ${line.taskId}`);
    }

    // Now the lines are the tasks as they are: nothing to run.
    const again = await batch(tasks, out);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/23 already in .*0 to run/);
  });

  it('editing the agent file a task names changes the task; a field outside the hash does not', async () => {
    const { dir, tasks, out } = batchDir();
    const agents = path.join(dir, 'agents');
    const file = path.join(agents, 'helper.md');
    const agentFile = (reply: string, extra = '') =>
      `---\nname: helper\ndescription: Answers.\n${extra}---\nYou answer.\n\n${scriptBlock([{ reply }])}\n`;
    mkdirSync(agents);
    writeFileSync(file, agentFile('old agent'));
    writeLines(tasks, [{ id: 'x', agent: 'helper', prompt: 'Go.' }]);
    const first = await batch(tasks, out, '--agents', agents, '--quiet');
    expect(first.code, first.stderr).toBe(0);

    // Its timeout is how long it may run, not what it asks: unchanged.
    writeFileSync(file, agentFile('old agent', 'timeout: 60000\n'));
    const timeout = await batch(tasks, out, '--agents', agents);
    expect(timeout.code, timeout.stderr).toBe(0);
    expect(timeout.stderr).toMatch(/1 already in .*0 to run/);

    // Its body is the task's system prompt: changed.
    writeFileSync(file, agentFile('new agent'));
    const edited = await batch(tasks, out, '--agents', agents);
    expect(edited.code, edited.stderr).toBe(2);
    expect(edited.stderr).toContain('got 1 changed since');
    expect(edited.stderr).toContain('"x"');

    const rerun = await batch(tasks, out, '--agents', agents, '--rerun-changed');
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(lines(out).map((line) => line.text)).toEqual(['new agent']);
  });

  it('the order of the keys, the title, the cache and the patience are not the task; --model is, and --keep-changed keeps its line', async () => {
    const { tasks, out } = batchDir();
    const prompt = scripted([{ reply: 'first week' }]);
    writeLines(tasks, [{ id: 'k', prompt, outputSchema: { type: 'string', minLength: 1 } }]);
    expect((await batch(tasks, out, '--quiet')).code).toBe(0);
    const before = readFileSync(out);

    writeFileSync(
      tasks,
      `{"outputSchema":{"minLength":1,"type":"string"},"title":"a new title","cache":"off","patienceMs":5000,"prompt":${JSON.stringify(prompt)},"id":"k"}\n`,
    );
    const reordered = await batch(tasks, out);
    expect(reordered.code, reordered.stderr).toBe(0);
    expect(reordered.stderr).toMatch(/1 already in .*0 to run/);

    // The model a task runs on comes from --model when its line names none.
    const otherModel = await batch(tasks, out, '--model', 'another-model');
    expect(otherModel.code, otherModel.stderr).toBe(2);
    expect(otherModel.stderr).toContain('got 1 changed since');
    expect(otherModel.stderr).toContain('"k"');

    // --keep-changed: the old line stays, as done, byte for byte.
    const kept = await batch(tasks, out, '--model', 'another-model', '--keep-changed', '--json');
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stderr).toMatch(/1 changed task\(s\) keep their old line \(--keep-changed\): "k"/);
    expect(JSON.parse(kept.stdout)).toMatchObject({ changed: 1, rerunChanged: 0, ran: 0 });
    expect(readFileSync(out).equals(before)).toBe(true);
    expect(lines(out)[0]?.value).toBe('first week');
  });

  it('lines an older cohort wrote without a hash are taken as unchanged, said once', async () => {
    const { tasks, out } = batchDir();
    writeLines(tasks, [
      { id: 'a', prompt: scripted([{ reply: 'A' }]) },
      { id: 'b', prompt: scripted([{ reply: 'B' }]) },
    ]);
    expect((await batch(tasks, out, '--quiet')).code).toBe(0);
    // As an older cohort wrote them: no taskHash.
    writeLines(
      out,
      lines(out).map(({ taskHash: _hash, ...line }) => line),
    );
    const before = readFileSync(out);
    writeLines(tasks, [
      { id: 'a', prompt: scripted([{ reply: 'A, changed' }]) },
      { id: 'b', prompt: scripted([{ reply: 'B, changed' }]) },
    ]);

    const rerun = await batch(tasks, out, '--json');
    expect(rerun.code, rerun.stderr).toBe(0);
    const said = rerun.stderr.match(/have no task hash/g) ?? [];
    expect(said).toHaveLength(1);
    expect(rerun.stderr).toContain(
      `2 line(s) in ${out} have no task hash (written by an older cohort); treating them as unchanged`,
    );
    expect(JSON.parse(rerun.stdout)).toMatchObject({ unhashed: 2, changed: 0, ran: 0 });
    expect(readFileSync(out).equals(before)).toBe(true);
  });

  it('a rerun left with only a failed line says so, names --retry-failed and exits 1', async () => {
    const { tasks, out } = batchDir();
    writeLines(tasks, [
      { id: 'good', prompt: scripted([{ reply: 'fine' }]) },
      {
        id: 'bad',
        prompt: scripted([{ error: { status: 400, message: 'this request is not allowed' } }]),
      },
    ]);
    expect((await batch(tasks, out, '--quiet')).code).toBe(1);

    const rerun = await batch(tasks, out);
    expect(rerun.code, rerun.stderr).toBe(1);
    expect(rerun.stderr).toMatch(/2 already in .*0 to run/);
    expect(rerun.stderr).toContain(
      '1 complete, 1 failed (line kept); 0 to run, so the exit code is 1',
    );
    expect(rerun.stderr).toContain('Rerun with --retry-failed to run the failed ones again');
  });

  it('--rerun-changed with --keep-changed is a usage error: exit 2, nothing read or run', async () => {
    const { tasks, out } = batchDir();
    writeLines(tasks, [{ id: 'a', prompt: 'A' }]);
    const both = await batch(tasks, out, '--rerun-changed', '--keep-changed');
    expect(both.code).toBe(2);
    expect(both.stderr).toContain(
      'Expected at most one of `--rerun-changed` (run the changed tasks again) and `--keep-changed` (keep their old lines), got both',
    );
    expect(() => readFileSync(out)).toThrow();
  });

  it('a task stopped mid-way and changed before the rerun starts over from its new prompt', async () => {
    const { dir, tasks, out } = batchDir();
    const counter = path.join(dir, 'count.txt');
    const slow = scripted([
      { calls: [{ name: 'count', input: { file: counter } }] },
      // Long enough that the kill always finds it in this step, however loaded the machine.
      { delayMs: 60_000, reply: 'never' },
    ]);
    writeLines(tasks, [{ id: 'long', prompt: slow }]);
    const first = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--base-url',
      model.url,
      '--tools',
      TEST_TOOLS,
    ]);
    // Killed in its second step, with its first step in the journal.
    await vi.waitFor(
      () => {
        const runDir = readFileSync(`${out}.journals`, 'utf8').trim().split('\n').at(-1)!;
        const [history] = readJournal(runDir).values();
        expect(history?.messages).toHaveLength(3);
      },
      { timeout: 30_000 },
    );
    first.child.kill('SIGKILL');
    await first.exit;

    writeLines(tasks, [{ id: 'long', prompt: scripted([{ reply: 'fresh start' }]) }]);
    const rerun = await batch(tasks, out, '--tools', TEST_TOOLS);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stderr).not.toMatch(/going on from where they stopped/);
    const [line] = lines(out);
    expect(line).toMatchObject({ taskId: 'long', outcome: 'complete', text: 'fresh start' });
  });
});

describe('batchJobId', () => {
  it('one task, one job id on every run; a new version of it is a new job', () => {
    const out = '/data/results.jsonl';
    expect(batchJobId(out, 'a/b c', '0123456789ab')).toBe(batchJobId(out, 'a/b c', '0123456789ab'));
    expect(batchJobId(out, 'a/b c', '0123456789ab')).not.toBe(
      batchJobId(out, 'a/b c', 'ba9876543210'),
    );
    expect(batchJobId(out, 'a/b c', '0123456789ab')).toMatch(
      /^b[0-9a-f]{16}-a%2Fb%20c@0123456789ab$/,
    );
    expect(batchJobId(out, 'a/b c', '0123456789ab')).not.toContain(':');
  });
});
