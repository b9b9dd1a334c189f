import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { eventLog, expectResultsExactlyOnce, type Rig, scripted, startRig } from './helpers.js';

// After a cancel, a child has `cancelGraceMs` to settle before main terminates its worker. A
// cancel answers the child's running tool calls at once, so only a worker blocked in a
// synchronous loop (or slow with a burst) lets a grace run out. A worker that still answers main
// is not stuck: the child gets one more grace, two in all, before its worker is terminated anyway.

const CANCEL_TOOLS = fileURLToPath(new URL('./fixtures/cancel-tools.mjs', import.meta.url));
const GRACE_MS = 1000;

let rig: Rig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

async function startInTools(
  count: number,
  steps: (index: number) => Parameters<typeof scripted>[0],
) {
  rig = await startRig({ threads: 1, cancelGraceMs: GRACE_MS, toolModules: [CANCEL_TOOLS] });
  const log = eventLog();
  const handles = Array.from({ length: count }, (_, index) =>
    rig!.engine.spawn({
      title: `child ${index}`,
      prompt: scripted(steps(index)),
      onEvent: log.onEvent,
    }),
  );
  for (const handle of handles) {
    await log.waitFor((event) => event.type === 'tool-call' && event.agentId === handle.id);
  }
  return { handles, log };
}

describe('cancel grace', () => {
  it('does not wait for cancelled children slow to stop: each is answered at once', async () => {
    // They would stop 1.2 to 1.6 s after their cancel, past a grace: their calls are answered
    // at once instead, so they settle through their worker and none is terminated.
    const { handles, log } = await startInTools(3, (index) => [
      { calls: [{ name: 'linger', input: { ms: 1200 + 200 * index } }] },
    ]);
    for (const handle of handles) handle.cancel('user');
    for (const handle of handles) {
      expect(await handle.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
    }
    expect(log.resumed()).toEqual([]);
    expectResultsExactlyOnce(rig!.engine, { allFromWorkers: true });
  });

  it('does not terminate the worker of a child whose tool ignores its cancel', async () => {
    const { handles, log } = await startInTools(2, (index) => [
      { calls: [{ name: index === 0 ? 'ignore' : 'linger', input: { ms: 60_000 } }] },
    ]);
    const [ignoring, sibling] = handles;
    ignoring!.cancel('user');
    expect(await ignoring!.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
    sibling!.cancel('user');
    expect((await sibling!.result).outcome).toBe('cancelled');
    expect(log.resumed()).toEqual([]);
    expectResultsExactlyOnce(rig!.engine, { allFromWorkers: true });
  });

  it('gives no more graces while the engine closes: a blocked worker is terminated', async () => {
    // Their worker is blocked for 1.5 graces after the close: within a second grace, were there
    // one.
    const { handles } = await startInTools(2, () => [
      { calls: [{ name: 'block', input: { ms: 1.5 * GRACE_MS } }] },
    ]);
    await rig!.engine.close();
    for (const handle of handles) {
      expect(await handle.result).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
    }
    // Their worker was terminated after one grace: main made their results.
    expect(rig!.engine.stats.mainResults).toBe(2);
    expectResultsExactlyOnce(rig!.engine);
  });

  it('terminates the worker of a child that blocks its thread past its grace', async () => {
    // The sibling reaches its tool first: a blocked thread would hold its request up.
    const { handles, log } = await startInTools(2, (index) => [
      index === 0
        ? { delayMs: 500, calls: [{ name: 'block', input: { ms: 60_000 } }] }
        : { calls: [{ name: 'linger', input: { ms: 60_000 } }] },
      { reply: 'the sibling finished on a fresh worker' },
    ]);
    const [stuck, sibling] = handles;
    stuck!.cancel('user');
    expect(await stuck!.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
    // Its worker was terminated: the result was made on main, the sibling resumed elsewhere.
    expect(rig!.engine.stats.mainResults).toBe(1);
    await log.waitFor((event) => event.type === 'agent-resume' && event.agentId === sibling!.id);
    sibling!.cancel('user');
    expect((await sibling!.result).outcome).toBe('cancelled');
    expectResultsExactlyOnce(rig!.engine);
  });
});
