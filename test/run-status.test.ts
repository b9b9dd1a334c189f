import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeElapsed, RunStatus } from '../src/cli/views/run-status.js';
import { fitToWidth } from '../src/cli/views/status-line.js';
import type { SessionEvent } from '../src/main/session.js';
import type { GovernorState } from '../src/shared/governor/types.js';
import { type AgentOutcome, type AgentResult, emptyUsage } from '../src/shared/result.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { CLI, runCli } from './cli-helpers.js';
import { scripted, tempDir } from './helpers.js';

// `cohort run`'s status line: its text from events, and the built CLI on a real terminal. Node
// has no pseudo-terminal of its own, so the terminal is util-linux `script`, which runs a command
// on a fresh pty and copies everything written to it to its stdout: the bytes a terminal gets.

function result(id: string, outcome: AgentOutcome, usage: Partial<AgentResult['usage']> = {}) {
  const full: AgentResult = {
    id,
    title: id,
    outcome,
    text: '',
    truncated: false,
    elapsedMs: 10,
    generation: 0,
    usage: { ...emptyUsage(), ...usage },
  };
  return { type: 'agent-settle', agentId: id, result: full } satisfies SessionEvent;
}

function start(id: string): SessionEvent {
  return { type: 'agent-start', agentId: id, title: id, depth: 1, mode: 'async' };
}

function governor(state: Partial<GovernorState>): SessionEvent {
  return {
    type: 'governor-update',
    state: {
      key: 'k',
      label: 'cohort-scripted at http://x',
      limit: 40,
      inFlight: 0,
      queued: 0,
      admitted: 0,
      rateLimited: 0,
      overloaded: 0,
      refusalRate: 0,
      ...state,
    },
  };
}

describe('the status line text', () => {
  it('counts running and done agents by outcome, tokens, dollars, elapsed time and the governor', () => {
    const status = new RunStatus(1_000);
    expect(status.text(1_400)).toBe('cohort 0s | 0 running | 0 done');
    for (const id of ['a', 'b', 'c', 'd', 'e']) status.handle(start(id));
    // The root's steps count as they end; text deltas change nothing.
    status.handle({
      type: 'step-end',
      agentId: 'root',
      step: 1,
      usage: { inputTokens: 1000, outputTokens: 20, cacheReadTokens: 500, cacheWriteTokens: 0 },
    });
    status.handle({ type: 'text-delta', agentId: 'root', text: 'hello' });
    status.handle(governor({ inFlight: 37, queued: 120 }));
    expect(status.text(6_000)).toBe(
      'cohort 5s | 5 running | 0 done | 1.5K in / 20 out tokens | gov 37/40, 120 queued',
    );
    // A sync child's steps count while it runs; its result takes their place when it settles.
    status.handle({
      type: 'step-end',
      agentId: 'a',
      step: 1,
      usage: { inputTokens: 300, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 },
    });
    expect(status.text(6_000)).toMatch(/1\.8K in \/ 30 out tokens/);
    status.handle(result('a', 'complete', { inputTokens: 400, outputTokens: 15, costUsd: 0.01 }));
    status.handle(result('b', 'failed', { inputTokens: 100, cacheWriteTokens: 100 }));
    status.handle(result('c', 'cancelled'));
    status.handle(result('d', 'empty', { outputTokens: 1000, costUsd: 0.0025 }));
    // The same settle twice (a resumed run may say it again) is counted once.
    status.handle(result('d', 'empty', { outputTokens: 1000, costUsd: 0.0025 }));
    status.handle(governor({ inFlight: 1, queued: 0, pausedUntil: 70_500 }));
    expect(status.text(66_000)).toBe(
      'cohort 1m05s | 1 running | 4 done (1 complete, 1 empty, 1 failed, 1 cancelled) | 2.1K in / 1K out tokens | $0.0125 | gov 1/40, paused 4.5 s',
    );
  });

  it('says elapsed time to the second, then to the minute past an hour', () => {
    expect(describeElapsed(999)).toBe('0s');
    expect(describeElapsed(59_999)).toBe('59s');
    expect(describeElapsed(60_000)).toBe('1m00s');
    expect(describeElapsed(3_599_000)).toBe('59m59s');
    expect(describeElapsed(3_600_000 + 180_000)).toBe('1h03m');
  });

  it('is cut to the width with an ellipsis, never longer', () => {
    const text = 'cohort 5s | 12 running | 40 done';
    expect(fitToWidth(text, 80)).toBe(text);
    expect(fitToWidth(text, text.length)).toBe(text);
    expect(fitToWidth(text, 16)).toBe('cohort 5s | 12 …');
    expect([...fitToWidth(text, 16)]).toHaveLength(16);
    expect(fitToWidth(text, 1)).toBe('…');
    expect(fitToWidth(text, 0)).toBe('');
  });
});

// --- On a real terminal ---

let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await model.close();
});

const child = (title: string, steps: Parameters<typeof scripted>[0]) => ({
  name: 'agent',
  input: { title, mode: 'async', prompt: scripted(steps) },
});

/** Root text for the turns the results wake. */
const WAKES = [{ text: 'started' }, { text: 'one' }, { text: 'two' }, { text: 'three' }];

/** A status frame as cli-progress draws it: to column 1, the text, clear to the right. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: escape codes are what is tested
const FRAME = /\u001b\[1G(cohort \d[^\u001b]*)\u001b\[0K/g;
/** The erase: back to the saved start of the line, column 1, clear the whole line. */
const ERASE = '\u001b8\u001b[1G\u001b[2K';

function frames(output: string): { text: string; at: number }[] {
  return [...output.matchAll(FRAME)].map((match) => ({ text: match[1]!, at: match.index }));
}

interface TerminalRun {
  child: ChildProcess;
  output: () => string;
  waitFor(test: (output: string) => boolean): Promise<void>;
  exit: Promise<number | null>;
  /** The folder of the shell script: its `pid` and `tty` files. */
  dir: string;
}

/**
 * Runs `shell` (a POSIX shell script) on a pseudo-terminal `cols` wide, with a clean provider
 * environment and a terminal that takes escape codes. It writes its tty and pid first, so a test
 * can resize the terminal and signal the process.
 */
function onTerminal(shell: string, cols: number): TerminalRun {
  const dir = tempDir('cohort-tty-');
  const file = path.join(dir, 'run.sh');
  writeFileSync(
    file,
    `tty > '${dir}/tty'\necho $$ > '${dir}/pid'\nstty cols ${cols} rows 30\n${shell}\n`,
  );
  const env: NodeJS.ProcessEnv = { ...process.env, TERM: 'xterm-256color' };
  delete env.ANTHROPIC_API_KEY;
  delete env.ANTHROPIC_BASE_URL;
  delete env.ANTHROPIC_AUTH_TOKEN;
  const script = spawn('script', ['-qfec', `sh '${file}'`, '/dev/null'], {
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  const waiters: { test: (output: string) => boolean; resolve: () => void }[] = [];
  script.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    for (const waiter of [...waiters]) {
      if (!waiter.test(output)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  return {
    child: script,
    output: () => output,
    waitFor: (test) =>
      new Promise((resolve) => {
        if (test(output)) resolve();
        else waiters.push({ test, resolve });
      }),
    exit: new Promise((resolve) => script.on('close', (code) => resolve(code))),
    dir,
  };
}

/** The command that runs the built CLI on `prompt` (kept in a file: no shell quoting). */
function runCommand(prompt: string, dir = tempDir('cohort-prompt-')): string {
  const file = path.join(dir, 'prompt.md');
  writeFileSync(file, prompt);
  const logs = path.join(dir, 'logs');
  return `'${process.execPath}' '${CLI}' run '@${file}' --base-url ${model.url} --log-dir '${logs}'`;
}

/** Every status frame was erased before the summary, and none was drawn after it. */
function expectErasedBeforeSummary(output: string): void {
  const drawn = frames(output);
  expect(drawn.length).toBeGreaterThan(0);
  const summary = output.indexOf('── done: root');
  expect(summary).toBeGreaterThan(drawn.at(-1)!.at);
  expect(output.slice(drawn.at(-1)!.at, summary)).toContain(ERASE);
  expect(output.slice(summary)).not.toMatch(FRAME);
}

describe('cohort run on a terminal', () => {
  it('pins a status line below the scrolling lines, follows a resize and erases it before the summary', async () => {
    const prompt = scripted([
      {
        calls: [
          child('quick', [{ reply: 'quick done' }]),
          child('broken', [{ error: { status: 400, message: 'bad request' } }]),
          child('slow', [{ delayMs: 2000, reply: 'slow done' }]),
        ],
      },
      ...WAKES,
    ]);
    const run = onTerminal(`exec ${runCommand(prompt)}`, 72);
    // Two of three settled, the slow one still running.
    await run.waitFor((output) =>
      frames(output).some(({ text }) => text.includes('1 running | 2 done (1 complete, 1 failed)')),
    );
    const narrow = frames(run.output()).length;
    // Narrower: the kernel tells the process (SIGWINCH), the next frame fits the new width.
    const tty = readFileSync(path.join(run.dir, 'tty'), 'utf8').trim();
    execFileSync('stty', ['-F', tty, 'cols', '50']);
    await run.waitFor((output) => frames(output).slice(narrow).length > 0);
    expect(await run.exit).toBe(0);
    const output = run.output();
    const drawn = frames(output);
    expect(drawn[0]!.text).toBe('cohort 0s | 0 running | 0 done');
    for (const { text } of drawn.slice(0, narrow)) expect([...text].length).toBeLessThanOrEqual(71);
    for (const { text } of drawn.slice(narrow)) expect([...text].length).toBeLessThanOrEqual(49);
    expect(drawn.some(({ text }) => text.endsWith('…'))).toBe(true);
    expect(drawn.some(({ text }) => /^cohort \d+s \| 1 running/.test(text))).toBe(true);
    // Drawn again only when it changed (or after an erase, which must bring it back).
    for (const [index, frame] of drawn.entries()) {
      const before = drawn[index - 1];
      if (before && !output.slice(before.at, frame.at).includes(ERASE))
        expect(frame.text).not.toBe(before.text);
    }
    // The scrolling lines are all there, each at the start of a line: after a line end, or where
    // the status line was erased.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: escape codes are what is tested
    const lineStart = /(?:\r\n|\u001b\[2K)/.source;
    expect(output).toMatch(new RegExp(`${lineStart} {2}✓ \\[\\d/\\d\\] quick: complete`));
    expect(output).toMatch(new RegExp(`${lineStart} {2}✗ \\[\\d/\\d\\] broken: failed`));
    expect(output).toMatch(new RegExp(`${lineStart} {2}✓ \\[3/3\\] slow: complete`));
    expectErasedBeforeSummary(output);
    expect(output).toMatch(
      /── done: root ready; 3 agent\(s\): (1 failed, 2 complete|2 complete, 1 failed)/,
    );
  });

  it('comes back after a Ctrl-C note and is erased when SIGTERM ends the run', async () => {
    const prompt = scripted([
      { calls: [child('stuck', [{ delayMs: 60_000, reply: 'never' }])] },
      ...WAKES,
    ]);
    const run = onTerminal(`exec ${runCommand(prompt)}`, 120);
    await run.waitFor((output) =>
      frames(output).some(({ text }) => text.includes('1 running | 0 done')),
    );
    const pid = Number(readFileSync(path.join(run.dir, 'pid'), 'utf8'));
    process.kill(pid, 'SIGINT');
    await run.waitFor((output) => {
      const note = output.indexOf('Ctrl-C again cancels everything');
      return note !== -1 && frames(output).some(({ at }) => at > note);
    });
    process.kill(pid, 'SIGTERM');
    expect(await run.exit).toBe(143);
    const output = run.output();
    expect(output).toMatch(/cancelling every agent/);
    expect(output).toMatch(/── done: root ready; 1 agent\(s\): 1 cancelled/);
    expectErasedBeforeSummary(output);
  });

  it('stdout into `head -1` still ends the run at once, and the status line with it', async () => {
    const prompt = scripted([
      {
        calls: [
          child('quick', [{ delayMs: 300, reply: 'quick done' }]),
          child('stuck', [{ delayMs: 60_000, reply: 'never' }]),
        ],
      },
      ...WAKES,
    ]);
    const started = Date.now();
    const run = onTerminal(`${runCommand(prompt)} | head -1`, 120);
    expect(await run.exit).toBe(0);
    // Far from the stuck agent's minute: the first write after `head` left stopped the run.
    expect(Date.now() - started).toBeLessThan(30_000);
    const output = run.output();
    const drawn = frames(output);
    expect(drawn.length).toBeGreaterThan(0);
    expect(output.slice(drawn.at(-1)!.at)).toContain(ERASE);
    expect(output).toMatch(/async agent started/);
  });

  it('writes no escape codes when stderr is a pipe', async () => {
    const prompt = scripted([{ calls: [child('quick', [{ reply: 'quick done' }])] }, ...WAKES]);
    const run = runCli(['run', prompt, '--base-url', model.url, '--log-dir', tempDir()], {
      TERM: 'xterm-256color',
    });
    expect((await run.exit).code).toBe(0);
    expect(run.stderr()).not.toContain('\u001b');
    expect(run.stdout()).not.toContain('\u001b');
    expect(run.stderr()).not.toMatch(/running \|/);
    expect(run.stdout()).toMatch(/── done: root ready; 1 agent\(s\): 1 complete/);
  });
});
