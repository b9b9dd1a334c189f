/**
 * `cohort batch --files` and `cohort batch --estimate` as a user meets them: the built CLI in a
 * child process, run in a temp folder of real files, against the scripted model over real HTTP.
 * The scripted model counts every HTTP request (`stats.requests`) and emits `request` for each
 * Messages request it answers, which is how a test proves an estimate sent none.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { tempDir } from './helpers.js';

let model: ScriptedModel;
let limited: ScriptedModel;
/** A stand-in for a provider without count_tokens: a plain node:http server that answers 404. */
let notFound: http.Server;
let notFoundUrl: string;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
  limited = await startScriptedModel({ port: 0, rpm: 600, itpm: 900_000 });
  notFound = http.createServer((_request, response) => {
    response.writeHead(404, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'Not found' } }),
    );
  });
  await new Promise<void>((resolve) => notFound.listen(0, '127.0.0.1', resolve));
  notFoundUrl = `http://127.0.0.1:${(notFound.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await model.close();
  await limited.close();
  await new Promise((resolve) => notFound.close(resolve));
});

/** A temp folder holding `files` (path → text or bytes). */
function folder(files: Record<string, string | Buffer>): string {
  const dir = tempDir('cohort-files-');
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), content);
  }
  return dir;
}

/** Runs `cohort batch ARGS` in `cwd` to its end. */
async function batch(cwd: string, args: string[]) {
  const run = runCli(['batch', ...args], {}, { cwd });
  const { code } = await run.exit;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/** Counts the Messages requests `server` answers until `stop` is called. */
function messageRequests(server: ScriptedModel): () => number {
  let seen = 0;
  const onRequest = () => seen++;
  server.on('request', onRequest);
  return () => {
    server.off('request', onRequest);
    return seen;
  };
}

const FILES = {
  'docs/a.md': 'Alpha notes.\n',
  'docs/b.md': 'Beta notes.\n',
  'docs/deep/c.md': 'Gamma notes.\n',
};

// The tests run concurrently, each in its own folder; one that counts requests has a model of its own.
describe.concurrent('cohort batch --files', () => {
  it('makes one task per file, its id the relative path; a rerun, and the --print-tasks lines run as TASKS.jsonl, resume by those ids', async () => {
    const own = await startScriptedModel({ port: 0 });
    try {
      const dir = folder(FILES);
      // `**/*` also matches what cohort writes in this folder: results.jsonl, its journal list.
      const files = ['--files', '**/*', '--prompt', 'Summarise {path} ({name}):\n{content}'];
      const args = [...files, '--out', 'results.jsonl', '--base-url', own.url, '--json'];
      const first = await batch(dir, args);
      expect(first.code, first.stderr).toBe(0);
      const lines = readResultLines(path.join(dir, 'results.jsonl'));
      expect(lines.map((line) => line.taskId).sort()).toEqual([
        'docs/a.md',
        'docs/b.md',
        'docs/deep/c.md',
      ]);
      expect(lines.every((line) => line.outcome === 'complete')).toBe(true);

      // The tasks as --print-tasks writes them, run as a tasks file on the same results file:
      // every one is done already, so nothing is asked of the model.
      // With --out as the run had it: the files cohort wrote beside it are left out again.
      const printed = await batch(dir, [...args, '--print-tasks']);
      expect(printed.code, printed.stderr).toBe(0);
      expect(JSON.parse(printed.stdout.split('\n')[0] as string)).toEqual({
        id: 'docs/a.md',
        prompt: 'Summarise docs/a.md (a.md):\nAlpha notes.\n',
      });
      const tasksFile = path.join(tempDir(), 'tasks.jsonl');
      writeFileSync(tasksFile, printed.stdout);
      const stop = messageRequests(own);
      const fromFile = await batch(dir, [
        tasksFile,
        '--out',
        'results.jsonl',
        '--base-url',
        own.url,
        '--json',
      ]);
      expect(JSON.parse(fromFile.stdout)).toMatchObject({ tasks: 3, skipped: 3, ran: 0 });
      expect(stop()).toBe(0);

      // The same --files command after a new file: only its task runs.
      writeFileSync(path.join(dir, 'docs', 'd.md'), 'Delta notes.\n');
      const more = await batch(dir, args);
      expect(JSON.parse(more.stdout)).toMatchObject({ tasks: 4, skipped: 3, ran: 1 });
      const ids = readResultLines(path.join(dir, 'results.jsonl')).map((line) => line.taskId);
      expect(ids.sort()).toEqual(['docs/a.md', 'docs/b.md', 'docs/d.md', 'docs/deep/c.md']);
    } finally {
      await own.close();
    }
  });

  it('{{ and }} are literal braces, and --system goes into every task', async () => {
    const dir = folder(FILES);
    const printed = await batch(dir, [
      '--files',
      'docs/*.md',
      '--prompt',
      '{{{name}}} at {path}',
      '--system',
      'Be brief.',
      '--print-tasks',
    ]);
    expect(printed.code, printed.stderr).toBe(0);
    const tasks = printed.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(tasks).toEqual([
      { id: 'docs/a.md', prompt: '{a.md} at docs/a.md', system: 'Be brief.' },
      { id: 'docs/b.md', prompt: '{b.md} at docs/b.md', system: 'Be brief.' },
    ]);
  });

  it('refuses, with exit 2 and nothing run: a glob that matches nothing, an unknown placeholder, a TASKS.jsonl with --files, --files without --prompt', async () => {
    const dir = folder({ ...FILES, 'tasks.jsonl': '{"id":"x","prompt":"y"}\n' });
    const [nothing, unknown, both, bare, expanded] = await Promise.all([
      batch(dir, ['--files', 'notes/*.md', '--prompt', '{path}', '--print-tasks']),
      batch(dir, ['--files', 'docs/*.md', '--prompt', 'Read {file}', '--print-tasks']),
      batch(dir, ['tasks.jsonl', '--files', 'docs/*.md', '--prompt', '{path}', '--print-tasks']),
      batch(dir, ['--files', 'docs/*.md', '--out', 'results.jsonl']),
      // What an unquoted `--files docs/*.md` arrives as once the shell has matched it.
      batch(dir, ['--files', 'docs/a.md', 'docs/b.md', '--prompt', '{path}', '--print-tasks']),
    ]);
    for (const run of [nothing, unknown, both, bare, expanded]) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stdout).toBe('');
    }
    expect(nothing.stderr).toContain(`got none for \`notes/*.md\` in ${dir}`);
    expect(unknown.stderr).toMatch(/\{path\}, \{name\}, \{content\}.*got `\{file\}`/);
    expect(both.stderr).toContain('got both');
    expect(both.stderr).not.toContain('shell expanded');
    expect(expanded.stderr).toContain(
      'got both (docs/b.md and --files). If the shell expanded a pattern, put it in quotes',
    );
    expect(bare.stderr).toContain('Expected `--prompt TEMPLATE` with `--files`');
  });

  // A file the process may not read is a bad task the same way ("expected a readable file, got
  // permission denied"), but the tests run as root here, where no mode bit keeps a file unread.
  it('a file over --max-content, a binary file and one not UTF-8 are bad tasks: reported with number and path, the others run', async () => {
    const own = await startScriptedModel({ port: 0 });
    try {
      const dir = folder({
        'in/a.txt': 'small\n',
        'in/b.txt': 'x'.repeat(2000),
        'in/c.txt': Buffer.from([0x50, 0x4e, 0x47, 0x00, 0x01]),
        'in/d.txt': Buffer.from([0x61, 0xff, 0xfe, 0x62]),
        'in/e.txt': 'fine too\n',
      });
      const args = ['--files', 'in/*.txt', '--prompt', '{content}', '--max-content', '1000'];
      const run = await batch(dir, [...args, '--out', 'results.jsonl', '--base-url', own.url]);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        /file 2, in\/b\.txt: .*at most 1000 bytes.*--max-content.*got 2000/,
      );
      expect(run.stderr).toMatch(/file 3, in\/c\.txt: .*binary/);
      expect(run.stderr).toMatch(/file 4, in\/d\.txt: .*not UTF-8/);
      const ids = readResultLines(path.join(dir, 'results.jsonl')).map((line) => line.taskId);
      expect(ids.sort()).toEqual(['in/a.txt', 'in/e.txt']);

      // --strict refuses to start: no results file is made, no request is sent.
      const stop = messageRequests(own);
      const strict = await batch(dir, [
        ...args,
        '--out',
        'strict.jsonl',
        '--base-url',
        own.url,
        '--strict',
      ]);
      expect(strict.code).toBe(2);
      expect(strict.stderr).toContain('--strict refuses to start');
      expect(stop()).toBe(0);
      expect(() => readFileSync(path.join(dir, 'strict.jsonl'))).toThrow();
    } finally {
      await own.close();
    }
  });
});

describe.concurrent('cohort batch --estimate', () => {
  /** The input a run's usage reports: uncached input, cache reads and cache writes. */
  const inputOf = (usage: {
    inputTokens: number;
    cacheReadTokens: number;
    cacheWriteTokens: number;
  }) => usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;

  it('counts with count_tokens, sends no message, and matches what a run is then charged', async () => {
    const own = await startScriptedModel({ port: 0 });
    try {
      await estimateThenRun(own);
    } finally {
      await own.close();
    }
  });

  async function estimateThenRun(model: ScriptedModel): Promise<void> {
    const dir = folder(FILES);
    const files = ['--files', 'docs/**/*.md', '--prompt', 'Summarise {path}:\n{content}'];
    const requestsBefore = model.stats.requests;
    const stop = messageRequests(model);
    const estimated = await batch(dir, [...files, '--estimate', '--json', '--base-url', model.url]);
    expect(estimated.code, estimated.stderr).toBe(0);
    // Three count_tokens requests and not one Messages request.
    expect(stop()).toBe(0);
    expect(model.stats.requests - requestsBefore).toBe(3);
    const estimate = JSON.parse(estimated.stdout);
    expect(estimate).toMatchObject({
      type: 'estimate',
      tasks: 3,
      inputCounted: 'count_tokens',
      outputTokens: 1500,
      outputTokensPerTask: 500,
    });

    const run = await batch(dir, [...files, '--out', 'results.jsonl', '--base-url', model.url]);
    expect(run.code, run.stderr).toBe(0);
    const charged = readFileSync(path.join(dir, 'results.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => inputOf(JSON.parse(line).usage))
      .reduce((sum, tokens) => sum + tokens, 0);
    // Each task here replies in one step, so its first request is all the input it is charged:
    // the estimate is within 1% (on the scripted model it is exact).
    expect(Math.abs(estimate.inputTokens - charged)).toBeLessThanOrEqual(charged * 0.01);
  }

  it('prices a shared preamble with and without the prompt cache, within 2% of the run', async () => {
    const dir = folder({});
    const preamble = 'A shared reference document. '.repeat(300);
    const tasks = [0, 1, 2, 3].map((index) =>
      JSON.stringify({ id: `q${index}`, prompt: `Question ${index}?`, preamble }),
    );
    writeFileSync(path.join(dir, 'tasks.jsonl'), tasks.join('\n'));
    const estimated = await batch(dir, [
      'tasks.jsonl',
      '--estimate',
      '--json',
      '--base-url',
      model.url,
    ]);
    const estimate = JSON.parse(estimated.stdout);
    expect(estimate.cachedCostUsd).toBeLessThan(estimate.costUsd);
    const run = await batch(dir, [
      'tasks.jsonl',
      '--out',
      'results.jsonl',
      '--base-url',
      model.url,
      '--json',
    ]);
    const { spent } = JSON.parse(run.stdout);
    const input = spent.inputTokens + spent.cacheReadTokens + spent.cacheWriteTokens;
    expect(Math.abs(estimate.inputTokens - input)).toBeLessThanOrEqual(input * 0.01);
    expect(Math.abs(estimate.cache.readTokens - spent.cacheReadTokens)).toBeLessThanOrEqual(
      spent.cacheReadTokens * 0.02,
    );
    // The input's dollars (the cost less the output's, $15 per million on the scripted model).
    const runInputUsd = spent.costUsd - (spent.outputTokens * 15) / 1e6;
    const estimateInputUsd = estimate.cachedCostUsd - (estimate.outputTokens * 15) / 1e6;
    expect(Math.abs(estimateInputUsd - runInputUsd)).toBeLessThanOrEqual(runInputUsd * 0.02);
  });

  it('falls back to the local estimate once when the provider has no count_tokens (404)', async () => {
    const dir = folder(FILES);
    const files = ['--files', 'docs/**/*.md', '--prompt', 'Summarise {path}:\n{content}'];
    const local = await batch(dir, [...files, '--estimate', '--json', '--base-url', notFoundUrl]);
    expect(local.code, local.stderr).toBe(0);
    expect(local.stderr.match(/count_tokens failed/g)).toHaveLength(1);
    expect(local.stderr).toMatch(/404.*estimated locally/);
    const estimate = JSON.parse(local.stdout);
    expect(estimate).toMatchObject({ tasks: 3, inputCounted: 'local' });
    // The local estimate (characters / 4 of the request's JSON) is near what count_tokens says.
    const counted = JSON.parse(
      (await batch(dir, [...files, '--estimate', '--json', '--base-url', model.url])).stdout,
    );
    expect(Math.abs(estimate.inputTokens - counted.inputTokens)).toBeLessThan(
      counted.inputTokens * 0.1,
    );
  });

  it('times the batch at the configured limit, and at the limits the governor learned', async () => {
    const dir = folder(FILES);
    const state = path.join(dir, 'governor-state.json');
    const files = ['--files', 'docs/**/*.md', '--prompt', 'Summarise {path}'];
    const common = ['--base-url', limited.url, '--governor-state', state];
    const configured = JSON.parse(
      (await batch(dir, [...files, ...common, '--estimate', '--json', '--rpm', '6'])).stdout,
    );
    // 3 requests at 6 a minute.
    expect(configured.seconds).toBe(30);
    expect(configured.models[0].limits).toEqual({
      kind: 'limits',
      rpm: { perMinute: 6, source: 'configured' },
    });
    // A run learns the limits from the scripted model's headers and keeps them in the state file.
    expect((await batch(dir, [...files, ...common, '--out', 'results.jsonl'])).code).toBe(0);
    const learned = await batch(dir, [...files, ...common, '--estimate', '--rpm', '6']);
    expect(learned.stdout).toMatch(/600 rpm, 900,000 itpm; rpm binds, learned/);
  });

  it('reports bad tasks as a run would, and prints a plain summary', async () => {
    const dir = folder({ 'a.txt': 'hello\n', 'b.bin': Buffer.from([1, 0, 2]) });
    const run = await batch(dir, [
      '--files',
      '*',
      '--prompt',
      'Say {content}',
      '--estimate',
      '--base-url',
      model.url,
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/file 2, b\.bin: .*binary/);
    expect(run.stdout).toMatch(
      /^cohort batch --estimate: 1 task\(s\) \(1 bad, not counted\); no message was sent/,
    );
    expect(run.stdout).toMatch(
      /input: +\d+ tokens \(every task's first request\), counted by count_tokens/,
    );
    expect(run.stdout).toMatch(/cost: +\$\d+\.\d{4} without the prompt cache/);
  });
});
