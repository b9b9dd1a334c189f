import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatchResultLine } from '../src/cli/results/file.js';
import { readJobResult } from '../src/main/runners/queue/job.js';
import { emptyUsage } from '../src/shared/result.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli, writeTasks } from './cli-helpers.js';
import { closedPort, tempDir } from './helpers.js';
import { type Fleet, startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// `cohort batch --queue` against a dead provider. The circuit breaker is in the worker that ran
// each task; its results say the breaker stands behind them (`breakerOpen`), and the producer
// stops admitting that model's tasks as a local batch does. A private redis-server, one real
// `cohort worker` process, the built CLI as the producer, a closed port and a plain node:http
// server that refuses every key (what a wrong ANTHROPIC_API_KEY gets from the real API).

const QUEUE = 'breaker';
const TASKS = 400;
const CONCURRENCY = 50;

/** A server that refuses every request's key, as the API does: 401 authentication_error. */
async function refusingServer(): Promise<{ url: string; server: http.Server }> {
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(401, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          type: 'error',
          error: { type: 'authentication_error', message: 'invalid x-api-key' },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** `text` as a pattern that matches it literally. */
function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe.skipIf(redisMissing)(
  redisMissing
    ? `queue batch and a dead provider (skipped: ${redisMissing})`
    : 'queue batch and a dead provider',
  () => {
    let rig: RedisRig;
    let model: ScriptedModel;
    let refusing: { url: string; server: http.Server };
    let fleet: Fleet;

    beforeAll(async () => {
      rig = await startRedis();
      model = await startScriptedModel({ port: 0 });
      refusing = await refusingServer();
      fleet = await startWorkers(rig, 1, [
        '--queue-name',
        QUEUE,
        '--threads',
        '1',
        '--logs',
        'failed',
      ]);
    });

    afterAll(async () => {
      await stopWorkers();
      await model?.close();
      await new Promise((resolve) => refusing?.server.close(resolve));
      await rig?.stop();
    });

    it.each([
      {
        dead: 'nothing listening',
        code: 'connection',
        url: async () => `http://127.0.0.1:${await closedPort()}`,
        why: /connection failures in a row.*check that it is up and that the base URL is right/i,
      },
      {
        dead: 'a refused key',
        code: 'auth',
        url: async () => refusing.url,
        why: /API key was refused.*ANTHROPIC_API_KEY/,
      },
    ])(
      "$dead: the worker's breaker stops the batch with one message, and the same command completes it once the provider is fixed",
      async ({ code, url, why }) => {
        const tasks = writeTasks(TASKS);
        const out = path.join(tempDir(), 'results.jsonl');
        const args = [
          'batch',
          tasks,
          '--out',
          out,
          '--queue',
          rig.url,
          '--queue-name',
          QUEUE,
          '--concurrency',
          String(CONCURRENCY),
          '--logs',
          'failed',
          '--json',
        ];
        const deadUrl = await url();
        const run = runCli([...args, '--base-url', deadUrl]);
        expect((await run.exit).code).toBe(1);
        const summary = JSON.parse(run.stdout().trim());
        expect(summary.unreachable['claude-sonnet-5']).toMatch(why);
        expect(summary.failures).toEqual({ [code]: summary.ran });
        const stderr = run.stderr();
        expect(stderr.match(/stopped admitting tasks for model/g)).toHaveLength(1);
        expect(stderr).toMatch(
          new RegExp(
            `stopped admitting tasks for model claude-sonnet-5 \\(worker ${literal(fleet.names[0]!)}\\): .*${literal(deadUrl)}`,
          ),
        );
        expect(stderr).toMatch(
          new RegExp(`${summary.notStarted} task\\(s\\) not started.*rerun the same command`),
        );
        // One message says it for every task: no line per failed task.
        expect(stderr).not.toMatch(/task t\d+ failed/);

        // Only the tasks in the queue when the first such result came back ran: the rest have
        // no line, and every line is one task's, from the worker.
        const lines = readResultLines(out) as BatchResultLine[];
        expect(summary.notStarted).toBeGreaterThan(TASKS - 2 * CONCURRENCY);
        expect(lines).toHaveLength(TASKS - summary.notStarted);
        expect(summary.ran).toBe(lines.length);
        expect(new Set(lines.map((line) => line.taskId)).size).toBe(lines.length);
        expect(lines.every((line) => line.outcome === 'failed' && line.code === code)).toBe(true);
        expect(lines.every((line) => line.worker === fleet.names[0])).toBe(true);
        // The breaker stands behind them all but the few whose own attempts were the failures
        // that opened it (a refused key opens it with its first refusal: every one then).
        const flagged = lines.filter((line) => line.breakerOpen === true).length;
        expect(flagged).toBeGreaterThanOrEqual(code === 'auth' ? lines.length : lines.length - 5);

        // The same command against a provider that answers: the failed lines are replaced and
        // the tasks never started run, each exactly once.
        const again = runCli([...args, '--base-url', model.url]);
        expect((await again.exit).code).toBe(0);
        expect(again.stderr()).toMatch(new RegExp(`${TASKS} to run`));
        const final = readResultLines(out);
        expect(final).toHaveLength(TASKS);
        expect(new Set(final.map((line) => line.taskId)).size).toBe(TASKS);
        expect(final.every((line) => line.outcome === 'complete')).toBe(true);
      },
    );
  },
);

describe('a worker answer that claims an open breaker', () => {
  const answer = {
    id: 'ag_x',
    title: 't',
    outcome: 'failed',
    code: 'connection',
    reason: 'provider connection: unreachable',
    text: '',
    truncated: false,
    elapsedMs: 1,
    generation: 0,
    usage: emptyUsage(),
  };

  it('is taken when it is `true` on a failed result', () => {
    expect(readJobResult({ ...answer, breakerOpen: true })).toMatchObject({ breakerOpen: true });
  });

  it.each([
    {
      what: 'a value other than true',
      value: { ...answer, breakerOpen: 'yes' },
      message: /expected breakerOpen to be true.*"yes"/,
    },
    {
      what: 'a result that did not fail',
      value: { ...answer, outcome: 'complete', code: undefined, breakerOpen: true },
      message: /on a complete result/,
    },
  ])('is refused on $what, saying what came', ({ value, message }) => {
    expect(readJobResult(value)).toMatch(message);
  });
});
