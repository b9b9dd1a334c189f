/**
 * What `cohort run --resume` refuses (exit 2, nothing run) and what it survives: a corrupt record
 * in the middle of the journal fails only the agent it belongs to, a torn last line is no record,
 * and a run stopped by SIGTERM goes on like one killed. Real CLI processes, the scripted model
 * over HTTP, journals written by real runs and then damaged on disk.
 */
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { runCli, writeTasks } from './cli-helpers.js';
import { agentCall, readJournal, tempDir } from './helpers.js';
import {
  CHILDREN,
  childrenOf,
  deliveries,
  inSecondSteps,
  killedRun,
  runId,
  setUp,
} from './run-resume-rig.js';

let model: ScriptedModel;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
});

afterAll(async () => {
  await model.close();
});

/** The segment files of the run in `dir`. */
function segments(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.startsWith('journal-'))
    .map((name) => path.join(dir, name));
}

describe('cohort run --resume refuses what it cannot resume, with exit 2', () => {
  it('an unknown id, a PROMPT beside it, a bad id, a batch run: each says what was expected', async () => {
    const rig = setUp(model);
    const unknown = runCli(['run', '--resume', 'no-such-run', ...rig.common]);
    expect((await unknown.exit).code).toBe(2);
    expect(unknown.stderr()).toMatch(
      /Expected --resume to name a run under .*no-such-run: there is no such folder/,
    );
    expect(unknown.stderr()).toContain('cohort logs list');

    const withPrompt = runCli(['run', 'hello', '--resume', 'x', ...rig.common]);
    expect((await withPrompt.exit).code).toBe(2);
    expect(withPrompt.stderr()).toMatch(/Expected no PROMPT with --resume .*got 1/);

    const badId = runCli(['run', '--resume', '../etc', ...rig.common]);
    expect((await badId.exit).code).toBe(2);
    expect(badId.stderr()).toMatch(/Expected `--resume` to be a plain folder name/);

    // A batch's run folder holds no root session: a rerun of the batch is its resume.
    const out = path.join(tempDir(), 'results.jsonl');
    const batch = runCli([
      'batch',
      writeTasks(1),
      '--out',
      out,
      '--run',
      'a-batch',
      '--base-url',
      model.url,
      '--log-dir',
      rig.logRoot,
    ]);
    expect((await batch.exit).code, batch.stderr()).toBe(0);
    const notSession = runCli(['run', '--resume', 'a-batch', ...rig.common]);
    expect((await notSession.exit).code).toBe(2);
    expect(notSession.stderr()).toMatch(
      /Expected the journal of a `cohort run` session .*got one with no root session/,
    );
  });

  it('a run that is still alive is locked: the second process names the first and exits 2', async () => {
    // One child whose step outlasts any load on the machine: the first run is alive until killed.
    const rig = setUp(model, () => [
      agentCall('long', [{ delayMs: 120_000, text: 'Still working.' }, { reply: 'done' }], 'async'),
    ]);
    const first = runCli(['run', rig.prompt, ...rig.common]);
    try {
      const id = await runId(first);
      const second = runCli(['run', '--resume', id, ...rig.common]);
      expect((await second.exit).code).toBe(2);
      expect(second.stderr()).toMatch(
        new RegExp(`Expected run ${id} to be free, got a lock held by pid ${first.child.pid}`),
      );
      expect(second.stdout()).toBe('');
    } finally {
      first.child.kill('SIGKILL');
      await first.exit;
    }
  });

  it("another version's journal: exit 2, and the journal is left as it was", async () => {
    const rig = setUp(model);
    const { id, dir } = await killedRun(rig);
    const file = segments(dir)[0]!;
    const text = readFileSync(file, 'utf8').replace('"v":1', '"v":99');
    writeFileSync(file, text);
    const again = runCli(['run', '--resume', id, ...rig.common]);
    expect((await again.exit).code).toBe(2);
    expect(again.stderr()).toMatch(
      /Expected a journal this cohort reads, got: .* is a journal of version 99; this cohort reads version 1/,
    );
    expect(readFileSync(file, 'utf8')).toBe(text);
  }, 60_000);
});

// Side by side: each test spends most of its time waiting out its children's slow steps.
describe.concurrent('cohort run --resume survives a damaged journal', () => {
  it('a corrupt record in the middle fails its agent journal_corrupt; a torn tail is no record; the rest goes on', async () => {
    const rig = setUp(model);
    const { id, dir } = await killedRun(rig);
    const children = childrenOf(dir);
    const victim = children[0]!.id;
    // Damage the victim's first step record where it lies, in the middle of its segment.
    let damaged = false;
    for (const file of segments(dir)) {
      const lines = readFileSync(file, 'utf8').split('\n');
      const at = lines.findIndex((line) => line.startsWith(`{"k":"step","a":"${victim}"`));
      if (at < 0) continue;
      lines[at] = `${lines[at]!.slice(0, 40)}#garbage`;
      writeFileSync(file, lines.join('\n'));
      // And a line cut short by the kill at the end of the same segment.
      appendFileSync(file, '{"k":"step","a":"ag_torn","inc":0,"m":[{"ro');
      damaged = true;
    }
    expect(damaged).toBe(true);

    const again = runCli(['run', '--resume', id, ...rig.common]);
    expect((await again.exit).code, again.stderr()).toBe(0);
    const first = JSON.parse(again.stdout().split('\n', 1)[0]!);
    expect(first.resumed).toMatchObject({ resumed: CHILDREN - 1, undelivered: 0, corrupt: 1 });
    const after = readJournal(dir);
    const failed = after.get(victim)!.result!;
    expect(failed).toMatchObject({ outcome: 'failed', code: 'journal_corrupt' });
    expect(failed.reason).toMatch(/does not parse/);
    for (const agent of childrenOf(dir).filter((agent) => agent.id !== victim)) {
      expect(agent.result?.outcome).toBe('complete');
    }
    // Every child's result, the failed one too, reached the root once.
    const delivered = deliveries(after.get('root')!);
    expect(delivered.size).toBe(CHILDREN);
    expect([...delivered.values()].every((count) => count === 1)).toBe(true);
    expect(after.has('ag_torn')).toBe(false);
  }, 60_000);

  it('a run stopped by SIGTERM (its agents cancelled as a shutdown) goes on like one killed', async ({
    onTestFinished,
  }) => {
    // A model of its own: it counts the requests of its last resume, and the test beside it
    // asks the shared one meanwhile.
    const own = await startScriptedModel({ port: 0 });
    onTestFinished(() => own.close());
    const rig = setUp(own, undefined, false);
    const first = runCli(['run', rig.prompt, ...rig.common]);
    await first.waitFor(/cohort: run (\S+); if it stops, go on with: cohort run --resume/);
    const id = /cohort: run (\S+);/.exec(first.stderr())![1]!;
    const dir = path.join(rig.logRoot, id);
    // Once every child is in its slow step.
    await first.waitFor(/Waiting for my agents\./, 'stdout');
    await inSecondSteps(dir);
    first.child.kill('SIGTERM');
    expect((await first.exit).code).toBe(143);
    const stopped = childrenOf(dir);
    expect(stopped.every((agent) => agent.result?.reason === 'shutdown')).toBe(true);

    const again = runCli(['run', '--resume', id, ...rig.common]);
    expect((await again.exit).code, again.stderr()).toBe(0);
    expect(again.stderr()).toMatch(
      new RegExp(`resuming run ${id}: ${CHILDREN} agent\\(s\\) go on`),
    );
    const after = readJournal(dir);
    for (const agent of childrenOf(dir)) expect(agent.result?.outcome).toBe('complete');
    const delivered = deliveries(after.get('root')!);
    expect(delivered.size).toBe(CHILDREN);
    expect([...delivered.values()].every((count) => count === 1)).toBe(true);

    // Resumed again once it has ended: nothing is left, and nothing is asked of the model.
    const requests = own.stats.requests;
    const third = runCli(['run', '--resume', id, ...rig.common]);
    expect((await third.exit).code, third.stderr()).toBe(0);
    expect(third.stderr()).toContain(`run ${id} had ended: nothing left to do`);
    expect(own.stats.requests).toBe(requests);
  }, 60_000);
});
