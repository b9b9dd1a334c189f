import { spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './cli-helpers.js';
import { agentCall, readHistory, readJournal, readResult, scripted, tempDir } from './helpers.js';

interface ResultLine {
  taskId: string;
  id: string;
  outcome: string;
  logDir?: string;
  replyFile?: string;
}

function readLines(file: string): ResultLine[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as ResultLine);
}

/** Six tasks on the built-in scripted model: four reply, two fail with a 400 (not retried). */
function mixedTasks(): string {
  const ok = (id: string) => ({ id, prompt: scripted([{ reply: `done ${id}` }]) });
  const failing = (id: string) => ({
    id,
    prompt: scripted([{ error: { status: 400, message: `refused ${id}` } }]),
  });
  const tasks = [ok('a'), failing('b'), ok('c'), ok('d'), failing('e'), ok('f')];
  const file = path.join(tempDir(), 'tasks.jsonl');
  writeFileSync(file, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  return file;
}

/** Runs `batch` on the mixed tasks with `flags`; returns the result lines and the log folder. */
async function batch(flags: string[]): Promise<{ lines: ResultLine[]; logDir: string }> {
  const tasks = mixedTasks();
  const out = path.join(tempDir(), 'results.jsonl');
  // A run folder the run makes itself (`--log-dir` is the root that holds it), so a run that
  // keeps nothing can be seen to remove it.
  const root = tempDir('cohort-logs-');
  const logDir = path.join(root, 'run');
  // One worker thread: the policy is the engine's, whatever the threads (and each costs a start).
  const run = runCli([
    'batch',
    tasks,
    '--out',
    out,
    '--log-dir',
    root,
    '--run',
    'run',
    '--quiet',
    '--threads',
    '1',
    ...flags,
  ]);
  const exit = await run.exit;
  expect(exit.code, run.stderr()).toBe(1); // two tasks failed
  const lines = readLines(out);
  expect(lines.map((line) => line.outcome).sort()).toEqual([
    'complete',
    'complete',
    'complete',
    'complete',
    'failed',
    'failed',
  ]);
  return { lines, logDir };
}

/** The agents whose records the journal in `dir` holds; none when the folder is gone. */
function journaled(dir: string): string[] {
  return existsSync(dir) ? [...readJournal(dir).keys()].sort() : [];
}

describe('--logs all|failed|none', () => {
  it('failed: the journal keeps only the failed agents, and only their lines name it', async () => {
    const { lines, logDir } = await batch(['--logs', 'failed']);
    const failed = lines.filter((line) => line.outcome === 'failed');
    expect(journaled(logDir)).toEqual(failed.map((line) => line.id).sort());
    for (const line of lines) {
      if (line.outcome === 'failed') {
        expect(line.logDir).toBe(logDir);
        expect(readResult(logDir, line.id)).toMatchObject({
          id: line.id,
          outcome: 'failed',
          code: 'bad_request',
        });
      } else {
        expect(line).not.toHaveProperty('logDir');
        expect(line).not.toHaveProperty('replyFile');
      }
    }
  });

  it('none: keeps no record, not even the run folder, and no line names one', async () => {
    const { lines, logDir } = await batch(['--logs', 'none']);
    expect(existsSync(logDir)).toBe(false);
    for (const line of lines) {
      expect(line).not.toHaveProperty('logDir');
      expect(line).not.toHaveProperty('replyFile');
    }
  });

  it('all (the default): the journal keeps every agent, in a few files, and every line names it', async () => {
    const { lines, logDir } = await batch([]);
    expect(journaled(logDir)).toEqual(lines.map((line) => line.id).sort());
    // One segment for main and one for the one worker thread: no file per agent.
    expect(readdirSync(logDir).length).toBeLessThanOrEqual(2);
    for (const line of lines) {
      expect(line.logDir).toBe(logDir);
      expect(readHistory(line).messages.length).toBeGreaterThan(0);
      // Short replies are whole in the line: nothing spills.
      expect(line).not.toHaveProperty('replyFile');
    }
  });

  it('agent --logs none prints a result without a folder and leaves none', async () => {
    const root = tempDir('cohort-logs-');
    const run = runCli([
      'agent',
      scripted([{ reply: 'hello' }]),
      '--json',
      '--logs',
      'none',
      '--log-dir',
      root,
      '--threads',
      '1',
    ]);
    expect((await run.exit).code, run.stderr()).toBe(0);
    const result = JSON.parse(run.stdout());
    expect(result).toMatchObject({ outcome: 'complete', text: 'hello' });
    expect(result).not.toHaveProperty('logDir');
    // The run's own folder (<time>-<pid>) is gone: the root holds nothing.
    expect(readdirSync(root)).toEqual([]);
  });

  it('run --logs failed: the root follows the policy, and the summary names the folder it kept', async () => {
    const root = tempDir('cohort-logs-');
    const logDir = path.join(root, 'kept');
    const prompt = scripted([
      {
        calls: [
          agentCall('fine', [{ reply: 'ok' }]),
          agentCall('broken', [{ error: { status: 400, message: 'refused' } }]),
        ],
      },
      { text: 'Both came back.' },
    ]);
    const run = runCli([
      'run',
      prompt,
      '--json',
      '--logs',
      'failed',
      '--log-dir',
      root,
      '--run',
      'kept',
      '--threads',
      '1',
    ]);
    expect((await run.exit).code, run.stderr()).toBe(0);
    const events = run
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const settled = events
      .filter((event) => event.type === 'agent-settle')
      .map((event) => event.result as ResultLine & { title: string });
    expect(settled.map((result) => [result.title, result.outcome]).sort()).toEqual([
      ['broken', 'failed'],
      ['fine', 'complete'],
    ]);
    const broken = settled.find((result) => result.title === 'broken')!;
    expect(journaled(logDir)).toEqual([broken.id]);
    expect(broken.logDir).toBe(logDir);
    expect(settled.find((result) => result.title === 'fine')).not.toHaveProperty('logDir');
    expect(events.at(-1)).toMatchObject({ type: 'final', outcome: 'ready', logDir });
  });

  it('refuses an unknown policy with exit 2, naming the flag, what it takes and what arrived', async () => {
    const run = runCli(['agent', 'hi', '--logs', 'some']);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain('Expected `--logs` to be one of all, failed, none, got `some`');
  });
});

const DAY_MS = 86_400_000;

/** A pid that is surely not running: a child that has already exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  return child.pid!;
}

/** A run folder named as the engine names them, holding one file, everything `ageMs` old. */
function makeRun(
  root: string,
  pid: number,
  ageMs: number,
  stamp = '2024-05-01T10-00-00-000Z',
): string {
  const dir = path.join(root, `${stamp}-${pid}`);
  mkdirSync(path.join(dir, 'ag_aaaaaaaaaaaa'), { recursive: true });
  const file = path.join(dir, 'ag_aaaaaaaaaaaa', 'result.json');
  writeFileSync(file, '{"outcome":"complete"}\n'.repeat(200));
  age([file, path.join(dir, 'ag_aaaaaaaaaaaa'), dir], ageMs);
  return dir;
}

/** Sets the times of each path (of a link itself, not what it points to) to `ageMs` ago. */
function age(paths: string[], ageMs: number): void {
  const when = new Date(Date.now() - ageMs);
  for (const target of paths) {
    if (lstatSync(target).isSymbolicLink()) lutimesSync(target, when, when);
    else utimesSync(target, when, when);
  }
}

/**
 * A log root with one run of each kind: old and dead (goes), recent and dead, old but alive
 * (this process), old but with one recent file inside, an old folder not named like a run, an
 * old run that holds a link to a file outside, and a link named like a run pointing outside.
 */
function makeRoot() {
  const root = tempDir('cohort-root-');
  const outside = tempDir('cohort-outside-');
  const outsideFile = path.join(outside, 'precious.txt');
  writeFileSync(outsideFile, 'keep me');
  const dead = deadPid();
  const oldDead = makeRun(root, dead, 10 * DAY_MS);
  const linking = makeRun(root, dead, 10 * DAY_MS, '2024-05-02T10-00-00-000Z');
  symlinkSync(outsideFile, path.join(linking, 'link'));
  age([path.join(linking, 'link'), linking], 10 * DAY_MS);
  const recentDead = makeRun(root, dead, 60_000, '2024-05-03T10-00-00-000Z');
  const oldLive = makeRun(root, process.pid, 10 * DAY_MS);
  const touched = makeRun(root, dead, 10 * DAY_MS, '2024-05-04T10-00-00-000Z');
  const fresh = path.join(touched, 'ag_aaaaaaaaaaaa', 'transcript.jsonl');
  writeFileSync(fresh, '{}\n');
  age([fresh], 60_000);
  age([path.join(touched, 'ag_aaaaaaaaaaaa'), touched], 10 * DAY_MS);
  const notARun = path.join(root, 'notes');
  mkdirSync(notARun);
  age([notARun], 10 * DAY_MS);
  const linkAsRun = path.join(root, `2024-05-05T10-00-00-000Z-${dead}`);
  symlinkSync(outside, linkAsRun);
  age([outside, linkAsRun], 10 * DAY_MS);
  return { root, outsideFile, oldDead, linking, recentDead, oldLive, touched, notARun, linkAsRun };
}

describe('cohort logs prune', () => {
  it('removes only old folders of dead runs, follows no link, and --dry-run removes nothing', async () => {
    const at = makeRoot();
    const before = readdirSync(at.root).sort();
    const dry = runCli([
      'logs',
      'prune',
      '--older-than',
      '168h',
      '--log-dir',
      at.root,
      '--dry-run',
    ]);
    expect((await dry.exit).code, dry.stderr()).toBe(0);
    expect(readdirSync(at.root).sort()).toEqual(before);
    expect(dry.stdout()).toContain(`would remove ${at.oldDead}`);
    expect(dry.stdout()).toContain(`would remove ${at.linking}`);
    expect(dry.stdout()).toMatch(/would remove 2 run folder\(s\), freeing \d/);

    const run = runCli(['logs', 'prune', '--older-than', '168h', '--log-dir', at.root]);
    expect((await run.exit).code, run.stderr()).toBe(0);
    expect(existsSync(at.oldDead)).toBe(false);
    expect(existsSync(at.linking)).toBe(false);
    for (const kept of [at.recentDead, at.oldLive, at.touched, at.notARun]) {
      expect(existsSync(kept)).toBe(true);
    }
    // The link named like a run is still there, and so is everything outside the root.
    expect(lstatSync(at.linkAsRun).isSymbolicLink()).toBe(true);
    expect(readFileSync(at.outsideFile, 'utf8')).toBe('keep me');
    expect(run.stdout()).toContain(`removed ${at.oldDead}`);
    expect(run.stdout()).toContain(`kept ${at.oldLive} (its run is alive)`);
    expect(run.stdout()).toMatch(/removed 2 run folder\(s\), freed \d+(\.\d)? KB/);
  });

  it('--json reports each folder removed and the bytes freed; a second prune finds nothing', async () => {
    const at = makeRoot();
    const run = runCli(['logs', 'prune', '--older-than', '1h', '--log-dir', at.root, '--json']);
    expect((await run.exit).code, run.stderr()).toBe(0);
    const report = JSON.parse(run.stdout());
    // Recent: the run a minute old, and the old run with a file written a minute ago.
    expect(report).toMatchObject({ type: 'prune', root: at.root, dryRun: false, recent: 2 });
    expect(report.live).toEqual([at.oldLive]);
    const removed = report.removed.map((folder: { path: string }) => folder.path).sort();
    expect(removed).toEqual([at.oldDead, at.linking].sort());
    expect(report.bytes).toBeGreaterThan(0);
    expect(report.bytes).toBe(
      report.removed.reduce((sum: number, folder: { bytes: number }) => sum + folder.bytes, 0),
    );
    const again = runCli(['logs', 'prune', '--older-than', '1h', '--log-dir', at.root, '--json']);
    expect((await again.exit).code).toBe(0);
    expect(JSON.parse(again.stdout())).toMatchObject({ removed: [], bytes: 0 });
  });

  it('takes ages past a timer’s limit (30d), and says so when given one run’s own folder', async () => {
    const at = makeRoot();
    const month = runCli(['logs', 'prune', '--older-than', '30d', '--log-dir', at.root, '--json']);
    expect((await month.exit).code, month.stderr()).toBe(0);
    // Nothing here is a month old: the oldest folders are ten days old.
    expect(JSON.parse(month.stdout())).toMatchObject({ removed: [] });

    // One run's folder, of this cohort (a journal) or an older one (agent folders).
    const runFolder = tempDir();
    writeFileSync(path.join(runFolder, 'journal-4711-main.jsonl'), '');
    const oldRunFolder = tempDir();
    mkdirSync(path.join(oldRunFolder, 'ag_abc123'));
    for (const folder of [runFolder, oldRunFolder]) {
      const wrong = runCli(['logs', 'prune', '--older-than', '1ms', '--log-dir', folder]);
      expect((await wrong.exit).code).toBe(2);
      expect(wrong.stderr()).toMatch(/which is the folder of one run/);
    }
  });

  it('usage: help exits 0 with the exit codes; a missing subcommand or duration exits 2', async () => {
    const help = runCli(['logs', '--help']);
    expect((await help.exit).code).toBe(0);
    expect(help.stdout()).toContain('cohort logs prune --older-than DURATION');
    expect(help.stdout()).toMatch(/Exit codes:[\s\S]*2 {2}a usage error/);
    const cases: [string[], RegExp][] = [
      [['logs'], /Expected a subcommand \(list, show, tail, export, prune\), got nothing/],
      [['logs', 'tidy'], /Expected a subcommand \(list, show, tail, export, prune\), got `tidy`/],
      [['logs', 'prune'], /Expected `--older-than DURATION`/],
      [['logs', 'prune', '--older-than', 'a week'], /Expected `--older-than` to be an age/],
    ];
    for (const [args, message] of cases) {
      const run = runCli(args);
      expect((await run.exit).code, args.join(' ')).toBe(2);
      expect(run.stderr()).toMatch(message);
    }
  });
});
