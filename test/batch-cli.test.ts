import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli, writeTasks } from './cli-helpers.js';
import { scripted, tempDir } from './helpers.js';

// `cohort batch` as a user meets it: the lock against a second run, failures explained, retries
// shown, and --retry-failed. Real processes, a real scripted model, and plain node:http servers
// that refuse every key (what a wrong ANTHROPIC_API_KEY gets from the real API) or every request.
let model: ScriptedModel;
let hanging: ScriptedModel;
const servers: http.Server[] = [];
let refusingUrl: string;
let rejectingUrl: string;

/** A server that answers every request `status` with an API error of `type`. */
async function answering(status: number, type: string, message: string): Promise<string> {
  const server = http.createServer((_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ type: 'error', error: { type, message } }));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
  hanging = await startScriptedModel({ port: 0, ttftMs: 60_000 });
  refusingUrl = await answering(401, 'authentication_error', 'invalid x-api-key');
  rejectingUrl = await answering(400, 'invalid_request_error', 'this request is not allowed');
});

afterAll(async () => {
  await model.close();
  await hanging.close();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

describe('cohort batch', () => {
  it('a second run on the same --out exits 2 naming the holder, and touches nothing', async () => {
    const tasks = writeTasks(['a', 'b', 'c']);
    const out = path.join(tempDir(), 'results.jsonl');
    const first = runCli(['batch', tasks, '--out', out, '--base-url', hanging.url]);
    await first.waitFor(/to run/);
    const second = runCli(['batch', tasks, '--out', out, '--base-url', model.url]);
    expect((await second.exit).code).toBe(2);
    expect(second.stderr()).toContain(`pid ${first.child.pid}`);
    expect(second.stderr()).toContain(`${out}.lock`);
    first.child.kill('SIGINT');
    expect((await first.exit).code).toBe(130);
    // Only the first run's three cancelled lines: the second paid for nothing.
    expect(readResultLines(out)).toHaveLength(3);
  });

  it('refuses a notes file as --out and leaves it byte for byte as it was', async () => {
    const notes = path.join(tempDir(), 'notes.md');
    const text = '# My notes\n\nImportant things.\n';
    writeFileSync(notes, text);
    const run = runCli(['batch', writeTasks(['a']), '--out', notes, '--base-url', model.url]);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toMatch(/notes\.md.*line 1/);
    expect(readFileSync(notes, 'utf8')).toBe(text);
    const self = writeTasks(['a']);
    const same = runCli(['batch', self, '--out', self, '--base-url', model.url]);
    expect((await same.exit).code).toBe(2);
  });

  it('a refused API key stops the batch with one message naming the key, and a rerun replaces those lines', async () => {
    const tasks = writeTasks(['one', 'two', 'three']);
    const out = path.join(tempDir(), 'results.jsonl');
    const refused = runCli(['batch', tasks, '--out', out, '--base-url', refusingUrl]);
    expect((await refused.exit).code).toBe(1);
    const said = refused.stderr();
    expect(said.match(/stopped admitting tasks for model/g)).toHaveLength(1);
    expect(said).toMatch(/stopped admitting tasks for model .*ANTHROPIC_API_KEY/);
    expect(said).toMatch(/3 failed \(3 auth\)/);
    expect(said).toMatch(/rerun the same command/);
    expect(readResultLines(out).map((line) => line.code)).toEqual(['auth', 'auth', 'auth']);

    // The tasks never had their chance: the same command, once the key is right, runs them and
    // replaces their lines without --retry-failed. Still one line per task.
    const again = runCli(['batch', tasks, '--out', out, '--base-url', model.url]);
    expect((await again.exit).code).toBe(0);
    expect(again.stderr()).toMatch(/3 to run/);
    const lines = readResultLines(out);
    expect(lines.map((line) => line.taskId).sort()).toEqual(['t0', 't1', 't2']);
    expect(lines.every((line) => line.outcome === 'complete')).toBe(true);
  });

  it('names failed tasks with code and reason, counts failures by code, and --retry-failed reruns only them', async () => {
    const tasks = writeTasks(['one', 'two', 'three']);
    const out = path.join(tempDir(), 'results.jsonl');
    const refused = runCli(['batch', tasks, '--out', out, '--base-url', rejectingUrl]);
    expect((await refused.exit).code).toBe(1);
    expect(refused.stderr()).toMatch(/task t\d failed \[bad_request\]: .*not allowed/);
    expect(refused.stderr()).toMatch(/3 failed \(3 bad_request\)/);
    expect(readResultLines(out).map((line) => line.code)).toEqual([
      'bad_request',
      'bad_request',
      'bad_request',
    ]);

    // Without --retry-failed a rerun has nothing to do; with it, the failed tasks run again and
    // their lines are replaced: still one line per task.
    const again = runCli(['batch', tasks, '--out', out, '--base-url', model.url]);
    expect((await again.exit).code).toBe(1);
    expect(again.stderr()).toMatch(/3 already in/);
    const retried = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--base-url',
      model.url,
      '--retry-failed',
    ]);
    expect((await retried.exit).code).toBe(0);
    expect(retried.stderr()).toMatch(/3 failed, to retry/);
    const lines = readResultLines(out);
    expect(lines.map((line) => line.taskId).sort()).toEqual(['t0', 't1', 't2']);
    expect(lines.every((line) => line.outcome === 'complete')).toBe(true);
  });

  it('says when the provider pushes back and a task is waiting to retry', async () => {
    const prompt = scripted([
      { reply: 'recovered', error: { status: 429, retryAfterMs: 50 }, faultAttempts: 1 },
    ]);
    const batch = (...flags: string[]) =>
      runCli([
        'batch',
        writeTasks([prompt]),
        '--out',
        path.join(tempDir(), 'r.jsonl'),
        '--base-url',
        model.url,
        ...flags,
      ]);
    const paced = batch();
    expect((await paced.exit).code).toBe(0);
    expect(paced.stderr()).toMatch(
      /provider answered 429 rate_limited; 1 task\(s\) waiting to retry \(the governor paces their retries\)/,
    );
    // Without the governor, the agent's own retries count.
    const own = batch('--governor', 'off');
    expect((await own.exit).code).toBe(0);
    expect(own.stderr()).toMatch(
      /provider answered 429 rate_limited; 1 task\(s\) waiting to retry \(attempt 2 of 5\)/,
    );
  });
});

describe('cohort run', () => {
  it('the live view says when a call is being retried', async () => {
    const prompt = scripted([
      { text: 'made it', error: { status: 529, retryAfterMs: 50 }, faultAttempts: 1 },
    ]);
    const paced = runCli(['run', prompt, '--base-url', model.url]);
    expect((await paced.exit).code).toBe(0);
    expect(paced.stdout()).toMatch(
      /↻ root: retrying after 529 overloaded \(back in the governor queue\)/,
    );
    // Without the governor, the agent's own retries count.
    const own = runCli(['run', prompt, '--base-url', model.url, '--governor', 'off']);
    expect((await own.exit).code).toBe(0);
    expect(own.stdout()).toMatch(
      /↻ root: retrying after 529 overloaded \(attempt 2 of 5, waiting 0\.\d s\)/,
    );
  });
});
