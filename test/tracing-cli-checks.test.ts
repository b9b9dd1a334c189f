import { existsSync, linkSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, writeTasks } from './cli-helpers.js';
import { tempDir } from './helpers.js';

// The CLI's checks of its tracing flags, `--agents`, `--budget` and titles, on the real built CLI
// as a child process (run `npm run build` first). No provider is in the environment, so where
// anything runs it is the built-in scripted model. Every refusal is exit 2 before anything
// starts: no results file, no model announced.

/** What the CLI says when it starts the built-in model: a refusal comes before it. */
const MODEL_STARTED = /using the built-in scripted model/;

/** A folder with a tasks file and where its results would go. */
function batchFolder(): { tasks: string; out: string; logs: string } {
  const tasks = writeTasks(['Say something.']);
  const folder = path.dirname(tasks);
  return {
    tasks,
    out: path.join(folder, 'results.jsonl'),
    logs: path.join(folder, 'logs'),
  };
}

/** A file's text, or undefined when it does not exist. */
function contents(file: string): string | undefined {
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}

async function expectUsageExit(run: ReturnType<typeof runCli>): Promise<string> {
  const exit = await run.exit;
  expect(exit.code, run.stderr()).toBe(2);
  expect(run.stderr()).not.toMatch(MODEL_STARTED);
  expect(run.stdout()).toBe('');
  return run.stderr();
}

describe('cohort batch: --trace-file may not be another file of the batch', () => {
  const WHICH = {
    out: 'which is `--out`',
    lock: "which is `--out`'s lock",
    tasks: 'which is the tasks file',
  } as const;

  it.each([
    { what: '`--out`, missing', target: 'out', existing: false },
    { what: '`--out`, existing', target: 'out', existing: true },
    { what: "`--out`'s lock", target: 'lock', existing: false },
    { what: 'the tasks file', target: 'tasks', existing: true },
  ] as const)(
    '--trace-file that is $what: exit 2 naming both, every file as it was',
    async ({ target, existing }) => {
      const { tasks, out, logs } = batchFolder();
      if (existing && target === 'out') {
        writeFileSync(out, '{"taskId":"earlier","outcome":"complete"}\n');
      }
      const trace = target === 'out' ? out : target === 'lock' ? `${out}.lock` : tasks;
      const before = { out: contents(out), lock: contents(`${out}.lock`), tasks: contents(tasks) };
      const stderr = await expectUsageExit(
        runCli(['batch', tasks, '--out', out, '--trace-file', trace, '--log-dir', logs]),
      );
      expect(stderr).toContain('Expected `--trace-file` to be a file of its own');
      expect(stderr).toContain(`got \`${trace}\`, ${WHICH[target]}`);
      expect({
        out: contents(out),
        lock: contents(`${out}.lock`),
        tasks: contents(tasks),
      }).toEqual(before);
      expect(existsSync(logs)).toBe(false);
    },
  );

  it('a hard link to the tasks file is the tasks file', async () => {
    const { tasks, out, logs } = batchFolder();
    const link = path.join(path.dirname(tasks), 'trace.jsonl');
    linkSync(tasks, link);
    const before = contents(tasks);
    const stderr = await expectUsageExit(
      runCli(['batch', tasks, '--out', out, '--trace-file', link, '--log-dir', logs]),
    );
    expect(stderr).toContain('which is the tasks file');
    expect(contents(tasks)).toBe(before);
    expect(existsSync(out)).toBe(false);
  });

  it('a symlink to `--out` that does not exist yet is `--out`', async () => {
    const { tasks, out, logs } = batchFolder();
    const link = path.join(path.dirname(tasks), 'trace.jsonl');
    symlinkSync(out, link);
    const run = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--trace-file',
      link,
      '--log-dir',
      logs,
      '--quiet',
    ]);
    const exit = await run.exit;
    // Were it let through, the spans would be appended to the results file.
    const lines = (contents(out) ?? '').split('\n').filter((line) => line.trim() !== '');
    const spans = lines.filter((line) => !line.includes('"taskId"'));
    expect(spans.length, 'span lines in the results file').toBe(0);
    expect(exit.code, run.stderr()).toBe(2);
    expect(run.stderr()).toContain('which is `--out`');
  });
});

describe('--trace-file and --otel-endpoint are checked before anything starts', () => {
  it('--trace-file in a folder that does not exist: exit 2, no results file', async () => {
    const { tasks, out, logs } = batchFolder();
    const trace = '/no/such/dir/t.jsonl';
    const stderr = await expectUsageExit(
      runCli(['batch', tasks, '--out', out, '--trace-file', trace, '--log-dir', logs]),
    );
    expect(stderr).toContain(
      `Expected \`--trace-file\` to be a file in an existing folder, got \`${trace}\``,
    );
    expect(existsSync(out)).toBe(false);
    expect(existsSync(logs)).toBe(false);
  });

  it('--trace-file that is a folder: exit 2, no results file; the same for cohort agent', async () => {
    const { tasks, out, logs } = batchFolder();
    const folder = path.join(path.dirname(tasks), 'traces');
    mkdirSync(folder);
    const stderr = await expectUsageExit(
      runCli(['batch', tasks, '--out', out, '--trace-file', folder, '--log-dir', logs]),
    );
    expect(stderr).toContain(`Expected \`--trace-file\` to be a file, got \`${folder}\``);
    expect(existsSync(out)).toBe(false);
    const agent = await expectUsageExit(
      runCli(['agent', 'Say something.', '--trace-file', folder, '--log-dir', logs]),
    );
    expect(agent).toContain('Expected `--trace-file` to be a file');
    expect(existsSync(logs)).toBe(false);
  });

  it('a rejected --otel-endpoint is echoed without its password or query', async () => {
    const endpoint = 'htp://user:S3cretPw@host/x?token=abc';
    const logs = path.join(tempDir(), 'logs');
    const stderr = await expectUsageExit(
      runCli(['agent', 'Say something.', '--otel-endpoint', endpoint, '--log-dir', logs]),
    );
    expect(stderr).toContain('Expected `--otel-endpoint` to be an http or https URL');
    expect(stderr).not.toContain('S3cretPw');
    expect(stderr).not.toContain('abc');
    // Before anything runs in a batch too.
    const { tasks, out } = batchFolder();
    const batch = await expectUsageExit(
      runCli(['batch', tasks, '--out', out, '--otel-endpoint', endpoint, '--log-dir', logs]),
    );
    expect(batch).toContain('`--otel-endpoint`');
    expect(batch).not.toContain('S3cretPw');
    expect(existsSync(out)).toBe(false);
  });
});

describe('--agents that cannot be read', () => {
  it('a symlink loop is a usage error naming `--agents`', async () => {
    const folder = tempDir();
    const loop = path.join(folder, 'loop');
    symlinkSync('loop', loop);
    const stderr = await expectUsageExit(
      runCli(['agent', 'Say something.', '--agents', loop, '--log-dir', path.join(folder, 'l')]),
    );
    expect(stderr).toContain('`--agents`');
    expect(stderr).toContain(loop);
    expect(stderr).not.toContain('agentsDir');
    // A usage error's one line, not a stack.
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});

describe('a usd budget on the built-in model', () => {
  it('works offline: exit 0, and the result has a costUsd', async () => {
    const run = runCli([
      'agent',
      'Say something.',
      '--budget',
      '{"usd":1}',
      '--json',
      '--log-dir',
      tempDir(),
    ]);
    expect((await run.exit).code, run.stderr()).toBe(0);
    expect(run.stderr()).toMatch(MODEL_STARTED);
    const result = JSON.parse(run.stdout()) as { outcome: string; usage: { costUsd?: unknown } };
    expect(result.outcome).toBe('complete');
    expect(typeof result.usage.costUsd).toBe('number');
    expect(result.usage.costUsd).toBeGreaterThan(0);
  });

  it('with --model unpriced-x: exit 2 before anything starts, naming the model and the prices', async () => {
    const stderr = await expectUsageExit(
      runCli([
        'agent',
        'Say something.',
        '--budget',
        '{"usd":1}',
        '--model',
        'unpriced-x',
        '--json',
        '--log-dir',
        tempDir(),
      ]),
    );
    expect(stderr).toContain('`unpriced-x`');
    expect(stderr).toMatch(/prices/);
  });
});

describe('a title taken from a prompt that starts with a key', () => {
  it('is redacted in the --json result and in the span names of --trace-file', async () => {
    const key = `sk-ant-api03-${'A'.repeat(40)}`;
    const folder = tempDir();
    const trace = path.join(folder, 'trace.jsonl');
    const run = runCli([
      'agent',
      `${key} please look at this`,
      '--json',
      '--trace-file',
      trace,
      '--log-dir',
      path.join(folder, 'logs'),
    ]);
    expect((await run.exit).code, run.stderr()).toBe(0);
    const result = JSON.parse(run.stdout()) as { title: string };
    expect(result.title).toContain('[redacted]');
    expect(result.title).not.toContain('sk-ant-');
    const names = readFileSync(trace, 'utf8')
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { name: string }).name);
    const agentSpans = names.filter((name) => name.startsWith('invoke_agent '));
    expect(agentSpans).toEqual([`invoke_agent ${result.title}`]);
    for (const name of names) expect(name).not.toContain('sk-ant-');
    expect(readFileSync(trace, 'utf8')).not.toContain(key);
  });
});
