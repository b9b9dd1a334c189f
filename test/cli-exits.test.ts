import { execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, linkSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { CLI, runCli } from './cli-helpers.js';
import { makeWorkspace, scripted, tempDir } from './helpers.js';

// Every misuse below used to hang or to end with a wrong exit code. Each runs the built CLI as a
// real child process; a run that has not exited within HANG_BOUND_MS counts as a hang.
// The tests of a describe run side by side: each runs CLI processes of its own on files of its
// own, and none reads another's output or the model's counts, so a test proves alone what it
// proves beside the others, and a CLI waiting on its start-up leaves the other core to the next.
const HANG_BOUND_MS = 20_000;

let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await model.close();
});

/** Runs the CLI and resolves with its exit code, or fails if it has not exited in time. */
async function exitOf(run: ReturnType<typeof runCli>): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      run.child.kill('SIGKILL');
      reject(new Error(`hung: no exit within ${HANG_BOUND_MS} ms; stderr: ${run.stderr()}`));
    }, HANG_BOUND_MS);
  });
  try {
    return (await Promise.race([run.exit, hang])).code;
  } finally {
    clearTimeout(timer);
  }
}

function tasksFile(lines: string[]): string {
  const file = path.join(tempDir(), 'tasks.jsonl');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

const ONE_TASK = ['{"id":"a","prompt":"Say hi."}'];

/**
 * For the runs that start an engine to check something else (reading prompts and tasks, bad
 * lines, escapes): one worker thread starts in half the time of the default two. The demo still
 * runs with the default.
 */
const ONE_THREAD = ['--threads', '1'];

describe.concurrent('every command exits, with the built-in model started', () => {
  // No base URL: these runs use the built-in model, which used to keep the process alive after
  // an error. Each must end promptly with a usage error (2) and a message naming the problem.
  const regularFile = () => {
    const file = path.join(tempDir(), 'regular');
    writeFileSync(file, 'x');
    return file;
  };
  const cases: [string, () => string[], RegExp][] = [
    [
      'agent --tools with a missing module',
      () => ['agent', 'hi', '--tools', 'missing.mjs'],
      /missing\.mjs/,
    ],
    ['run --ceiling 0', () => ['run', 'hi', '--ceiling', '0'], /`--ceiling`/],
    [
      'batch --out in a missing folder',
      () => ['batch', tasksFile(ONE_TASK), '--out', '/nonexistent/dir/out.jsonl'],
      /\/nonexistent\/dir/,
    ],
    [
      'batch --out under a regular file',
      () => ['batch', tasksFile(ONE_TASK), '--out', path.join(regularFile(), 'out.jsonl')],
      /regular/,
    ],
    [
      'batch --out /dev/null',
      () => ['batch', tasksFile(ONE_TASK), '--out', '/dev/null'],
      /\/dev\/null/,
    ],
    [
      'batch --out /dev/zero',
      () => ['batch', tasksFile(ONE_TASK), '--out', '/dev/zero'],
      /\/dev\/zero/,
    ],
    [
      'agent --log-dir under a regular file',
      () => ['agent', 'hi', '--log-dir', path.join(regularFile(), 'logs')],
      /regular/,
    ],
    [
      'agent --workspace that does not exist',
      () => ['agent', 'hi', '--workspace', '/nonexistent'],
      /\/nonexistent/,
    ],
    ['demo of a folder that does not exist', () => ['demo', '/nonexistent'], /\/nonexistent/],
    [
      '--threads with a negative number',
      () => ['agent', 'hi', '--threads', '-5'],
      /`--threads`.*-5/,
    ],
  ];
  it.each(cases)('%s: exit 2 with a clear message', async (_name, args, message) => {
    const run = runCli(args());
    expect(await exitOf(run)).toBe(2);
    expect(run.stderr()).toMatch(message);
    expect(run.stderr()).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('a --tools module that throws on import, or that defines `reply`, is a usage error before any task starts', async () => {
    const dir = tempDir();
    const throwing = path.join(dir, 'throwing.mjs');
    writeFileSync(throwing, "throw new Error('broken module');\n");
    const reply = path.join(dir, 'reply.mjs');
    writeFileSync(
      reply,
      "export const tools = [{ name: 'reply', description: 'mine', inputSchema: { type: 'object' }, run: () => 'x' }];\n",
    );
    const tasks = tasksFile(ONE_TASK);
    for (const [module, message] of [
      [throwing, /broken module/],
      [reply, /`reply`/],
    ] as const) {
      const out = path.join(tempDir(), 'out.jsonl');
      const run = runCli(['batch', tasks, '--out', out, '--tools', module]);
      expect(await exitOf(run)).toBe(2);
      expect(run.stderr()).toMatch(message);
      expect(run.stderr()).toMatch(/`--tools`/);
      expect(existsSync(out)).toBe(false);
    }
  });

  it('--out /dev/stdout into a pipe is refused, not written into', async () => {
    const run = runCli(['batch', tasksFile(ONE_TASK), '--out', '/dev/stdout']);
    expect(await exitOf(run)).toBe(2);
    expect(run.stdout()).toBe('');
  });

  it('--out naming the file this command’s own stdout goes to is refused, and it stays empty', async () => {
    const file = path.join(tempDir(), 'redirected.jsonl');
    const fd = openSync(file, 'w');
    const child = spawn(
      process.execPath,
      [CLI, 'batch', tasksFile(ONE_TASK), '--out', '/dev/stdout', '--json'],
      {
        stdio: ['ignore', fd, 'pipe'],
      },
    );
    closeSync(fd);
    let stderr = '';
    child.stderr!.on('data', (chunk) => {
      stderr += chunk;
    });
    const code = await new Promise((resolve) => child.on('close', resolve));
    expect(code).toBe(2);
    expect(stderr).toMatch(/stdout goes to/);
    expect(readFileSync(file, 'utf8')).toBe('');
  });

  it('--out with a second hard link is refused: a run through the other name would miss the lock', async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'a.jsonl'), '');
    linkSync(path.join(dir, 'a.jsonl'), path.join(dir, 'b.jsonl'));
    const run = runCli(['batch', tasksFile(ONE_TASK), '--out', path.join(dir, 'a.jsonl')]);
    expect(await exitOf(run)).toBe(2);
    expect(run.stderr()).toMatch(/2 hard links/);
  });

  it('--out a FIFO is refused without opening it', async () => {
    const fifo = path.join(tempDir(), 'fifo');
    execFileSync('mkfifo', [fifo]);
    const run = runCli(['batch', tasksFile(ONE_TASK), '--out', fifo]);
    expect(await exitOf(run)).toBe(2);
  });

  it('--provider anthropic without a key or a base URL is refused before anything starts', async () => {
    const run = runCli(['agent', 'hi', '--provider', 'anthropic']);
    expect(await exitOf(run)).toBe(2);
    expect(run.stderr()).toMatch(/ANTHROPIC_API_KEY/);
  });

  it('a base URL that is not http(s) is refused', async () => {
    const run = runCli(['agent', 'hi', '--base-url', 'ftp://example.invalid/']);
    expect(await exitOf(run)).toBe(2);
    expect(run.stderr()).toMatch(/`--base-url`.*http/);
  });

  it('warns when --threads exceeds the cores', async () => {
    const threads = os.availableParallelism() + 1;
    const run = runCli([
      'agent',
      scripted([{ reply: 'ok' }]),
      '--threads',
      String(threads),
      '--base-url',
      model.url,
    ]);
    expect(await exitOf(run)).toBe(0);
    expect(run.stderr()).toMatch(/warning: --threads \d+ is more than this machine's \d+ core/);
  });
});

describe.concurrent('prompts and tasks from files and stdin', () => {
  it('agent - reads the prompt from stdin; @FILE reads it from a file', async () => {
    const fromStdin = runCli(
      ['agent', '-', '--json', '--base-url', model.url, ...ONE_THREAD],
      {},
      {
        stdin: scripted([{ reply: 'from stdin' }]),
      },
    );
    expect(await exitOf(fromStdin)).toBe(0);
    expect(JSON.parse(fromStdin.stdout()).text).toBe('from stdin');

    const file = path.join(tempDir(), 'prompt.txt');
    // A prompt longer than a command line may be (128 KiB per argument on Linux).
    writeFileSync(file, `${'x'.repeat(200_000)}\n${scripted([{ reply: 'from a file' }])}`);
    const fromFile = runCli([
      'agent',
      `@${file}`,
      '--json',
      '--base-url',
      model.url,
      ...ONE_THREAD,
    ]);
    expect(await exitOf(fromFile)).toBe(0);
    expect(JSON.parse(fromFile.stdout()).text).toBe('from a file');
  });

  it('@FILE may be a pipe (@/dev/stdin, @<(cmd))', async () => {
    const run = runCli(
      ['agent', '@/dev/stdin', '--json', '--base-url', model.url, ...ONE_THREAD],
      {},
      { stdin: scripted([{ reply: 'through a pipe' }]) },
    );
    expect(await exitOf(run)).toBe(0);
    expect(JSON.parse(run.stdout()).text).toBe('through a pipe');
  });

  it('a missing @FILE and an empty stdin prompt are usage errors', async () => {
    const missing = runCli(['agent', '@/nonexistent/prompt.txt']);
    expect(await exitOf(missing)).toBe(2);
    expect(missing.stderr()).toMatch(/prompt file.*\/nonexistent\/prompt\.txt.*no such file/);
    const empty = runCli(['run', '-'], {}, { stdin: '  \n' });
    expect(await exitOf(empty)).toBe(2);
    expect(empty.stderr()).toMatch(/non-empty prompt on stdin/);
  });

  it('batch - reads the tasks from stdin, and the resume hint says so', async () => {
    const out = path.join(tempDir(), 'results.jsonl');
    const tasks = ['{"id":"a","prompt":"Say hi."}', '{"id":"b","prompt":"Say ho."}'].join('\n');
    const run = runCli(
      ['batch', '-', '--out', out, '--base-url', model.url, ...ONE_THREAD],
      {},
      {
        stdin: tasks,
      },
    );
    expect(await exitOf(run)).toBe(0);
    const ids = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line).taskId);
    expect(ids.sort()).toEqual(['a', 'b']);
  });
});

describe.concurrent('bad task lines', () => {
  it('a line the engine would refuse gets no result line; the good lines run; --strict refuses', async () => {
    const file = tasksFile([
      '{"id":"good1","prompt":"Say hi."}',
      '{"id":"m","prompt":"x","model":""}',
      '{"id":"t","prompt":"x","title":""}',
      '{"id":"s","prompt":"x","maxSteps":1e300}',
      '{"id":"tool","prompt":"x","tools":["read_fil"]}',
      '{"id":"good2","prompt":"Say ho."}',
    ]);
    const out = path.join(tempDir(), 'results.jsonl');
    const run = runCli(['batch', file, '--out', out, '--base-url', model.url, ...ONE_THREAD]);
    expect(await exitOf(run)).toBe(1);
    const stderr = run.stderr();
    for (const line of [2, 3, 4, 5]) expect(stderr).toContain(`${file}:${line}:`);
    expect(stderr).toMatch(/read_fil/);
    const ids = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line).taskId);
    expect(ids.sort()).toEqual(['good1', 'good2']);

    const strictOut = path.join(tempDir(), 'strict.jsonl');
    const strict = runCli([
      'batch',
      file,
      '--out',
      strictOut,
      '--strict',
      '--base-url',
      model.url,
      ...ONE_THREAD,
    ]);
    expect(await exitOf(strict)).toBe(2);
    expect(existsSync(strictOut)).toBe(false);
  });

  it('terminal escapes in a bad line and in a binary tasks file are shown neutralised', async () => {
    const file = path.join(tempDir(), 'tasks.jsonl');
    writeFileSync(
      file,
      Buffer.concat([
        Buffer.from('{"id":"x\u001b]0;owned\u0007","prompt":""}\n'),
        Buffer.from([0x1b, 0x5b, 0x32, 0x4a, 0x9b, 0x00, 0x0a]),
      ]),
    );
    const run = runCli([
      'batch',
      file,
      '--out',
      path.join(tempDir(), 'r.jsonl'),
      '--base-url',
      model.url,
      ...ONE_THREAD,
    ]);
    expect(await exitOf(run)).toBe(1);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for raw controls
    expect(run.stderr()).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f\u009b]/);
    expect(run.stderr()).toContain('\\x1b');
  });

  it('a model title and text with escapes are printed neutralised by agent', async () => {
    const run = runCli([
      'agent',
      scripted([{ reply: 'evil \u001b[2J text' }]),
      '--title',
      'title \u001b]0;x\u0007',
      '--base-url',
      model.url,
      ...ONE_THREAD,
    ]);
    expect(await exitOf(run)).toBe(0);
    expect(run.stdout()).not.toContain('\u001b');
    expect(run.stdout()).toContain('evil \\x1b[2J text');
  });
});

describe.concurrent('help and version', () => {
  it('--version prints the package version', async () => {
    const run = runCli(['--version']);
    expect(await exitOf(run)).toBe(0);
    const pkg = JSON.parse(
      readFileSync(path.join(path.dirname(CLI), '../../../package.json'), 'utf8'),
    );
    expect(run.stdout().trim()).toBe(pkg.version);
  });

  it.each(['agent', 'run', 'batch', 'demo', 'mock', 'logs'])(
    'cohort help %s prints that command’s own usage with its exit codes',
    async (command) => {
      const run = runCli(['help', command]);
      expect(await exitOf(run)).toBe(0);
      expect(run.stdout()).toMatch(new RegExp(`Usage: cohort ${command}`));
      expect(run.stdout()).toMatch(/Exit codes/);
      const viaFlag = runCli([command, '--help']);
      expect(await exitOf(viaFlag)).toBe(0);
      expect(viaFlag.stdout()).toBe(run.stdout());
    },
  );

  it('the top-level help lists the commands and not one command’s options', async () => {
    const run = runCli(['--help']);
    expect(await exitOf(run)).toBe(0);
    expect(run.stdout()).toMatch(/Commands:/);
    expect(run.stdout()).not.toMatch(/--max-steps/);
    const none = runCli([]);
    expect(await exitOf(none)).toBe(2);
    const unknown = runCli(['frobnicate']);
    expect(await exitOf(unknown)).toBe(2);
    expect(unknown.stderr()).toMatch(/Expected a command .* got `frobnicate`/);
  });
});

describe('demo', () => {
  it('surveys a folder given to it', async () => {
    const folder = makeWorkspace(); // two files
    const run = runCli(['demo', folder, '--json', '--base-url', model.url]);
    expect(await exitOf(run)).toBe(0);
    const final = JSON.parse(run.stdout().trim().split('\n').at(-1)!);
    expect(final.type).toBe('final');
    expect(final.agents.total).toBe(2);
  });
});
