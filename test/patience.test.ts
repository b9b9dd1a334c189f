import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkTaskLine, taskAgentOptions } from '../src/cli/task-lines.js';
import { parseAgentFile } from '../src/main/agents/load.js';
import { Engine, type EngineOptions } from '../src/main/engine.js';
import { Session } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { type Rig, readTranscript, scripted, startRig, tempDir } from './helpers.js';
import { startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// Per-agent patience (`patienceMs`): how long one request may keep being refused before its agent
// fails, set on a spawn, a task line, an agent file, a session or `--patience`, against the real
// engine, real workers, the scripted model over HTTP, the built CLI and real queue workers.
// Every refusal is a 429 with a 1 ms `retry-after-ms`, which the governor paces and does not
// count against `maxRetries`; a patience of 0 fails an agent at its first paced refusal, so
// nothing here waits on a clock.

/** A prompt whose request is refused 429 on every attempt. */
const refusedForever = (lead: string) =>
  scripted([{ reply: 'never', error: { status: 429, retryAfterMs: 1 } }], lead);

/** A prompt whose request is refused 429 on its first `times` attempts, then answered. */
const refusedThenAnswered = (lead: string, times: number, reply = `${lead} answered`) =>
  scripted([{ reply, error: { status: 429, retryAfterMs: 1 }, faultAttempts: times }], lead);

/** The result of an agent that ran out of patience at its first refusal. */
function expectOutOfPatience(result: AgentResult): void {
  expect(result).toMatchObject({ outcome: 'failed', code: 'rate_limited' });
  expect(result.reason).toContain('of paced retries');
  expect(result.reason).toContain('patienceMs');
  expect(result.usage.providerCalls).toBe(1);
}

/** The result of an agent paced through `refusals` 429s, more than its retries allow. */
function expectPacedThrough(result: AgentResult, refusals: number, text: string): void {
  expect(result).toMatchObject({ outcome: 'complete', text });
  expect(result.usage.providerCalls).toBe(refusals + 1);
}

const PATIENT = 10 * 60_000;

/** Agent files: one that gives up at once, one that waits ten minutes. */
function agentFiles(): string {
  const dir = tempDir('cohort-agents-');
  const file = (name: string, patienceMs: number) =>
    [
      '---',
      `name: ${name}`,
      `description: Waits ${patienceMs} ms for a refused request.`,
      `patienceMs: ${patienceMs}`,
      '---',
      `You are ${name}.`,
    ].join('\n');
  writeFileSync(path.join(dir, 'impatient.md'), file('impatient', 0));
  writeFileSync(path.join(dir, 'patient.md'), file('patient', PATIENT));
  return dir;
}

/**
 * An engine whose agents may spawn (depth 2) and have no retries of their own: an agent that gets
 * past a 429 was paced through it by the governor.
 */
function openRig(options: EngineOptions = {}): Promise<Rig> {
  return startRig({
    threads: 1,
    maxDepth: 2,
    agentsDir: agentFiles(),
    ...options,
    provider: { maxRetries: 0 },
  });
}

/** The tool results of a transcript's user messages, as text. */
function toolResults(messages: MessageParam[]): string[] {
  return messages.flatMap((message) =>
    message.role === 'user' && Array.isArray(message.content)
      ? message.content.flatMap((block) =>
          block.type === 'tool_result' ? [JSON.stringify(block.content)] : [],
        )
      : [],
  );
}

describe('patience at the engine’s default (15 minutes)', () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await openRig();
  });
  afterAll(() => rig.close());

  it('a spawn with patienceMs 0 fails at its first refusal; its sibling without one is paced through', async () => {
    const [impatient, sibling] = await Promise.all([
      rig.engine.run({ title: 'impatient', prompt: refusedForever('Spawn 0.'), patienceMs: 0 }),
      rig.engine.run({ title: 'sibling', prompt: refusedThenAnswered('Sibling.', 3) }),
    ]);
    expectOutOfPatience(impatient);
    expectPacedThrough(sibling, 3, 'Sibling. answered');
  });

  it('an agent file’s patienceMs is its spawns’ default, and a spawn’s own wins over it', async () => {
    const [fromFile, overridden] = await Promise.all([
      rig.engine.run({ agent: 'impatient', prompt: refusedForever('File 0.') }),
      rig.engine.run({
        agent: 'impatient',
        prompt: refusedThenAnswered('File overridden.', 3),
        patienceMs: PATIENT,
      }),
    ]);
    expectOutOfPatience(fromFile);
    expectPacedThrough(overridden, 3, 'File overridden. answered');
  });

  it('an agent’s own agents inherit its patience, unless their agent file sets one', async () => {
    const parent = await rig.engine.run({
      title: 'parent',
      patienceMs: 0,
      prompt: scripted(
        [
          {
            calls: [
              { name: 'agent', input: { title: 'heir', prompt: refusedForever('Heir.') } },
              {
                name: 'agent',
                input: {
                  title: 'own',
                  agent: 'patient',
                  prompt: refusedThenAnswered('Own.', 3, 'own file waited'),
                },
              },
            ],
          },
          { reply: 'children done' },
        ],
        'Parent.',
      ),
    });
    expect(parent).toMatchObject({ outcome: 'complete', text: 'children done' });
    const [heir, own] = toolResults(readTranscript(parent));
    expect(heir).toContain("agent 'heir' failed");
    expect(heir).toContain('of paced retries');
    expect(own).toContain('own file waited');
  });

  it('a session’s patienceMs holds for the root’s requests and its agents inherit it', async () => {
    const session = new Session(rig.engine, { patienceMs: 0 });
    try {
      const turn = await session.send(
        scripted(
          [
            {
              calls: [{ name: 'agent', input: { title: 'child', prompt: refusedForever('Kid.') } }],
            },
            { text: 'root done' },
          ],
          'Root spawns.',
        ),
      );
      expect(turn).toMatchObject({ outcome: 'ready', text: 'root done' });
      expect(toolResults(session.transcript).join('\n')).toContain('of paced retries');
    } finally {
      await session.close();
    }
    const refusedRoot = new Session(rig.engine, { patienceMs: 0 });
    try {
      const turn = await refusedRoot.send(refusedForever('Root refused.'));
      expect(turn).toMatchObject({ outcome: 'failed', code: 'rate_limited' });
      expect(turn.reason).toContain('of paced retries');
      expect(turn.usage.providerCalls).toBe(1);
    } finally {
      await refusedRoot.close();
    }
  });

  it('refuses a patienceMs that is not a whole number of ms from 0, naming it', async () => {
    for (const [value, shown] of [
      [-1, '`-1` (number)'],
      [1.5, '`1.5` (number)'],
      ['30s', '`30s` (string)'],
    ] as const) {
      expect(() =>
        rig.engine.spawn({ prompt: 'x', patienceMs: value as unknown as number }),
      ).toThrow(
        new UsageError(
          `Expected \`patienceMs\` to be a whole number of milliseconds from 0 to 2147483647 (about 24.8 days), got ${shown}`,
        ),
      );
    }
    expect(() => new Session(rig.engine, { patienceMs: -1 })).toThrow(/`patienceMs`/);
  });
});

describe('an engine whose governor.patienceMs is 0', () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await openRig({ governor: { patienceMs: 0 } });
  });
  afterAll(() => rig.close());

  it('fails a spawn with none at its first refusal; a spawn’s or an agent file’s own wins', async () => {
    const [plain, spawned, filed] = await Promise.all([
      rig.engine.run({ title: 'plain', prompt: refusedForever('Engine 0.') }),
      rig.engine.run({
        title: 'spawned',
        prompt: refusedThenAnswered('Spawn patient.', 3),
        patienceMs: PATIENT,
      }),
      rig.engine.run({ agent: 'patient', prompt: refusedThenAnswered('File patient.', 3) }),
    ]);
    expectOutOfPatience(plain);
    expectPacedThrough(spawned, 3, 'Spawn patient. answered');
    expectPacedThrough(filed, 3, 'File patient. answered');
  });
});

describe('patienceMs in a task line', () => {
  const expectedWords =
    'expected `patienceMs` to be a whole number of milliseconds from 0 to 2147483647 (about 24.8 days)';

  it('is taken as the task’s and refused, in the line’s words, when it is not whole ms from 0', () => {
    const good = checkTaskLine('{"id":"a","prompt":"x","patienceMs":30000}');
    expect(good).toMatchObject({ ok: true, task: { patienceMs: 30000 } });
    if (good.ok) expect(taskAgentOptions(good.task).patienceMs).toBe(30000);
    expect(checkTaskLine('{"id":"a","prompt":"x","patienceMs":-1}')).toEqual({
      ok: false,
      message: `${expectedWords}, got \`-1\` (number)`,
    });
    expect(checkTaskLine('{"id":"a","prompt":"x","patienceMs":"abc"}')).toEqual({
      ok: false,
      message: `${expectedWords}, got \`abc\` (string)`,
    });
  });

  describe('through cohort batch', () => {
    let model: ScriptedModel;
    beforeAll(async () => {
      model = await startScriptedModel({ port: 0 });
    });
    afterAll(() => model.close());

    /** Runs `cohort batch` on `lines`; the exit code, stderr, result lines by task id and file. */
    async function batch(lines: object[], flags: string[] = []) {
      const file = path.join(tempDir(), 'tasks.jsonl');
      writeFileSync(file, lines.map((line) => JSON.stringify(line)).join('\n'));
      const out = path.join(tempDir(), 'results.jsonl');
      const run = runCli(['batch', file, '--out', out, '--base-url', model.url, ...flags]);
      const { code } = await run.exit;
      const results = new Map(readResultLines(out).map((line) => [line.taskId, line]));
      return { code, stderr: run.stderr(), results, file };
    }

    // More refusals than the CLI's default retries (4): only pacing gets a task past them.
    const REFUSALS = 6;

    it('a task line’s patienceMs fails that task alone; a bad value is its line’s error', async () => {
      const { code, stderr, results, file } = await batch([
        { id: 'impatient', prompt: refusedForever('Line 0.'), patienceMs: 0 },
        { id: 'sibling', prompt: refusedThenAnswered('Line sibling.', REFUSALS) },
        { id: 'negative', prompt: 'x', patienceMs: -1 },
        { id: 'word', prompt: 'x', patienceMs: 'abc' },
      ]);
      expect(code).toBe(1);
      expect(results.get('impatient')).toMatchObject({ outcome: 'failed', code: 'rate_limited' });
      expect(results.get('impatient')?.reason).toContain('of paced retries');
      expect(results.get('sibling')).toMatchObject({ outcome: 'complete' });
      expect([...results.keys()].sort()).toEqual(['impatient', 'sibling']);
      expect(stderr).toContain(`${file}:3: ${expectedWords}, got \`-1\` (number)`);
      expect(stderr).toContain(`${file}:4: ${expectedWords}, got \`abc\` (string)`);
    });

    it('--patience is every task’s default, and a task line’s patienceMs wins over it', async () => {
      const { code, results } = await batch(
        [
          { id: 'flag', prompt: refusedForever('Flag 0.') },
          { id: 'line', prompt: refusedThenAnswered('Line wins.', REFUSALS), patienceMs: PATIENT },
        ],
        ['--patience', '0s'],
      );
      expect(code).toBe(1);
      expect(results.get('flag')).toMatchObject({ outcome: 'failed', code: 'rate_limited' });
      expect(results.get('flag')?.reason).toContain('of paced retries');
      expect(results.get('line')).toMatchObject({ outcome: 'complete' });
    });
  });
});

describe('--patience', () => {
  it.each([
    [
      ['--patience', 'abc'],
      'Expected `--patience` to be a duration like 500ms, 2s, 5m, 1h or a number of milliseconds',
    ],
    [['--patience', '-5'], 'got `-5`'],
    [
      ['--patience', '30s', '--governor', 'off'],
      'Expected either `--governor off` or `--patience`, got both',
    ],
  ])('%j is a usage error that says what was expected (exit 2)', async (flags, message) => {
    const run = runCli(['agent', 'hello', ...flags]);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain(message);
  });

  it('is listed by the help of the commands that run agents', async () => {
    for (const command of ['agent', 'run', 'batch', 'worker']) {
      const run = runCli([command, '--help']);
      expect((await run.exit).code).toBe(0);
      expect(run.stdout()).toContain('--patience DURATION');
    }
  });
});

describe('patienceMs in an agent file', () => {
  const withPatience = (value: string) =>
    ['---', 'name: waiter', 'description: Waits.', `patienceMs: ${value}`, '---', 'Body.'].join(
      '\n',
    );

  it('is read as whole milliseconds, and anything else is refused at its line', () => {
    expect(parseAgentFile('/agents/waiter.md', withPatience('45000')).patienceMs).toBe(45_000);
    expect(parseAgentFile('/agents/waiter.md', withPatience('0')).patienceMs).toBe(0);
    for (const [value, shown] of [
      ['-1', '`-1` (number)'],
      ['30s', '`"30s"` (string)'],
    ]) {
      expect(() => parseAgentFile('/agents/waiter.md', withPatience(value!))).toThrow(
        `/agents/waiter.md:4: Expected \`patienceMs\` to be a whole number of milliseconds from 0 to 2147483647 (about 24.8 days), got ${shown}`,
      );
    }
  });
});

describe.skipIf(redisMissing)(
  redisMissing ? `patience in queue mode (skipped: ${redisMissing})` : 'patience in queue mode',
  () => {
    let redis: RedisRig;
    let model: ScriptedModel;
    let engine: Engine;

    beforeAll(async () => {
      redis = await startRedis();
      model = await startScriptedModel({ port: 0 });
      // The worker's governor has the default patience (15 minutes).
      await startWorkers(redis, 1, ['--queue-name', 'patience', '--threads', '1']);
      engine = await Engine.start({
        logDir: tempDir('cohort-logs-'),
        queue: { url: redis.socket, name: 'patience' },
        // The producer's own default travels in each job, over the worker's.
        governor: { patienceMs: 0 },
        provider: { baseURL: model.url, model: 'cohort-scripted', maxRetries: 0 },
      });
    });

    afterAll(async () => {
      await engine?.close();
      await stopWorkers();
      await model?.close();
      await redis?.stop();
    });

    it('a spawn’s patienceMs and the producer’s default cross Redis to the worker', async () => {
      const [producers, spawned] = await Promise.all([
        engine.run({ title: 'producer default', prompt: refusedForever('Queue 0.') }),
        engine.run({
          title: 'spawn patient',
          prompt: refusedThenAnswered('Queue patient.', 3),
          patienceMs: PATIENT,
        }),
      ]);
      expectOutOfPatience(producers);
      expectPacedThrough(spawned, 3, 'Queue patient. answered');
    });
  },
);
