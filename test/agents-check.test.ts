import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AgentFileError, AgentFolderError } from '../src/main/agents/definition.js';
import { checkEngine } from '../src/main/engine.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { tempDir } from './helpers.js';

// Which agent files are checked, and when: `cohort batch` only those its tasks name, `cohort
// run` and the library every file (saying how to leave a bad one out), and `cohort agents check`
// on demand. The CLI runs as a real child process on its built-in scripted model; the library
// checks run `checkEngine` itself, as `Engine.start` does before anything starts.

const GOOD = ['---', 'name: helper', 'description: Helps with small chores.', '---', 'Help.'];

/** Line 3 is a bad `maxSteps`. */
const BROKEN = ['---', 'name: broken', 'maxSteps: 0', 'description: Never loads.', '---', 'x'];

const BROKEN_PROBLEM = 'Expected `maxSteps` to be a whole number from 1 to 10000, got `0` (number)';

/** A `usd` limit and no `model`, like the README's `extractor`. */
const PRICED_BY_SPAWN = [
  '---',
  'name: frugal',
  'description: Spends little.',
  'budget: { usd: 0.05, steps: 6 }',
  '---',
  'Be brief.',
];

/** A fresh folder holding `files` (name to lines). */
function folderWith(files: Record<string, string[]>): string {
  const dir = tempDir('cohort-agents-');
  for (const [name, lines] of Object.entries(files)) {
    writeFileSync(path.join(dir, name), `${lines.join('\n')}\n`);
  }
  return dir;
}

function writeTasks(tasks: Record<string, unknown>[]): { tasks: string; out: string } {
  const dir = tempDir('cohort-batch-');
  const tasksFile = path.join(dir, 'tasks.jsonl');
  writeFileSync(tasksFile, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  return { tasks: tasksFile, out: path.join(dir, 'results.jsonl') };
}

describe.concurrent('cohort batch checks only the agent files its tasks name', () => {
  it('a bad file no task names stops nothing: the tasks run and complete', async () => {
    const dir = folderWith({ 'broken.md': BROKEN, 'helper.md': GOOD });
    const { tasks, out } = writeTasks([
      { id: 'plain', prompt: 'Summarise A' },
      { id: 'named', prompt: 'Summarise B', agent: 'helper' },
    ]);
    const run = runCli(['batch', tasks, '--out', out, '--agents', dir, '--quiet']);
    expect((await run.exit).code).toBe(0);
    const lines = readResultLines(out) as { taskId: string; outcome: string }[];
    expect(lines.map((line) => [line.taskId, line.outcome]).sort()).toEqual([
      ['named', 'complete'],
      ['plain', 'complete'],
    ]);
    expect(run.stderr()).not.toContain('broken.md');
  });

  it('a task naming a bad file is a bad line with the file’s FILE:LINE message; the rest run', async () => {
    const dir = folderWith({ 'broken.md': BROKEN, 'helper.md': GOOD });
    const { tasks, out } = writeTasks([
      { id: 'fine', prompt: 'Summarise A', agent: 'helper' },
      { id: 'bad', prompt: 'Summarise B', agent: 'broken' },
    ]);
    const run = runCli(['batch', tasks, '--out', out, '--agents', dir, '--quiet']);
    expect((await run.exit).code).toBe(1);
    expect(run.stderr()).toContain(
      `cohort batch: ${tasks}:2: ${path.join(dir, 'broken.md')}:3: ${BROKEN_PROBLEM}`,
    );
    const lines = readResultLines(out) as { taskId: string; outcome: string }[];
    expect(lines.map((line) => [line.taskId, line.outcome])).toEqual([['fine', 'complete']]);
  });

  it('--strict refuses to start over that bad line, and writes nothing', async () => {
    const dir = folderWith({ 'broken.md': BROKEN });
    const { tasks, out } = writeTasks([{ id: 'bad', prompt: 'x', agent: 'broken' }]);
    const run = runCli(['batch', tasks, '--out', out, '--agents', dir, '--strict']);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain(`${path.join(dir, 'broken.md')}:3: ${BROKEN_PROBLEM}`);
    expect(existsSync(out)).toBe(false);
  });
});

describe.concurrent('cohort run checks every agent file, since the model may name any', () => {
  it('a bad file exits 2 naming the file, its line, and how to leave it out; nothing runs', async () => {
    const workspace = tempDir('cohort-ws-');
    const folder = path.join(workspace, '.cohort', 'agents');
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, 'broken.md'), BROKEN.join('\n'));
    writeFileSync(path.join(folder, 'helper.md'), GOOD.join('\n'));
    const logRoot = tempDir('cohort-logs-');
    const run = runCli(['run', 'hello', '--workspace', workspace, '--log-dir', logRoot]);
    expect((await run.exit).code).toBe(2);
    const lines = run.stderr().trimEnd().split('\n');
    expect(lines).toContain(`cohort: ${path.join(folder, 'broken.md')}:3: ${BROKEN_PROBLEM}`);
    const wayOut = lines.at(-1) ?? '';
    expect(wayOut).toContain(`Every agent file in ${folder} is checked before anything starts`);
    expect(wayOut).toContain('move it out of that folder');
    expect(wayOut).toContain('give --agents a folder without it');
    expect(wayOut).toContain(`cohort agents check ${folder}`);
    // The file's own field names are kept, and the library's option name is not shown.
    expect(run.stderr()).not.toContain('--max-steps');
    expect(run.stderr()).not.toContain('agentsDir');
    // Refused before the built-in model started or a run folder was made.
    expect(run.stderr()).not.toContain('built-in scripted model');
    expect(readdirSync(logRoot)).toEqual([]);
  });

  it('--agents another folder is the way out: the same command then goes ahead', async () => {
    const workspace = tempDir('cohort-ws-');
    const folder = path.join(workspace, '.cohort', 'agents');
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, 'broken.md'), BROKEN.join('\n'));
    const other = folderWith({ 'helper.md': GOOD });
    // `cohort agent` checks every file as `cohort run` does, and runs one child, not a session.
    const run = runCli(['agent', 'hello', '--workspace', workspace, '--agents', other, '--json']);
    expect((await run.exit).code).toBe(0);
    expect(JSON.parse(run.stdout())).toMatchObject({ outcome: 'complete' });
  });
});

describe.concurrent('the library checks every file unless told to check only what spawns name', () => {
  it('checkEngine (and so Engine.start) rejects with an AgentFolderError saying how to leave it out', async () => {
    const dir = folderWith({ 'broken.md': BROKEN, 'helper.md': GOOD });
    const error = await checkEngine({ agentsDir: dir }).then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(error).toBeInstanceOf(AgentFolderError);
    const folderError = error as AgentFolderError;
    expect(folderError).toMatchObject({
      file: path.join(dir, 'broken.md'),
      line: 3,
      problem: BROKEN_PROBLEM,
      folder: dir,
    });
    expect(folderError.message).toBe(
      `${path.join(dir, 'broken.md')}:3: ${BROKEN_PROBLEM}\nEvery agent file in ${dir} is checked before anything starts, used or not, since an agent may name any of them: fix this one, move it out of that folder, or set \`agentsDir\` to a folder without it`,
    );
  });

  it("agentFileCheck: 'spawn' keeps the good files and refuses only a spawn naming the bad one", async () => {
    const dir = folderWith({ 'broken.md': BROKEN, 'helper.md': GOOD });
    const check = await checkEngine({ agentsDir: dir, agentFileCheck: 'spawn' });
    expect(check.agents.map((agent) => agent.name)).toEqual(['helper']);
    expect(check.agentFiles.map((entry) => [entry.name, entry.error?.line ?? 'ok'])).toEqual([
      ['broken', 3],
      ['helper', 'ok'],
    ]);
    expect(() => check.checkAgent({ prompt: 'x', agent: 'helper' })).not.toThrow();
    expect(() => check.checkAgent({ prompt: 'x', agent: 'broken' })).toThrow(AgentFileError);
    expect(() => check.checkAgent({ prompt: 'x', agent: 'broken' })).toThrow(
      `${path.join(dir, 'broken.md')}:3: ${BROKEN_PROBLEM}`,
    );
    await expect(checkEngine({ agentsDir: dir, agentFileCheck: 'later' as never })).rejects.toThrow(
      /^Expected `agentFileCheck` to be `start` or `spawn`, got/,
    );
  });

  it('a file’s usd limit without a model is checked against the model a spawn runs on, not at start', async () => {
    const dir = folderWith({ 'frugal.md': PRICED_BY_SPAWN });
    // An unpriced engine model (the README's library example uses `any`) starts.
    const check = await checkEngine({ agentsDir: dir, provider: { model: 'any' } });
    expect(check.agents.map((agent) => agent.name)).toEqual(['frugal']);
    // A spawn of it on that model could never hold the limit: refused, at the file's budget line.
    expect(() => check.checkAgent({ prompt: 'x', agent: 'frugal' })).toThrow(
      new RegExp(
        `^${escapeRegExp(path.join(dir, 'frugal.md'))}:4: Expected a price for model \`any\` to hold a \`budget\\.usd\` limit, got none`,
      ),
    );
    // On a priced model, or with the spawn's own limit on another dimension, it passes.
    expect(() =>
      check.checkAgent({ prompt: 'x', agent: 'frugal', model: 'claude-sonnet-4-5' }),
    ).not.toThrow();
    // A file that names an unpriced model itself is still refused before anything starts.
    const named = folderWith({
      'frugal.md': [...PRICED_BY_SPAWN.slice(0, 4), 'model: no-price-model', '---', 'Be brief.'],
    });
    await expect(checkEngine({ agentsDir: named })).rejects.toThrow(
      new RegExp(
        `^${escapeRegExp(path.join(named, 'frugal.md'))}:4: Expected a price for model \`no-price-model\``,
      ),
    );
  });
});

describe.concurrent('cohort agents check', () => {
  it('a good folder: each file ok with its description, a summary, exit 0', async () => {
    const dir = folderWith({ 'helper.md': GOOD, 'frugal.md': PRICED_BY_SPAWN });
    const run = runCli(['agents', 'check', dir]);
    expect((await run.exit).code).toBe(0);
    expect(run.stdout().split('\n')).toEqual([
      'ok   frugal  Spends little.',
      'ok   helper  Helps with small chores.',
      `cohort agents: 2 agent files in ${dir}, all good`,
      '',
    ]);
  });

  it('a bad folder: every bad file with its FILE:LINE message, not only the first; exit 1', async () => {
    const unknownTool = ['---', 'name: lost', 'description: x', 'tools: teleport', '---', 'x'];
    const dir = folderWith({ 'broken.md': BROKEN, 'helper.md': GOOD, 'lost.md': unknownTool });
    const run = runCli(['agents', 'check', dir]);
    expect((await run.exit).code).toBe(1);
    const lines = run.stdout().trimEnd().split('\n');
    expect(lines[0]).toBe(`bad  broken  ${path.join(dir, 'broken.md')}:3: ${BROKEN_PROBLEM}`);
    expect(lines[1]).toBe('ok   helper  Helps with small chores.');
    expect(lines[2]).toMatch(
      new RegExp(
        `^bad {2}lost {4}${escapeRegExp(path.join(dir, 'lost.md'))}:4: Expected \`tools\` to name known tools \\(.*\`read_file\`.*\\), got \`teleport\`$`,
      ),
    );
    expect(lines[3]).toBe(`cohort agents: 2 of 3 agent files in ${dir} are bad`);
  });

  it('--json: one object with each file, for scripts', async () => {
    const dir = folderWith({ 'broken.md': BROKEN, 'helper.md': GOOD });
    const run = runCli(['agents', 'check', dir, '--json']);
    expect((await run.exit).code).toBe(1);
    expect(JSON.parse(run.stdout())).toEqual({
      folder: dir,
      files: [
        {
          name: 'broken',
          file: path.join(dir, 'broken.md'),
          ok: false,
          line: 3,
          problem: BROKEN_PROBLEM,
          message: `${path.join(dir, 'broken.md')}:3: ${BROKEN_PROBLEM}`,
        },
        {
          name: 'helper',
          file: path.join(dir, 'helper.md'),
          ok: true,
          description: 'Helps with small chores.',
        },
      ],
      good: 1,
      bad: 1,
    });
  });

  it('without DIR: .cohort/agents under --workspace; an empty folder is all good', async () => {
    const workspace = tempDir('cohort-ws-');
    const folder = path.join(workspace, '.cohort', 'agents');
    mkdirSync(folder, { recursive: true });
    const run = runCli(['agents', 'check', '--workspace', workspace]);
    expect((await run.exit).code).toBe(0);
    expect(run.stdout()).toBe(`cohort agents: no agent files (NAME.md) in ${folder}\n`);
  });

  it('a missing folder and a missing subcommand are usage errors (exit 2)', async () => {
    const missing = path.join(tempDir(), 'no-such-folder');
    const run = runCli(['agents', 'check', missing]);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toBe(
      `cohort: Expected DIR to be a folder of agent files (NAME.md), got \`${missing}\`, which does not exist\n`,
    );
    expect(run.stdout()).toBe('');
    const bare = runCli(['agents']);
    expect((await bare.exit).code).toBe(2);
    expect(bare.stderr()).toContain('Expected a subcommand (check), got nothing');
  });

  it('cohort help agents prints its usage with the exit codes; the command list names it', async () => {
    const help = runCli(['help', 'agents']);
    expect((await help.exit).code).toBe(0);
    expect(help.stdout()).toMatch(/^Usage: cohort agents check \[DIR\]/);
    expect(help.stdout()).toContain('Exit codes:\n  0  every file is good');
    const top = runCli(['--help']);
    expect((await top.exit).code).toBe(0);
    expect(top.stdout()).toContain('agents check [DIR]');
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
