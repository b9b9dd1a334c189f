import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../src/main/engine.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { scripted, TEST_TOOLS, tempDir } from './helpers.js';
import { startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// `--dashboard` on the real CLI, as a person uses it: the line on stderr, the API of a batch
// that runs, a cancel whose result line then says cancelled, bad flags and a port in use, and
// a queue worker's own dashboard, with a real redis-server.

const LINE = /^dashboard (http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]{32}))$/m;

/** The dashboard a CLI run prints, once it has. */
async function dashboardOf(run: { stderr(): string }): Promise<{ base: string; token: string }> {
  for (let tries = 0; tries < 600 && !LINE.test(run.stderr()); tries++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const [, , port, token] = LINE.exec(run.stderr()) ?? [];
  if (port === undefined)
    throw new Error(`Expected the dashboard line on stderr, got ${run.stderr()}`);
  return { base: `http://127.0.0.1:${port}`, token: token! };
}

interface Row {
  id: string;
  title: string;
  parent: string | null;
  status: string;
  outcome?: string;
}

async function rowsOf(dashboard: { base: string; token: string }): Promise<Row[]> {
  const response = await fetch(`${dashboard.base}/api/state`, {
    headers: { authorization: `Bearer ${dashboard.token}` },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { agents: Row[] }).agents;
}

async function rowsWhen(
  dashboard: { base: string; token: string },
  ready: (rows: Row[]) => boolean,
): Promise<Row[]> {
  for (let tries = 0; tries < 600; tries++) {
    const rows = await rowsOf(dashboard);
    if (ready(rows)) return rows;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('Expected the dashboard to show the agents within 30 s');
}

const sleeper = (ms: number) =>
  scripted([{ calls: [{ name: 'sleep', input: { ms } }] }, { reply: 'woke' }]);

function tasksFile(prompts: string[]): string {
  const file = path.join(tempDir('cohort-dashboard-cli-'), 'tasks.jsonl');
  const lines = prompts.map((prompt, index) => JSON.stringify({ id: `t${index}`, prompt }));
  writeFileSync(file, lines.join('\n'));
  return file;
}

describe.concurrent('cohort batch --dashboard', () => {
  it('prints its address, shows the running tasks, and a cancel from it gives a cancelled result line', async () => {
    const tasks = tasksFile([sleeper(60_000), sleeper(200), sleeper(200)]);
    const out = path.join(path.dirname(tasks), 'out.jsonl');
    const run = runCli(['batch', tasks, '--out', out, '--tools', TEST_TOOLS, '--dashboard', '0']);
    const dashboard = await dashboardOf(run);
    const rows = await rowsWhen(
      dashboard,
      (rows) => rows.length === 3 && rows.filter((row) => row.status === 'settled').length === 2,
    );
    const sleeping = rows.find((row) => row.status !== 'settled')!;
    const cancel = await fetch(`${dashboard.base}/api/agents/${sleeping.id}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${dashboard.token}` },
    });
    expect(cancel.status).toBe(202);
    expect((await run.exit).code).toBe(1);
    const lines = readResultLines(out);
    expect(lines.map((line) => [line.taskId, line.outcome]).sort()).toEqual([
      ['t0', 'cancelled'],
      ['t1', 'complete'],
      ['t2', 'complete'],
    ]);
    expect(lines.find((line) => line.taskId === 't0')?.reason).toBe('dashboard');
    // The dashboard went with the process.
    await expect(fetch(`${dashboard.base}/api/state`)).rejects.toThrow();
  });

  it('exits 2 with what it expected for a bad port, a host alone, or a port in use, and runs nothing', async () => {
    const tasks = tasksFile([sleeper(10)]);
    const out = path.join(path.dirname(tasks), 'out.jsonl');
    const range = runCli(['batch', tasks, '--out', out, '--dashboard', '70000']);
    expect((await range.exit).code).toBe(2);
    expect(range.stderr()).toContain(
      'Expected `--dashboard` to be a whole number from 0 to 65535, got `70000`',
    );
    const alone = runCli(['batch', tasks, '--out', out, '--dashboard-host', '127.0.0.1']);
    expect((await alone.exit).code).toBe(2);
    expect(alone.stderr()).toContain('Expected `--dashboard PORT` with `--dashboard-host`');
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      const taken = runCli(['batch', tasks, '--out', out, '--dashboard', String(port)]);
      expect((await taken.exit).code).toBe(2);
      expect(taken.stderr()).toContain(
        `Expected a free port for the dashboard, got ${port}, which is in use on 127.0.0.1`,
      );
      expect(readResultLines(out)).toEqual([]);
    } finally {
      holder.close();
    }
  });
});

describe('cohort run --dashboard', () => {
  it("shows the session's root as the root of the tree, its agents under it", async () => {
    const prompt = scripted([
      {
        calls: [{ name: 'agent', input: { title: 'helper', prompt: sleeper(60_000) } }],
      },
      { text: 'all done' },
    ]);
    const run = runCli([
      'run',
      prompt,
      '--tools',
      TEST_TOOLS,
      '--max-depth',
      '1',
      '--dashboard',
      '0',
    ]);
    const dashboard = await dashboardOf(run);
    const rows = await rowsWhen(dashboard, (rows) => rows.some((row) => row.title === 'helper'));
    expect(rows.find((row) => row.id === 'root')).toMatchObject({
      parent: null,
      status: 'running',
    });
    const helper = rows.find((row) => row.title === 'helper')!;
    expect(helper.parent).toBe('root');
    const cancel = await fetch(`${dashboard.base}/api/agents/${helper.id}/cancel`, {
      method: 'POST',
      headers: { 'x-cohort-token': dashboard.token },
    });
    expect(cancel.status).toBe(202);
    // The root's turn goes on with the cancelled result and ends the run.
    expect((await run.exit).code).toBe(0);
    expect(run.stdout()).toContain('all done');
  });
});

describe.skipIf(redisMissing)(
  redisMissing
    ? `cohort worker --dashboard (skipped: ${redisMissing})`
    : 'cohort worker --dashboard',
  () => {
    let redis: RedisRig;
    let model: ScriptedModel;

    beforeAll(async () => {
      redis = await startRedis();
      model = await startScriptedModel({ port: 0 });
    });

    afterAll(async () => {
      await stopWorkers();
      await model?.close();
      await redis?.stop();
    });

    it("shows every job the worker runs, those queued before it started too, refuses cancel, and closes with the worker's drain", async () => {
      const engine = await Engine.start({
        queue: { url: redis.url },
        provider: { baseURL: model.url, model: 'cohort-scripted' },
        toolModules: [TEST_TOOLS],
      });
      try {
        // Queued before any worker runs: the dashboard listens before the worker takes one.
        const handles = [0, 1, 2].map((index) =>
          engine.spawn({ title: `job ${index}`, prompt: sleeper(index === 0 ? 1_500 : 50) }),
        );
        const fleet = await startWorkers(redis, 1, ['--dashboard', '0']);
        const worker = fleet.workers[0]!;
        const dashboard = await dashboardOf(worker);
        const rows = await rowsWhen(dashboard, (rows) => rows.length === 3);
        expect(new Set(rows.map((row) => row.id))).toEqual(
          new Set(handles.map((handle) => handle.id)),
        );
        // A worker's page only shows: a cancel there would not reach the producer.
        const running = rows.find((row) => row.title === 'job 0')!;
        const cancel = await fetch(`${dashboard.base}/api/agents/${running.id}/cancel`, {
          method: 'POST',
          headers: { authorization: `Bearer ${dashboard.token}` },
        });
        expect(cancel.status).toBe(409);
        expect(((await cancel.json()) as { error: string }).error).toContain(
          'cancel from the producer',
        );
        const state = (await (
          await fetch(`${dashboard.base}/api/state`, {
            headers: { authorization: `Bearer ${dashboard.token}` },
          })
        ).json()) as { run: { command: string; cancel: boolean } };
        expect(state.run).toMatchObject({ command: 'worker', cancel: false });
        const results = await Promise.all(handles.map((handle) => handle.result));
        expect(results.map((result) => result.outcome)).toEqual([
          'complete',
          'complete',
          'complete',
        ]);
        await rowsWhen(
          dashboard,
          (rows) => rows.filter((row) => row.outcome === 'complete').length === 3,
        );
        expect((await worker.term()).code).toBe(0);
        await expect(fetch(`${dashboard.base}/api/state`)).rejects.toThrow();
      } finally {
        await engine.close();
      }
    });
  },
);
