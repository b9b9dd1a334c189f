import { afterEach, describe, expect, it, vi } from 'vitest';
import { Engine, type EngineOptions } from '../src/main/engine.js';
import { Session } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import { runCli } from './cli-helpers.js';
import { hostGate, type Rig, scripted, startRig, tempDir } from './helpers.js';

// Node fires a timer longer than 2³¹−1 ms after 1 ms: a ceiling of 30 days used to reap every
// async agent at once. Every duration is refused above that bound, with a message that says it.
const BOUND_MS = 2 ** 31 - 1;
const THIRTY_DAYS_MS = 30 * 24 * 3_600_000;
const SAYS_BOUND = new RegExp(`at most ${BOUND_MS}|to ${BOUND_MS}`);

/** Starts an engine with `options`; the error it was refused with, or 'started' (then closed). */
async function refusal(options: EngineOptions): Promise<unknown> {
  try {
    const engine = await Engine.start({ threads: 1, logDir: tempDir(), ...options });
    await engine.close();
    return 'started';
  } catch (error) {
    return error;
  }
}

let rig: Rig | undefined;
let session: Session | undefined;

afterEach(async () => {
  await session?.close();
  await rig?.close();
  session = undefined;
  rig = undefined;
});

describe('durations above 2^31-1 ms are refused', () => {
  it.each([
    ['ceilingMs', { ceilingMs: THIRTY_DAYS_MS }],
    ['cancelGraceMs', { cancelGraceMs: 2 ** 31 }],
    ['provider.idleTimeoutMs', { provider: { idleTimeoutMs: 2 ** 31 } }],
  ] as const)('Engine.start refuses %s, saying the bound', async (name, options) => {
    const error = await refusal(options as EngineOptions);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toContain(`\`${name}\``);
    expect((error as Error).message).toMatch(SAYS_BOUND);
  });

  it('new Session refuses a 30-day ceilingMs, saying the bound', async () => {
    rig = await startRig({ threads: 1 });
    const engine = rig.engine;
    expect(() => new Session(engine, { ceilingMs: THIRTY_DAYS_MS })).toThrow(UsageError);
    expect(() => new Session(engine, { ceilingMs: THIRTY_DAYS_MS })).toThrow(SAYS_BOUND);
  });

  it('the CLI refuses --ceiling 720h with exit code 2 and the bound in the message', async () => {
    const run = runCli(['run', 'x', '--ceiling', '720h', '--log-dir', tempDir()]);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain('`--ceiling`');
    expect(run.stderr()).toMatch(SAYS_BOUND);
  });

  it('a ceiling at the bound is taken and does not reap: the async agent is still running after a round trip', async () => {
    const hold = hostGate('hold');
    rig = await startRig({ threads: 1, hostTools: [hold.tool] });
    session = new Session(rig.engine, { autoWake: false, ceilingMs: BOUND_MS });
    await session.send(
      scripted([
        {
          calls: [
            {
              name: 'agent',
              input: {
                title: 'long',
                mode: 'async',
                prompt: scripted([{ calls: [{ name: 'hold', input: {} }] }, { reply: 'x' }]),
              },
            },
          ],
        },
        { text: 'started' },
        { text: 'still here' },
      ]),
    );
    // A round trip through the provider: a reaper that fired after 1 ms has long fired by now.
    expect(await session.send('Anything new?')).toMatchObject({ text: 'still here' });
    // Its `started` may still be unread on main's side of the uplink (an ordering of two event
    // sources, not a delay): wait for it, then it must be running, not reaped.
    await vi.waitFor(() => expect(session!.list()[0]).toMatchObject({ status: 'running' }));
    const [live] = session.list();
    expect(live).toMatchObject({ title: 'long', status: 'running' });
    // Cancelled now by us, it was not cancelled before by its reaper: the first reason sticks.
    session.cancel(live!.id);
    await session.waitIdle();
    const results = [...session.delivered, ...session.pending];
    expect(results).toMatchObject([{ id: live!.id, outcome: 'cancelled', reason: 'user' }]);
  });
});
