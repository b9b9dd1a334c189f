/**
 * `cohort run --resume ID` after the CLI process was killed with -9 (issue 28): the real CLI in
 * child processes, the scripted model over HTTP recording every request, real worker threads and
 * the run journal the first process wrote. No completed step is asked of the model again, no
 * child starts twice, and each child's result reaches the root exactly once.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, type OnTestFinishedHandler } from 'vitest';
import {
  type ScriptedModel,
  type ScriptedRequestEvent,
  startScriptedModel,
} from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { readJournal, tempDir } from './helpers.js';
import { CHILDREN, child, childrenOf, deliveries, killedRun, setUp } from './run-resume-rig.js';

/**
 * A scripted model of the test's own, and the requests it has seen since `requests.length = 0`:
 * the two tests run side by side (each waits out its children's slow steps twice), so neither
 * may count the other's requests.
 */
async function ownModel(
  onTestFinished: (handler: OnTestFinishedHandler) => void,
): Promise<{ model: ScriptedModel; requests: ScriptedRequestEvent[] }> {
  const model = await startScriptedModel({ port: 0 });
  onTestFinished(() => model.close());
  const requests: ScriptedRequestEvent[] = [];
  model.on('request', (event: ScriptedRequestEvent) => requests.push(event));
  return { model, requests };
}

function checkResumed(dir: string, counters: string[], ids: string[]) {
  const root = readJournal(dir).get('root')!;
  const children = childrenOf(dir);
  // The same five children, each resumed once under its own id, each complete.
  expect(children.map((agent) => agent.id).sort()).toEqual([...ids].sort());
  for (const agent of children) {
    expect(agent.inc).toBe(1);
    expect(agent.result?.outcome).toBe('complete');
  }
  // Each result is in the root's conversation exactly once.
  const delivered = deliveries(root);
  expect([...delivered.keys()].sort()).toEqual([...ids].sort());
  expect([...delivered.values()].every((count) => count === 1)).toBe(true);
  // Each child's first step's tool ran once, its second once (before the kill it had not run).
  for (const counter of counters) expect(readFileSync(counter, 'utf8')).toBe('ran\nran\n');
}

describe.concurrent('cohort run --resume after kill -9', () => {
  it('five async children killed mid-step go on; no finished step is asked again', async ({
    onTestFinished,
  }) => {
    const { model, requests } = await ownModel(onTestFinished);
    const rig = setUp(model);
    const { id, dir } = await killedRun(rig);
    const ids = childrenOf(dir).map((agent) => agent.id);

    requests.length = 0;
    const again = runCli(['run', '--resume', id, ...rig.common]);
    const done = await again.exit;
    expect(done.code, again.stderr()).toBe(0);
    const lines = again
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines[0]).toMatchObject({
      type: 'run',
      id,
      logDir: dir,
      resumed: { resumed: CHILDREN, undelivered: 0, corrupt: 0 },
    });
    expect(lines.at(-1)).toMatchObject({ type: 'final', outcome: 'ready' });
    // The root's two finished steps are not asked again: its requests are its wake-ups.
    const rootTurns = requests.filter((event) => event.tools.includes('agent'));
    expect(rootTurns.length).toBeGreaterThan(0);
    expect(rootTurns.every((event) => event.turn >= 2)).toBe(true);
    // Each child asks its second step (cut short by the kill) and its third; never its first.
    const childTurns = requests.filter((event) => !event.tools.includes('agent'));
    expect(childTurns.filter((event) => event.turn === 0)).toHaveLength(0);
    expect(childTurns.filter((event) => event.turn === 1)).toHaveLength(CHILDREN);
    expect(childTurns.filter((event) => event.turn === 2)).toHaveLength(CHILDREN);
    checkResumed(dir, rig.counters, ids);
  }, 60_000);

  it("killed with the root's spawning step still running its tools, the resume re-runs the step's calls and finds the children it started", async ({
    onTestFinished,
  }) => {
    const { model, requests } = await ownModel(onTestFinished);
    const released = path.join(tempDir(), 'released');
    const rig = setUp(model, (files) => [
      ...files.map((file, index) => child(index, file)),
      // Holds the root's step open past the kill: its response is committed, its calls are not.
      // Run again by the resume, it ends at once: the file is made after the kill.
      { name: 'sleep', input: { ms: 8000, until: released } },
    ]);
    const { id, dir } = await killedRun(rig);
    writeFileSync(released, '');
    const before = readJournal(dir).get('root')!;
    expect(before.messages.at(-1)?.role).toBe('assistant');
    const ids = childrenOf(dir).map((agent) => agent.id);

    requests.length = 0;
    const again = runCli(['run', '--resume', id, ...rig.common]);
    expect((await again.exit).code, again.stderr()).toBe(0);
    // The root's spawning step is not asked again: its calls run again and find their children.
    const rootTurns = requests.filter((event) => event.tools.includes('agent'));
    expect(rootTurns.every((event) => event.turn >= 1)).toBe(true);
    const childTurns = requests.filter((event) => !event.tools.includes('agent'));
    expect(childTurns.filter((event) => event.turn === 0)).toHaveLength(0);
    checkResumed(dir, rig.counters, ids);
    // The receipts the calls answered with name the children started before the kill.
    const root = readJournal(dir).get('root')!;
    const receipts = JSON.stringify(root.messages[2]);
    for (const childId of ids) expect(receipts).toContain(childId);
  }, 60_000);
});
