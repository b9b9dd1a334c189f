import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { Session, type SessionEvent } from '../src/main/session.js';
import type { Admission } from '../src/shared/governor/types.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import type { AnyTool } from '../src/shared/tools/types.js';
import {
  assertToolUsesAnswered,
  asyncAgent,
  contentBlocks,
  nextEvent,
  type Rig,
  readHistory,
  readJournal,
  readTranscript,
  scripted,
  startRig,
} from './helpers.js';

/** A latch the test opens; host tools wait on it from inside worker threads. */
interface Latch {
  open(): void;
  opened: Promise<void>;
  readonly isOpen: boolean;
}

function latch(): Latch {
  let resolve!: () => void;
  const opened = new Promise<void>((done) => {
    resolve = done;
  });
  let isOpen = false;
  return {
    open: () => {
      isOpen = true;
      resolve();
    },
    opened,
    get isOpen() {
      return isOpen;
    },
  };
}

/** The `gate` host tool's latch, and the callers that reached it. */
interface Gate extends Latch {
  /** Resolves once `count` callers have reached the gate. */
  reached(count: number): Promise<void>;
  arrive(): void;
}

function makeGate(): Gate {
  const base = latch();
  let arrivals = 0;
  const waiters: { count: number; resolve: () => void }[] = [];
  return {
    open: base.open,
    opened: base.opened,
    get isOpen() {
      return base.isOpen;
    },
    reached: (count) =>
      new Promise<void>((resolve) => {
        if (arrivals >= count) resolve();
        else waiters.push({ count, resolve });
      }),
    arrive: () => {
      arrivals++;
      for (const waiter of waiters.filter((waiter) => waiter.count <= arrivals)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    },
  };
}

// The host tools' latches. Each test gets fresh, closed ones (beforeEach): a latch left open by
// an earlier test would let a child straight through the point the test means to hold it at.
let gate: Gate;
let arrivals: number;
let hostCallStarted: Latch;
let hostWorkAborted: Latch;
let bothArrived: Latch;

beforeEach(() => {
  gate = makeGate();
  arrivals = 0;
  hostCallStarted = latch();
  hostWorkAborted = latch();
  bothArrived = latch();
});

const hostTools: AnyTool[] = [
  {
    name: 'gate',
    description: 'Waits until the test opens the gate.',
    inputSchema: { type: 'object' },
    run: async () => {
      gate.arrive();
      await gate.opened;
      return 'gate open';
    },
  },
  {
    name: 'barrier',
    description: 'Returns once two callers have arrived; deadlocks unless calls overlap.',
    inputSchema: { type: 'object' },
    run: async () => {
      arrivals++;
      if (arrivals === 2) bothArrived.open();
      await bothArrived.opened;
      return `arrived ${arrivals}`;
    },
  },
  {
    name: 'host_hang',
    description: 'Waits on the main thread until its signal aborts, and records that it did.',
    inputSchema: { type: 'object' },
    run: (_input: unknown, context: { signal: AbortSignal }) =>
      new Promise((_resolve, reject) => {
        hostCallStarted.open();
        context.signal.addEventListener(
          'abort',
          () => {
            hostWorkAborted.open();
            reject(new Error('aborted'));
          },
          { once: true },
        );
      }),
  },
  {
    name: 'host_echo',
    description: 'Runs on the main thread and says so.',
    inputSchema: { type: 'object', properties: { value: { type: 'string' } }, required: ['value'] },
    run: (input: { value: string }) => ({ fromMainThread: true, value: input.value }),
  },
];

/**
 * One engine for the tests that need no engine option of their own: each test gets a fresh
 * session on it and closes it (afterEach), so no agent of one test outlives it. A test that sets
 * an engine option, changes the engine (`setModel`) or kills a worker starts its own rig.
 */
let shared: Rig;
let rig: Rig | undefined;
let session: Session | undefined;

beforeAll(async () => {
  shared = await startRig({ threads: 1, hostTools });
});

afterAll(async () => {
  await shared.close();
});

afterEach(async () => {
  await session?.close();
  if (rig !== shared) await rig?.close();
  session = undefined;
  rig = undefined;
});

async function open(
  options: { maxDepth?: number; ceilingMs?: number; autoWake?: boolean; ownRig?: boolean } = {},
) {
  rig =
    options.maxDepth === undefined && options.ownRig !== true
      ? shared
      : await startRig({
          threads: 1,
          hostTools,
          ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
        });
  session = new Session(rig.engine, {
    autoWake: options.autoWake ?? false,
    ...(options.ceilingMs === undefined ? {} : { ceilingMs: options.ceilingMs }),
  });
  return { rig, session };
}

function resultHeaders(transcript: MessageParam[]): { id: string; outcome: string }[] {
  return transcript.flatMap((message) =>
    message.role !== 'user'
      ? []
      : contentBlocks(message).flatMap((block) => {
          if (block.type !== 'text') return [];
          const first = block.text.split('\n')[0]!;
          try {
            const header = JSON.parse(first) as { kind?: string; id: string; outcome: string };
            return header.kind === 'agent_result' ? [header] : [];
          } catch {
            return [];
          }
        }),
  );
}

describe('a session with async agents', () => {
  it('returns receipts at once, delivers every result exactly once at the next boundary, coalesced', async () => {
    const { session, rig } = await open();
    const gated = [{ calls: [{ name: 'gate', input: {} }] }, { reply: 'gated work done' }];
    const first = await session.send(
      scripted([
        { calls: [asyncAgent('one', gated), asyncAgent('two', gated)] },
        { calls: [{ name: 'agents', input: {} }] },
        { text: 'Waiting for my agents.' },
        { text: 'Both results are in.' },
      ]),
    );
    // The root's turn ended while both children were still blocked on the gate.
    expect(first).toMatchObject({ outcome: 'ready', text: 'Waiting for my agents.' });
    await gate.reached(2);
    expect(session.pending).toEqual([]);
    const live = session.list();
    expect(live.map((agent) => agent.title).sort()).toEqual(['one', 'two']);
    expect(live.every((agent) => agent.status === 'running' && agent.logDir === rig.logDir)).toBe(
      true,
    );
    // One receipt per call, in call order, naming the agent that is now live.
    const receipts = contentBlocks(session.transcript[2]!).map((block) =>
      block.type === 'tool_result' ? JSON.parse(String(block.content)) : block,
    );
    expect(receipts).toEqual(
      ['one', 'two'].map((title) => {
        const agent = live.find((candidate) => candidate.title === title)!;
        return { id: agent.id, title, status: 'started', logDir: agent.logDir };
      }),
    );
    expect(live.every((agent) => /^ag_/.test(agent.id))).toBe(true);
    const listed = contentBlocks(session.transcript[4]!)[0]!;
    expect(listed.type === 'tool_result' && String(listed.content)).toContain(live[0]!.id);

    // Nothing got past the gate before it opened.
    expect(gate.isOpen).toBe(false);
    // A running child's journal is written off its thread's event loop: wait for its prompt and
    // the response whose gate call it waits in (committed before the call ran).
    for (const agent of live) {
      await vi.waitFor(() => expect(readTranscript(agent)).toHaveLength(2), {
        timeout: 10_000,
      });
    }
    gate.open();
    await session.waitIdle();
    expect(session.pending).toHaveLength(2);
    const second = await session.send('Anything new?');
    expect(second.text).toBe('Both results are in.');
    const transcript = session.transcript;
    const headers = resultHeaders(transcript);
    expect(headers.map((header) => header.id).sort()).toEqual(live.map((agent) => agent.id).sort());
    // Both arrived in one synthetic user message, followed by the user's own text.
    const delivery = transcript.at(-2)!;
    expect(resultHeaders([delivery])).toHaveLength(2);
    expect(contentBlocks(delivery).at(-1)).toEqual({ type: 'text', text: 'Anything new?' });
    expect(session.delivered.map((result) => result.text)).toEqual([
      'gated work done',
      'gated work done',
    ]);
    assertToolUsesAnswered(transcript);
  });

  it('agent_cancel aborts the child request; the cancelled result is delivered like any other', async () => {
    const { rig, session } = await open();
    // The child's own request (only children are offered `reply`) is in flight.
    const requested = nextEvent<{ tools?: string[] }>(
      rig.model,
      'request',
      (event) => event.tools?.includes('reply') === true,
    );
    await session.send(
      scripted([
        { calls: [asyncAgent('slow', [{ delayMs: 60_000, reply: 'never' }])] },
        { text: 'started' },
      ]),
    );
    await requested;
    const [live] = session.list();
    const closed = nextEvent(rig.model, 'client-closed');
    expect(session.cancel(live!.id)).toEqual({ id: live!.id, wasLive: true });
    await closed;
    await session.waitIdle();
    expect(session.pending).toMatchObject([{ id: live!.id, outcome: 'cancelled', reason: 'user' }]);
    expect(session.cancel('ag_aaaaaaaaaaaa')).toEqual({ id: 'ag_aaaaaaaaaaaa', wasLive: false });
  });

  it('the reaper cancels an async agent at its ceiling with reason ceiling', async () => {
    const { session } = await open({ ceilingMs: 150 });
    await session.send(
      scripted([
        { calls: [asyncAgent('forever', [{ delayMs: 60_000, reply: 'x' }])] },
        { text: 'ok' },
      ]),
    );
    await session.waitIdle();
    expect(session.pending).toMatchObject([
      { title: 'forever', outcome: 'cancelled', reason: 'ceiling' },
    ]);
  });

  it('clear cancels live agents, empties transcript and inbox, and never delivers a stale result', async () => {
    const { session } = await open();
    const events: SessionEvent[] = [];
    const consume = (async () => {
      for await (const event of session.events()) events.push(event);
    })();
    const quick = Array.from({ length: 10 }, (_, index) =>
      asyncAgent(`quick${index}`, [{ reply: `r${index}` }]),
    );
    const slow = Array.from({ length: 5 }, (_, index) =>
      asyncAgent(`slow${index}`, [{ delayMs: 60_000, reply: 'x' }]),
    );
    await session.send(scripted([{ calls: [...quick, ...slow] }, { text: 'spawned' }]));
    // Clear while results are settling: some quick ones may be in the inbox, the rest not yet.
    session.clear();
    expect(session.generation).toBe(1);
    expect(session.transcript).toEqual([]);
    expect(session.pending).toEqual([]);
    await session.waitIdle();
    const after = await session.send(scripted([{ text: 'fresh start' }]));
    expect(after).toMatchObject({ outcome: 'ready', generation: 1 });
    expect(session.delivered).toEqual([]);
    expect(resultHeaders(session.transcript)).toEqual([]);
    await session.close();
    await consume;
    // Each of the 15 children settled exactly once, and each result, whenever it settled, was
    // reported stale exactly once: dropped from the inbox by clear, or refused on arrival.
    const started = events.flatMap((event) =>
      event.type === 'agent-start' ? [event.agentId] : [],
    );
    expect(started).toHaveLength(15);
    const settles = events.flatMap((event) =>
      event.type === 'agent-settle' ? [event.result] : [],
    );
    expect(settles.map((result) => result.id).sort()).toEqual([...started].sort());
    const stale = events.flatMap((event) => (event.type === 'agent-stale' ? [event.agentId] : []));
    expect(stale.sort()).toEqual([...started].sort());
    // The slow ones were still live at the clear: it cancelled them.
    expect(
      settles
        .filter((result) => result.title.startsWith('slow'))
        .map((result) => [result.outcome, result.reason]),
    ).toEqual(Array.from({ length: 5 }, () => ['cancelled', 'clear']));
  });

  it('clear right after its agents are admitted cancels each of them: none sends its request', async () => {
    const count = 6;
    // Its own engine: a governor that admits all of them at once, not 4 of a cold key's.
    const own = await startRig({ threads: 1, governor: { initialConcurrency: count } });
    const session = new Session(own.engine, { autoWake: false });
    const governor = own.engine.governor!;
    const admit = governor.admit.bind(governor);
    // The governor's grants are held until every agent has asked, then given in one turn, and
    // the clear follows them in that turn: the worker reads each grant and its cancel in one post
    // of its uplink, with no turn between them, as when a clear lands while agents are admitted.
    const granted: Promise<Admission>[] = [];
    const grants: ((admission: Admission) => void)[] = [];
    const spy = vi.spyOn(governor, 'admit').mockImplementation(
      (request, signal) =>
        new Promise((resolve) => {
          granted.push(admit(request, signal));
          grants.push(resolve);
          if (grants.length < count) return;
          void Promise.all(granted).then((admissions) => {
            for (const [index, admission] of admissions.entries()) grants[index]!(admission);
            // Once every grant's continuation has queued it for the worker, and before that
            // queue goes down (the next turn): the cancels join it.
            process.nextTick(() => session.clear());
          });
        }),
    );
    const { workerResults, mainResults } = own.engine.stats;
    let requests = 0;
    const onRequest = () => requests++;
    own.model.on('request', onRequest);
    const events: SessionEvent[] = [];
    const consume = (async () => {
      for await (const event of session.events()) events.push(event);
    })();
    try {
      const receipts = Array.from({ length: count }, (_, index) =>
        session.spawnAsync({ prompt: scripted([{ reply: `r${index}` }]), title: `c${index}` }),
      );
      await session.waitIdle();
      await session.close();
      await consume;
      expect(spy).toHaveBeenCalledTimes(count);
      const settles = events.flatMap((event) =>
        event.type === 'agent-settle' ? [event.result] : [],
      );
      expect(settles.map((result) => result.id).sort()).toEqual(
        receipts.map((receipt) => receipt.id).sort(),
      );
      expect(settles.map((result) => [result.outcome, result.reason])).toEqual(
        Array.from({ length: count }, () => ['cancelled', 'clear']),
      );
      // Cancelled before their request went (no model call), each by its worker: none was left
      // to its cancel grace, whose end main would have made its result for.
      expect(requests).toBe(0);
      expect(own.engine.stats.workerResults - workerResults).toBe(count);
      expect(own.engine.stats.mainResults).toBe(mainResults);
    } finally {
      spy.mockRestore();
      await session.close();
      await own.close();
    }
  });

  it('with autoWake, a settle while idle starts a turn by itself', async () => {
    const { session } = await open({ autoWake: true });
    const turns: number[] = [];
    const consume = (async () => {
      for await (const event of session.events())
        if (event.type === 'turn-start') turns.push(event.delivered);
    })();
    await session.send(
      scripted([
        { calls: [asyncAgent('a', [{ reply: 'hello from a' }])] },
        { text: 'started' },
        { text: 'woken' },
      ]),
    );
    await session.waitIdle();
    expect(session.delivered.map((result: AgentResult) => result.text)).toEqual(['hello from a']);
    expect(turns.reduce((sum, delivered) => sum + delivered, 0)).toBe(1);
    expect(session.transcript.at(-1)).toEqual({
      role: 'assistant',
      content: [{ type: 'text', text: 'woken' }],
    });
    await session.close();
    await consume;
  });
});

describe('sync agents, the root tool set, host tools and depth', () => {
  it('sync children of one batch overlap and their replies come back as tool results', async () => {
    const { session } = await open();
    const child = (title: string) => ({
      name: 'agent',
      input: {
        title,
        prompt: scripted([
          { calls: [{ name: 'barrier', input: {} }] },
          { reply: `${title} passed the barrier` },
        ]),
      },
    });
    const result = await session.send(
      scripted([{ calls: [child('left'), child('right')] }, { text: 'both joined' }]),
    );
    expect(result.text).toBe('both joined');
    const answers = contentBlocks(session.transcript[2]!).map((block) =>
      block.type === 'tool_result' ? block.content : '',
    );
    expect(answers).toEqual(['left passed the barrier', 'right passed the barrier']);
  });

  it('reply is not advertised to the root, and refused with is_error when called', async () => {
    const { rig, session } = await open();
    const seen = nextEvent<{ tools?: string[] }>(rig.model, 'request');
    const result = await session.send(
      scripted([{ reply: 'not allowed' }, { text: 'answered directly' }]),
    );
    expect((await seen).tools).not.toContain('reply');
    expect(result.text).toBe('answered directly');
    const refusal = contentBlocks(session.transcript[2]!)[0]!;
    expect(refusal).toMatchObject({ type: 'tool_result', is_error: true });
    expect(refusal.type === 'tool_result' && String(refusal.content)).toMatch(
      /only for sub-agents/,
    );
  });

  it('a child in a worker calls a host tool that runs on the main thread', async () => {
    const { rig } = await open();
    const result = await rig.engine.run({
      prompt: scripted([
        { calls: [{ name: 'host_echo', input: { value: 'ping' } }] },
        { reply: 'done' },
      ]),
    });
    expect(result.outcome).toBe('complete');
    const answer = contentBlocks(readTranscript(result)[2]!)[0]!;
    expect(answer.type === 'tool_result' && JSON.parse(String(answer.content))).toEqual({
      fromMainThread: true,
      value: 'ping',
    });
  });

  it('at maxDepth 2 a child spawns a sync and an async grandchild through the main thread', async () => {
    const { rig, session } = await open({ maxDepth: 2 });
    const grandchildSync = {
      name: 'agent',
      input: { title: 'gc-sync', prompt: scripted([{ reply: 'from the sync grandchild' }]) },
    };
    const grandchildAsync = {
      name: 'agent',
      input: {
        title: 'gc-async',
        mode: 'async',
        prompt: scripted([{ reply: 'from the async grandchild' }]),
      },
    };
    const childPrompt = scripted([
      { calls: [grandchildSync, grandchildAsync] },
      { text: 'waiting for my async grandchild' },
      { reply: 'child done' },
    ]);
    const result = await session.send(
      scripted([
        { calls: [{ name: 'agent', input: { title: 'child', prompt: childPrompt } }] },
        { text: 'root done' },
      ]),
    );
    expect(result.text).toBe('root done');
    const childAnswer = contentBlocks(session.transcript[2]!)[0]!;
    expect(childAnswer.type === 'tool_result' && childAnswer.content).toBe('child done');
    const childTranscript = readTranscript(journaledAgent(rig.logDir, 'child'));
    assertToolUsesAnswered(childTranscript);
    const firstAnswers = contentBlocks(childTranscript[2]!);
    expect(firstAnswers[0]).toMatchObject({
      type: 'tool_result',
      content: 'from the sync grandchild',
    });
    // The async grandchild's result reached the child through its own inbox.
    const delivered = resultHeaders(childTranscript);
    expect(delivered).toHaveLength(1);
    expect(JSON.stringify(childTranscript)).toContain('from the async grandchild');
  });

  it('host work is cancelled when the worker that asked for it dies', async () => {
    rig = await startRig({ hostTools, threads: 1, cancelGraceMs: 50 });
    const caller = rig.engine.spawn({
      prompt: scripted([{ calls: [{ name: 'host_hang', input: {} }] }]),
    });
    await hostCallStarted.opened;
    let spinning!: () => void;
    const inSpin = new Promise<void>((resolve) => {
      spinning = resolve;
    });
    const stuck = rig.engine.spawn({
      prompt: scripted([{ calls: [{ name: 'spin', input: {} }] }]),
      onEvent: (event) => {
        if (event.type === 'tool-call' && event.name === 'spin') spinning();
      },
    });
    await inSpin;
    // The caller's host call is still waiting: only the termination below may abort it.
    expect(hostWorkAborted.isOpen).toBe(false);
    stuck.cancel('user');
    // The worker is terminated: the host call the caller left behind is aborted, and the caller
    // resumes on a fresh worker (where it calls again; cancel it to end the test).
    await hostWorkAborted.opened;
    expect((await stuck.result).outcome).toBe('cancelled');
    caller.cancel('user');
    expect((await caller.result).outcome).toBe('cancelled');
  });

  it('setModel applies to children spawned afterwards; a running child keeps its model', async () => {
    // setModel changes the engine's model: an engine of its own keeps it from the other tests.
    const { rig, session } = await open({ ownRig: true });
    const before = session.spawnAsync({
      title: 'before',
      prompt: scripted([{ calls: [{ name: 'gate', input: {} }] }, { reply: 'x' }]),
    });
    // `before` is running, held at the gate, when the model changes and `after` runs.
    await gate.reached(1);
    session.setModel('model-b');
    const after = await rig.engine.run({ prompt: scripted([{ reply: 'y' }]) });
    expect(session.list()).toMatchObject([{ id: before.id, status: 'running' }]);
    expect(session.pending).toEqual([]);
    const meta = (agent: { id: string; logDir?: string }) =>
      readHistory(agent).meta as { model: string };
    // `before` is still running: its journal's writes may still be in flight.
    await vi.waitFor(
      () => {
        expect(readTranscript(before)).toHaveLength(2);
        expect(meta(before).model).toBe('cohort-scripted');
      },
      { timeout: 10_000 },
    );
    expect(meta(after).model).toBe('model-b');
    gate.open();
    await session.waitIdle();
    expect(session.pending).toMatchObject([{ id: before.id, outcome: 'complete', text: 'x' }]);
    // It went on past the gate to its reply, still under its own model.
    expect(readTranscript(before).length).toBeGreaterThan(2);
    expect(meta(before).model).toBe('cohort-scripted');
  });

  it('at maxDepth 1 a child is not given the spawn family', async () => {
    const { rig } = await open();
    const seen = nextEvent<{ tools?: string[] }>(
      rig.model,
      'request',
      (event) => event.tools?.includes('reply') === true,
    );
    await rig.engine.run({ prompt: scripted([{ reply: 'x' }]) });
    const tools = (await seen).tools!;
    expect(tools).not.toContain('agent');
    expect(tools).toContain('host_echo');
  });
});

/** The agent titled `title` in the journal of run folder `logDir`, as a result names it. */
function journaledAgent(logDir: string, title: string): { id: string; logDir: string } {
  for (const [id, history] of readJournal(logDir)) {
    if (history.meta?.title === title) return { id, logDir };
  }
  throw new Error(`no agent titled ${title} in the journal of ${logDir}`);
}
