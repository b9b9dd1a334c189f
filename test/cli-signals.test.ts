import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_INITIAL_CONCURRENCY } from '../src/shared/governor/governor.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, requests, runCli, writeTasks } from './cli-helpers.js';
import { scripted, tempDir } from './helpers.js';

// Signals and closed pipes, sent to the built CLI as a real child process. `hanging` never
// answers (60 s to first token), so a signal always finds agents in flight; `fast` answers at once.
let hanging: ScriptedModel;
let fast: ScriptedModel;

beforeAll(async () => {
  hanging = await startScriptedModel({ port: 0, ttftMs: 60_000 });
  fast = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await hanging.close();
  await fast.close();
});

/**
 * A batch of 20 tasks on the model that never answers, five in flight. The tasks file's name has
 * a space, so the resume hint has to quote it.
 */
async function batchInFlight(extra: string[] = []) {
  const tasks = writeTasks(20, 'tasks with space.jsonl');
  const out = path.join(tempDir(), 'results.jsonl');
  // Five tasks run; the governor's slow start lets the first few of their requests out.
  const seen = requests(hanging, DEFAULT_INITIAL_CONCURRENCY);
  const args = ['batch', tasks, '--out', out, '--concurrency', '5', '--base-url', hanging.url];
  const run = runCli([...args, ...extra]);
  await seen;
  return { tasks, out, run };
}

const CODES = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;

/**
 * Two different signals sent back to back (the kernel would merge one signal sent twice) may be
 * handled in either order: the first decides the exit code, the second forces the stop.
 */
function expectForced(
  exit: { code: number | null },
  stderr: string,
  signals: [keyof typeof CODES, keyof typeof CODES],
): void {
  const forcedBy = /a second signal \((SIG[A-Z]+)\): stopped at once/.exec(stderr)?.[1];
  expect(signals).toContain(forcedBy);
  const first = signals.find((signal) => signal !== forcedBy)!;
  expect(exit.code).toBe(CODES[first]);
}

describe('batch under signals', () => {
  it.each([
    ['SIGTERM', 143, 'shutdown'],
    ['SIGHUP', 129, 'shutdown'],
    ['SIGINT', 130, 'user'],
  ] as const)(
    '%s writes the cancelled lines, the summary and a quoted resume hint; exit %i',
    async (signal, code, reason) => {
      const { tasks, out, run } = await batchInFlight(['--json']);
      run.child.kill(signal);
      expect((await run.exit).code).toBe(code);
      const lines = readResultLines(out);
      expect(lines).toHaveLength(5);
      expect(lines.every((line) => line.outcome === 'cancelled' && line.reason === reason)).toBe(
        true,
      );
      const summary = JSON.parse(run.stdout().trim());
      expect(summary).toMatchObject({ type: 'summary', interrupted: true, ran: 5 });
      expect(run.stderr()).toMatch(/Resume with the same command/);
      // The tasks file's name has a space: the hint quotes it so it can be pasted back.
      expect(run.stderr()).toContain(`'${tasks}'`);
    },
  );

  it('a second signal forces the stop at once, after printing what settled', async () => {
    const { tasks, out, run } = await batchInFlight(['--json']);
    // Back to back: the second arrives while the first one's cancels are still on their way.
    run.child.kill('SIGINT');
    run.child.kill('SIGTERM');
    expectForced(await run.exit, run.stderr(), ['SIGINT', 'SIGTERM']);
    expect(run.stderr()).toMatch(/Resume with the same command/);
    // What settled is told as a graceful end tells it: the summary on stdout with --json.
    expect(JSON.parse(run.stdout().trim())).toMatchObject({ type: 'summary', interrupted: true });
    // Whatever was written is whole lines: the resume can read it.
    for (const line of readFileSync(out, 'utf8').split('\n').filter(Boolean)) JSON.parse(line);
    // The lock was released on the forced way out: the resume runs.
    const resumed = runCli(['batch', tasks, '--out', out, '--base-url', fast.url, '--quiet']);
    expect((await resumed.exit).code).toBe(0);
    expect(readResultLines(out)).toHaveLength(20);
  });

  it('keeps running and writing its results when stdout and stderr close', async () => {
    const tasks = writeTasks(30);
    const out = path.join(tempDir(), 'results.jsonl');
    const run = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--concurrency',
      '3',
      '--base-url',
      fast.url,
    ]);
    await run.waitFor(/to run/);
    run.child.stdout!.destroy();
    run.child.stderr!.destroy();
    const exit = await run.exit;
    expect(exit.code).toBe(0);
    expect(readResultLines(out)).toHaveLength(30);
  });
});

/** `run --json` whose root starts one async child that takes a minute, then ends its turn. */
function runWithSlowChild() {
  const slow = {
    name: 'agent',
    input: { title: 's', mode: 'async', prompt: scripted([{ delayMs: 60_000, reply: 'x' }]) },
  };
  const prompt = scripted([{ calls: [slow] }, { text: 'ok' }]);
  return runCli(['run', prompt, '--json', '--base-url', fast.url]);
}

describe('run and agent under signals and closed pipes', () => {
  it('SIGTERM during run --json cancels everything and still prints the final line; exit 143', async () => {
    const slow = (title: string) => ({
      name: 'agent',
      input: { title, mode: 'async', prompt: scripted([{ delayMs: 60_000, reply: 'never' }]) },
    });
    const prompt = scripted([{ calls: [slow('a1'), slow('a2')] }, { text: 'waiting' }]);
    const run = runCli(['run', prompt, '--json', '--base-url', fast.url]);
    await run.waitFor(/"agent-start"[\s\S]*"agent-start"/, 'stdout');
    run.child.kill('SIGTERM');
    expect((await run.exit).code).toBe(143);
    const lines = run
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const final = lines.at(-1);
    expect(final.type).toBe('final');
    expect(final.agents.byOutcome.cancelled).toBe(2);
  });

  it('one Ctrl-C that cancels the only turn ends the run with 130', async () => {
    const run = runCli(['run', 'anything', '--json', '--base-url', hanging.url]);
    await requests(hanging, 1);
    run.child.kill('SIGINT');
    expect((await run.exit).code).toBe(130);
    const final = JSON.parse(run.stdout().trim().split('\n').at(-1)!);
    expect(final).toMatchObject({ type: 'final', outcome: 'cancelled' });
  });

  it('SIGTERM during agent --json prints the cancelled result; exit 143', async () => {
    const run = runCli(['agent', 'anything', '--json', '--base-url', hanging.url]);
    await requests(hanging, 1);
    run.child.kill('SIGTERM');
    expect((await run.exit).code).toBe(143);
    const result = JSON.parse(run.stdout());
    expect(result).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
  });

  it('a second signal during run --json forces the stop after printing the final line', async () => {
    const run = runWithSlowChild();
    await run.waitFor(/"agent-start"/, 'stdout');
    // Two different signals: the kernel merges a signal sent twice before it is handled.
    run.child.kill('SIGTERM');
    run.child.kill('SIGHUP');
    expectForced(await run.exit, run.stderr(), ['SIGTERM', 'SIGHUP']);
    const final = JSON.parse(run.stdout().trim().split('\n').at(-1)!);
    expect(final.type).toBe('final');
  });

  it('a second signal during agent --json forces the stop at once', async () => {
    const run = runCli(['agent', 'anything', '--json', '--base-url', hanging.url]);
    await requests(hanging, 1);
    run.child.kill('SIGINT');
    run.child.kill('SIGTERM');
    expectForced(await run.exit, run.stderr(), ['SIGINT', 'SIGTERM']);
  });

  it('run --json whose stdout closes after one line ends quietly and stops its agents', async () => {
    const run = runWithSlowChild();
    await run.waitFor(/\n/, 'stdout');
    run.child.stdout!.destroy();
    const exit = await run.exit;
    expect(exit.code).toBe(141);
    expect(run.stderr()).not.toMatch(/EPIPE|\n\s+at /);
  });

  it('demo piped into a reader that leaves ends quietly', async () => {
    const run = runCli(['demo']);
    await run.waitFor(/./, 'stdout');
    run.child.stdout!.destroy();
    const exit = await run.exit;
    expect(exit.code).toBe(141);
    expect(run.stderr()).not.toMatch(/EPIPE|\n\s+at /);
  });
});
