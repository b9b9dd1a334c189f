import { afterEach, describe, expect, it } from 'vitest';
import { Session, type SessionEvent } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import {
  asyncAgent,
  contentBlocks,
  expectResultsExactlyOnce,
  hostGate,
  type Rig,
  scripted,
  startRig,
} from './helpers.js';

let rig: Rig | undefined;
let session: Session | undefined;

afterEach(async () => {
  await session?.close();
  await rig?.close();
  session = undefined;
  rig = undefined;
});

/** Collects a session's events until `until` holds for one (inclusive) or the stream ends. */
function collect(
  source: Session,
  until: (event: SessionEvent) => boolean = () => false,
): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  const stream = source.events();
  return (async () => {
    for await (const event of stream) {
      events.push(event);
      if (until(event)) break;
    }
    return events;
  })();
}

function deliveredIds(transcript: MessageParam[]): string[] {
  return transcript.flatMap((message) =>
    message.role !== 'user'
      ? []
      : contentBlocks(message).flatMap((block) => {
          if (block.type !== 'text') return [];
          try {
            const header = JSON.parse(block.text.split('\n')[0]!) as { kind?: string; id: string };
            return header.kind === 'agent_result' ? [header.id] : [];
          } catch {
            return [];
          }
        }),
  );
}

describe('Session.close()', () => {
  it('a turn still queued ends cancelled (shutdown) without a provider request or a spawn; send() afterwards is refused', async () => {
    const hold = hostGate('hold');
    rig = await startRig({ threads: 1, hostTools: [hold.tool] });
    let requests = 0;
    rig.model.on('request', () => requests++);
    session = new Session(rig.engine, { autoWake: false });
    const events = collect(session);
    // Scripts are positional and read from the first message: the first turn waits inside a host
    // tool (the root runs it on main) until close aborts it; the steps after it are what the
    // queued second turn would play if it ran: start an agent, then answer.
    const first = session.send(
      scripted([
        { calls: [{ name: 'hold', input: {} }] },
        { calls: [asyncAgent('late', [{ reply: 'late work' }])] },
        { text: 'ran after close' },
      ]),
    );
    await hold.entered();
    const second = session.send('Go on.');
    await session.close();
    expect(await first).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
    expect(await second).toMatchObject({ outcome: 'cancelled', reason: 'shutdown', text: '' });
    // Only the first turn's one request reached the provider.
    expect(requests).toBe(1);
    const seen = await events;
    expect(seen.filter((event) => event.type === 'agent-start')).toEqual([]);
    expect(seen.filter((event) => event.type === 'turn-start')).toHaveLength(1);
    expect(rig.engine.liveCount).toBe(0);
    expect(rig.engine.stats.delivered).toBe(0);
    expectResultsExactlyOnce(rig.engine);
    await expect(session.send('after close')).rejects.toBeInstanceOf(UsageError);
    await expect(session.send('after close')).rejects.toThrow(/closed/);
    expect(requests).toBe(1);
  });
});

describe('Session.clear()', () => {
  it('every result it drops from the inbox is reported agent-stale, once, and never delivered', async () => {
    rig = await startRig({ threads: 1 });
    session = new Session(rig.engine, { autoWake: false });
    await session.send(
      scripted([
        { calls: [asyncAgent('a', [{ reply: 'from a' }]), asyncAgent('b', [{ reply: 'from b' }])] },
        { text: 'started' },
      ]),
    );
    await session.waitIdle();
    const pending = session.pending.map((result) => result.id);
    expect(pending).toHaveLength(2);
    const events = collect(session, (event) => event.type === 'session-clear');
    session.clear();
    const seen = await events;
    const stale = seen.flatMap((event) => (event.type === 'agent-stale' ? [event.agentId] : []));
    expect(stale.sort()).toEqual([...pending].sort());
    expect(session.pending).toEqual([]);
    const after = await session.send(scripted([{ text: 'fresh start' }]));
    expect(after).toMatchObject({ outcome: 'ready', text: 'fresh start', generation: 1 });
    expect(session.delivered).toEqual([]);
    expect(deliveredIds(session.transcript)).toEqual([]);
    expectResultsExactlyOnce(rig.engine);
  });
});
