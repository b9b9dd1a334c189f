import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../src/main/engine.js';
import { runCli } from './cli-helpers.js';
import {
  assertToolUsesAnswered,
  eventLog,
  expectResultsExactlyOnce,
  hostGate,
  type Rig,
  readTranscript,
  scripted,
  startRig,
  TEST_TOOLS,
  tempDir,
} from './helpers.js';

// One thread, so the waiting agents and the culprit share the worker that dies. maxCrashes 1:
// one blame is enough to fail an agent, so a wrongly blamed waiter fails at once instead of
// resuming, and the culprit is done after its first crash.
let rig: Rig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

describe('crash blame: only an agent running a tool in the dying worker is blamed', () => {
  for (const tool of ['exit', 'crash'] as const) {
    it(`a parent blocked in a sync agent call is not blamed when a sibling's \`${tool}\` kills the worker`, async () => {
      const hold = hostGate('hold');
      rig = await startRig({ threads: 1, maxDepth: 2, maxCrashes: 1, hostTools: [hold.tool] });
      const log = eventLog();
      // The parent waits in `agent` (served on main) on a grandchild that waits in a host tool.
      const parent = rig.engine.spawn({
        title: 'parent',
        prompt: scripted([
          {
            calls: [
              {
                name: 'agent',
                input: {
                  title: 'gc',
                  prompt: scripted([
                    { calls: [{ name: 'hold', input: {} }] },
                    { reply: 'grandchild done' },
                  ]),
                },
              },
            ],
          },
          { reply: 'parent done' },
        ]),
        onEvent: log.onEvent,
      });
      await hold.entered();
      const culprit = await rig.engine.run({
        title: 'culprit',
        prompt: scripted([{ calls: [{ name: tool, input: {} }] }]),
      });
      expect(culprit).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });
      // The parent lost its worker but was not blamed: it resumes and redoes its step.
      hold.open();
      const result = await parent.result;
      expect(result).toMatchObject({ outcome: 'complete', text: 'parent done' });
      expect(log.resumed()).toContain(parent.id);
      assertToolUsesAnswered(readTranscript(result));
      const stats = rig.engine.stats;
      expect(stats.crashRecords).toBe(0);
      expectResultsExactlyOnce(rig.engine);
    });
  }

  it('a child blocked in a slow host tool is not blamed when a sibling crashes the worker', async () => {
    const hold = hostGate('hold');
    rig = await startRig({ threads: 1, maxCrashes: 1, hostTools: [hold.tool] });
    const log = eventLog();
    const waiter = rig.engine.spawn({
      title: 'waiter',
      prompt: scripted([{ calls: [{ name: 'hold', input: {} }] }, { reply: 'waiter done' }]),
      onEvent: log.onEvent,
    });
    await hold.entered();
    const culprit = await rig.engine.run({
      title: 'culprit',
      prompt: scripted([{ calls: [{ name: 'exit', input: {} }] }]),
    });
    expect(culprit).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });
    hold.open();
    const result = await waiter.result;
    expect(result).toMatchObject({ outcome: 'complete', text: 'waiter done' });
    expect(log.resumed()).toEqual([waiter.id]);
    // It redid its step from the last commit: the host call was made again.
    expect(hold.calls).toBe(2);
    assertToolUsesAnswered(readTranscript(result));
    expect(rig.engine.stats.crashRecords).toBe(0);
    expectResultsExactlyOnce(rig.engine);
  });

  it('crash records are pruned once every child of the dead worker is judged', async () => {
    rig = await startRig({ threads: 1, maxCrashes: 1 });
    const culprits = await Promise.all(
      ['one', 'two'].map((title) =>
        rig!.engine.run({ title, prompt: scripted([{ calls: [{ name: 'exit', input: {} }] }]) }),
      ),
    );
    for (const culprit of culprits) expect(culprit.code).toBe('worker_crashed');
    expect(rig.engine.stats.crashRecords).toBe(0);
    // The pool goes on, and a later crash is judged afresh.
    expect((await rig.engine.run({ prompt: scripted([{ reply: 'still here' }]) })).text).toBe(
      'still here',
    );
    const again = await rig.engine.run({
      title: 'three',
      prompt: scripted([{ calls: [{ name: 'crash', input: {} }] }]),
    });
    expect(again.code).toBe('worker_crashed');
    expect(rig.engine.stats.crashRecords).toBe(0);
    expectResultsExactlyOnce(rig.engine);
  });

  it('a child whose start main has not read yet is not blamed for the crash of its worker', async () => {
    // The model runs in its own process, so it answers while main is busy below.
    const server = runCli(['mock', '--port', '0']);
    try {
      await server.waitFor(/listening on (http:\/\/\S+)/, 'stdout');
      const url = /listening on (http:\/\/\S+)/.exec(server.stdout())![1]!;
      const engine = await Engine.start({
        threads: 1,
        maxCrashes: 1,
        logDir: tempDir('cohort-logs-'),
        toolModules: [TEST_TOOLS],
        provider: { baseURL: url, model: 'cohort-scripted', maxRetries: 0 },
      });
      try {
        const culprit = engine.spawn({
          title: 'culprit',
          prompt: scripted([{ calls: [{ name: 'crash', input: {} }] }]),
        });
        const innocent = engine.spawn({
          title: 'innocent',
          prompt: scripted([{ delayMs: 1500, reply: 'made it' }]),
        });
        // Main is busy (as under load) while both start and the culprit's tool kills the
        // worker: when main looks, the worker is dead and the innocent's `started` is unread.
        // This orders the two, it measures nothing.
        const until = Date.now() + 1000;
        while (Date.now() < until) {}
        expect(await culprit.result).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });
        expect(await innocent.result).toMatchObject({ outcome: 'complete', text: 'made it' });
        expect(engine.stats.crashRecords).toBe(0);
        expectResultsExactlyOnce(engine);
      } finally {
        await engine.close();
      }
    } finally {
      server.child.kill();
      await server.exit;
    }
  });
});
