import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { type CliRun, readResultLines, runCli, writeTasks } from './cli-helpers.js';
import { closedPort, tempDir } from './helpers.js';

// The governor's flags and the batch's stop for a spent quota, through the built CLI as a child
// process against the scripted model over real HTTP.

/**
 * A batch without the governor against a closed port: its task's five attempts back off at the
 * default pace for about seven seconds, its process idle meanwhile. Started with the file, it
 * waits while the other tests run; its test, the last, reads what it printed once it exits.
 */
let noBreaker: Promise<CliRun>;

beforeAll(() => {
  noBreaker = closedPort().then((port) =>
    runCli([
      'batch',
      writeTasks(1),
      '--out',
      path.join(tempDir(), 'results.jsonl'),
      '--governor',
      'off',
      '--base-url',
      `http://127.0.0.1:${port}`,
    ]),
  );
});

afterAll(async () => {
  // Ended already unless a test failed before it could wait for it.
  const run = await noBreaker;
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
  await run.exit;
});

describe('governor flags', () => {
  it.each([
    [['--governor', 'maybe'], 'Expected `--governor` to be on or off, got `maybe`'],
    [['--rpm', '0'], 'Expected `--rpm` to be a whole number from 1 and up, got `0`'],
    [['--itpm', '1.5'], 'Expected `--itpm` to be a whole number from 1 and up, got `1.5`'],
    [
      ['--max-concurrency', '-3'],
      'Expected `--max-concurrency` to be a whole number from 1 and up, got `-3`',
    ],
    [
      ['--governor', 'off', '--otpm', '100'],
      'Expected either `--governor off` or `--otpm`, got both',
    ],
  ])('%j is a usage error that says what was expected (exit 2)', async (flags, message) => {
    const run = runCli(['agent', 'hello', ...flags]);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain(message);
  });

  it('the help lists them', async () => {
    const run = runCli(['batch', '--help']);
    expect((await run.exit).code).toBe(0);
    for (const flag of [
      '--rpm N',
      '--itpm N',
      '--otpm N',
      '--max-concurrency N',
      '--governor on|off',
    ]) {
      expect(run.stdout()).toContain(flag);
    }
  });
});

describe('cohort batch and a spent quota', () => {
  let capped: ScriptedModel;
  let open: ScriptedModel;

  beforeAll(async () => {
    // Each default-policy task costs a few hundred tokens: the cap is spent a few dozen tasks in.
    capped = await startScriptedModel({ port: 0, spendCapTokens: 8_000 });
    open = await startScriptedModel({ port: 0 });
  });

  afterAll(async () => {
    await capped.close();
    await open.close();
  });

  it('stops admitting, says why, exits 1, and a rerun after the limit is raised completes every task', async () => {
    const tasks = writeTasks(120);
    const out = path.join(tempDir(), 'results.jsonl');
    const args = ['batch', tasks, '--out', out, '--concurrency', '10', '--json'];
    const run = runCli([...args, '--base-url', capped.url]);
    expect((await run.exit).code).toBe(1);
    const summary = JSON.parse(run.stdout().trim());
    expect(summary.notStarted).toBeGreaterThan(0);
    expect(summary.quotaExhausted['claude-sonnet-5']).toMatch(/spend limit is reached/);
    expect(run.stderr()).toMatch(
      /stopped admitting tasks for model claude-sonnet-5: .*spend limit/,
    );
    expect(run.stderr()).toMatch(/rerun the same command/);
    const lines = readResultLines(out);
    // Tasks passed over have no line; every line is a whole result, once per task.
    expect(lines.length).toBe(120 - summary.notStarted);
    expect(new Set(lines.map((line) => line.taskId)).size).toBe(lines.length);
    const failed = lines.filter((line) => line.outcome === 'failed');
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.every((line) => line.code === 'quota_exhausted')).toBe(true);
    // The failures came fast from the governor's shut key, not one 429 per queued task.
    expect(capped.stats.rateLimited429).toBeLessThan(failed.length + 10);

    const resumed = runCli([...args, '--base-url', open.url]);
    expect((await resumed.exit).code).toBe(0);
    const final = readResultLines(out);
    expect(final).toHaveLength(120);
    expect(final.every((line) => line.outcome === 'complete')).toBe(true);
  });

  it('a 429 that says x-should-retry: false fails its task at once, with the reason', async () => {
    const file = path.join(tempDir(), 'tasks.jsonl');
    const script = JSON.stringify({ steps: [{ error: { status: 429, shouldRetry: false } }] });
    const prompt = `Scripted.\n\`\`\`cohort-script\n${script}\n\`\`\``;
    writeFileSync(file, `${JSON.stringify({ id: 'only', prompt })}\n`);
    const out = path.join(tempDir(), 'results.jsonl');
    const run = runCli(['batch', file, '--out', out, '--base-url', open.url]);
    expect((await run.exit).code).toBe(1);
    const [line] = readResultLines(out);
    expect(line).toMatchObject({ outcome: 'failed', code: 'quota_exhausted' });
    expect(line!.reason).toMatch(/x-should-retry: false/);
  });
});

describe('cohort batch and an unreachable provider', () => {
  let open: ScriptedModel;

  beforeAll(async () => {
    open = await startScriptedModel({ port: 0 });
  });

  afterAll(async () => {
    await open.close();
  });

  it('the breaker stops the batch with one message, and the same command completes it once the provider is up', async () => {
    const tasks = writeTasks(600);
    const out = path.join(tempDir(), 'results.jsonl');
    const port = await closedPort();
    const args = ['batch', tasks, '--out', out, '--concurrency', '50', '--json'];
    const run = runCli([...args, '--base-url', `http://127.0.0.1:${port}`]);
    expect((await run.exit).code).toBe(1);
    const summary = JSON.parse(run.stdout().trim());
    expect(summary.unreachable['claude-sonnet-5']).toMatch(/connection failures in a row/);
    expect(summary.notStarted).toBeGreaterThan(400);
    const stderr = run.stderr();
    expect(stderr.match(/stopped admitting tasks for model/g)).toHaveLength(1);
    expect(stderr).toContain(`127.0.0.1:${port}`);
    expect(stderr).toMatch(/check that it is up and that the base URL is right/i);
    expect(stderr).toMatch(/rerun the same command/);
    // No line per failed task on the terminal, and no retry line before the breaker tripped:
    // the one message says it for all of them.
    expect(stderr).not.toMatch(/task t\d+ failed/);
    expect(stderr).not.toMatch(/waiting to retry/);
    const lines = readResultLines(out);
    expect(lines.length).toBe(600 - summary.notStarted);
    expect(lines.every((line) => line.outcome === 'failed' && line.code === 'connection')).toBe(
      true,
    );

    // The rerun retries the connection failures and runs the tasks never started.
    const resumed = runCli([...args, '--base-url', open.url]);
    expect((await resumed.exit).code).toBe(0);
    const final = readResultLines(out);
    expect(final).toHaveLength(600);
    expect(final.every((line) => line.outcome === 'complete')).toBe(true);
  });

  it('without the governor (no breaker), connection trouble that goes on gets a retry line', async () => {
    const run = await noBreaker;
    expect((await run.exit).code).toBe(1);
    // Its 5 attempts back off for seconds: past the grace a breaker would have spoken in.
    expect(run.stderr()).toMatch(
      /could not reach the provider \(connection\); 1 task\(s\) waiting to retry \(attempt \d of 5\)/,
    );
    expect(run.stderr()).toMatch(/task t0 failed \[connection\]/);
  });
});
