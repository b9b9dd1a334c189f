/**
 * `Session.resume` in the library: a session closed mid-run (its agents cancelled as a shutdown)
 * taken up by a new engine on the same run folder. Real engines with real workers, the scripted
 * model over HTTP, the journal on disk between them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Engine, Session } from '../src/index.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { agentCall, readJournal, scripted, TEST_TOOLS, tempDir } from './helpers.js';

let model: ScriptedModel | undefined;
const engines: Engine[] = [];

afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
  await model?.close();
  model = undefined;
});

async function engineOn(logDir: string): Promise<Engine> {
  model ??= await startScriptedModel({ port: 0 });
  const engine = await Engine.start({
    threads: 1,
    logDir,
    toolModules: [TEST_TOOLS],
    provider: { baseURL: model.url, model: 'cohort-scripted', maxRetries: 0 },
  });
  engines.push(engine);
  return engine;
}

/** An async child whose second step is slow: a close lands in it. */
const slowChild = (title: string) =>
  agentCall(title, [{ text: 'first' }, { delayMs: 1500, reply: `${title} done` }], 'async');

function headers(session: Session): string[] {
  return session.transcript.flatMap((message) =>
    message.role === 'user' && typeof message.content !== 'string'
      ? message.content.flatMap((block) =>
          block.type === 'text' && block.text.startsWith('{"kind":"agent_result"')
            ? [(JSON.parse(block.text.split('\n', 1)[0]!) as { id: string }).id]
            : [],
        )
      : [],
  );
}

describe('Session.resume', () => {
  it('takes up a closed session: its transcript, its agents under their ids, each result once', async () => {
    const logDir = tempDir('cohort-session-resume-');
    const first = new Session(await engineOn(logDir), { autoWake: true });
    const turn = await first.send(
      scripted([
        { calls: [slowChild('a'), slowChild('b')] },
        { text: 'Waiting.' },
        { text: 'Noted.' },
        { text: 'Noted.' },
      ]),
    );
    expect(turn.text).toBe('Waiting.');
    const ids = first.list().map((agent) => agent.id);
    expect(ids).toHaveLength(2);
    // Closed while both are in their slow step: they end cancelled as a shutdown.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await first.close();
    await engines[0]!.close();

    const second = await Session.resume(await engineOn(logDir), { autoWake: true });
    expect(second.resumed).toMatchObject({ resumed: 2, undelivered: 0, corrupt: 0, ended: false });
    expect(second.transcript.slice(0, 4)).toEqual(first.transcript);
    expect(
      second
        .list()
        .map((agent) => agent.id)
        .sort(),
    ).toEqual([...ids].sort());
    await second.waitIdle();
    expect(second.delivered.map((result) => result.outcome)).toEqual(['complete', 'complete']);
    expect(headers(second).sort()).toEqual([...ids].sort());
    await second.close();
    const journal = readJournal(logDir);
    for (const id of ids) expect(journal.get(id)?.result?.outcome).toBe('complete');
    expect(journal.get('root')?.result?.outcome).toBe('complete');
  });

  it('keeps the generation: an agent of a cleared generation is not run again, and never delivered', async () => {
    const logDir = tempDir('cohort-session-resume-');
    const first = new Session(await engineOn(logDir), { autoWake: false });
    await first.send(scripted([{ calls: [slowChild('old')] }, { text: 'Started.' }]));
    first.clear();
    await first.send(scripted([{ calls: [slowChild('new')] }, { text: 'Started again.' }]));
    expect(first.generation).toBe(1);
    // The cleared one may still be settling: the current one is the one titled `new`.
    const current = first.list().find((agent) => agent.title === 'new');
    await first.close();
    await engines[0]!.close();

    const second = await Session.resume(await engineOn(logDir));
    expect(second.generation).toBe(1);
    // The transcript since the clear, not before it.
    expect(second.transcript).toEqual(first.transcript);
    expect(second.resumed?.resumed).toBe(1);
    expect(second.list().map((agent) => agent.id)).toEqual([current!.id]);
    await second.waitIdle();
    expect(second.pending.map((result) => result.id)).toEqual([current!.id]);
    await second.close();
  });

  it('refuses a folder without a session journal, saying what it expected', async () => {
    const engine = await engineOn(tempDir('cohort-session-resume-'));
    await expect(Session.resume(engine)).rejects.toThrow(
      /Expected a run journal in .*, got no journal records there/,
    );
    await engine.run({ prompt: scripted([{ reply: 'direct' }]) });
    await expect(Session.resume(engine)).rejects.toThrow(/got one with no root session/);
  });
});
