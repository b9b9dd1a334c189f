import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOURNAL_VERSION, type JournalRecord, recordLine } from '../src/shared/journal/format.js';
import {
  histories,
  JournalVersionError,
  parseSegment,
  readRun,
} from '../src/shared/journal/reader.js';
import { compactJournal } from '../src/shared/journal/retention.js';
import { SegmentWriter } from '../src/shared/journal/writer.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import { restoreTranscript } from '../src/shared/restore.js';
import { type AgentResult, emptyUsage } from '../src/shared/result.js';
import {
  assertToolUsesAnswered,
  eventLog,
  hostGate,
  type Rig,
  readResult,
  readTranscript,
  scripted,
  startRig,
  TEST_TOOLS,
  tempDir,
} from './helpers.js';

const LOG_TOOLS = fileURLToPath(new URL('./fixtures/log-tools.mjs', import.meta.url));

const message = (agent: number, seq: number): MessageParam => ({
  role: 'user',
  content: `agent ${agent} message ${seq}`,
});

const agentId = (agent: number) => `ag_test${agent}`;

function resultOf(id: string, outcome: AgentResult['outcome'] = 'complete'): AgentResult {
  return {
    id,
    title: 'a title',
    outcome,
    text: 'the text',
    truncated: false,
    generation: 0,
    elapsedMs: 1,
    usage: { ...emptyUsage(), providerCalls: 1, steps: 1 },
  };
}

/** A pause of one kind: none, a microtask, the end of the event-loop turn, or a timer. */
function pause(kind: number): Promise<void> | undefined {
  if (kind === 0) return undefined;
  if (kind === 1) return Promise.resolve();
  if (kind === 2) return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => setTimeout(resolve, 1));
}

describe('a journal segment, on this thread', () => {
  it('records of many agents, interleaved at random, land whole and in order, one line each', async () => {
    const schedule = fc.array(
      fc.record({ agent: fc.integer({ min: 0, max: 7 }), pause: fc.integer({ min: 0, max: 3 }) }),
      { minLength: 1, maxLength: 120 },
    );
    await fc.assert(
      fc.asyncProperty(schedule, async (moves) => {
        const dir = tempDir('cohort-journal-');
        const writer = new SegmentWriter(path.join(dir, 'journal-1-main.jsonl'));
        const sent = new Map<number, number>();
        for (const move of moves) {
          const seq = sent.get(move.agent) ?? 0;
          sent.set(move.agent, seq + 1);
          writer.append(
            seq === 0
              ? {
                  k: 'start',
                  a: agentId(move.agent),
                  inc: 0,
                  at: 1,
                  meta: {},
                  m: [message(move.agent, 0)],
                }
              : { k: 'step', a: agentId(move.agent), inc: 0, m: [message(move.agent, seq)] },
          );
          await pause(move.pause);
        }
        await writer.close();
        const agents = await readRun(dir);
        expect(agents.size).toBe(sent.size);
        for (const [agent, count] of sent) {
          expect(agents.get(agentId(agent))!.messages).toEqual(
            Array.from({ length: count }, (_, seq) => message(agent, seq)),
          );
        }
        rmSync(dir, { recursive: true, force: true });
      }),
      { numRuns: 40 },
    );
  });

  it('writes nothing on the caller’s turn, and one write for a turn’s records; flushed resolves once they are there', async () => {
    const dir = tempDir('cohort-journal-');
    const file = path.join(dir, 'journal-1-main.jsonl');
    const writer = new SegmentWriter(file);
    for (let seq = 0; seq < 50; seq++)
      writer.append({ k: 'step', a: agentId(1), inc: 0, m: [message(1, seq)] });
    expect(readdirSync(dir)).toEqual([]);
    await writer.flushed();
    const lines = readFileSync(file, 'utf8').split('\n');
    // The segment's header, then the 50 records, each a whole line.
    expect(lines).toHaveLength(52);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      k: 'segment',
      v: JOURNAL_VERSION,
      thread: 'main',
    });
    expect(lines.at(-1)).toBe('');
    await writer.close();
  });

  it('a write that fails stops the segment: flushed still resolves, and nothing later is written', async () => {
    const dir = tempDir('cohort-journal-');
    // A folder where the segment's file should be: the open fails.
    const file = path.join(dir, 'journal-1-main.jsonl');
    mkdirSync(file);
    const writer = new SegmentWriter(file);
    writer.append({ k: 'step', a: agentId(1), inc: 0, m: [message(1, 0)] });
    await writer.flushed();
    expect(writer.failed).toBeInstanceOf(Error);
    writer.append({ k: 'step', a: agentId(1), inc: 0, m: [message(1, 1)] });
    await writer.flushed();
    expect(readdirSync(file)).toEqual([]);
  });

  it('a run folder removed before the first write is made again', async () => {
    const dir = path.join(tempDir('cohort-journal-'), 'run', 'gone');
    const writer = new SegmentWriter(path.join(dir, 'journal-1-main.jsonl'));
    writer.append({ k: 'result', a: agentId(1), at: 1, keep: true, r: resultOf(agentId(1)) });
    await writer.close();
    expect((await readRun(dir)).get(agentId(1))!.result).toEqual(resultOf(agentId(1)));
  });
});

describe('reading a journal back', () => {
  const start = (agent: number, inc: number, messages: MessageParam[]): JournalRecord => ({
    k: 'start',
    a: agentId(agent),
    inc,
    at: 1,
    meta: { inc },
    m: messages,
  });

  it('a torn last line is no record, and a corrupt one in the middle marks the agent it names', () => {
    const whole = [
      recordLine({ k: 'segment', v: JOURNAL_VERSION, pid: 1, thread: 'main', at: 1 }),
      recordLine(start(1, 0, [message(1, 0)])),
      recordLine(start(2, 0, [message(2, 0)])),
      `{"k":"step","a":"${agentId(2)}","inc":0,"m":[{"role":"us\n`,
      recordLine({ k: 'step', a: agentId(1), inc: 0, m: [message(1, 1)] }),
    ].join('');
    const torn = recordLine({ k: 'step', a: agentId(1), inc: 0, m: [message(1, 2)] }).slice(0, 30);
    const content = parseSegment('segment', whole + torn);
    expect([...content.corrupt]).toEqual([agentId(2)]);
    const agents = histories([content]);
    expect(agents.get(agentId(1))!.messages).toEqual([message(1, 0), message(1, 1)]);
    expect(agents.get(agentId(2))!.corrupt).toBe(true);
  });

  it('a journal of another version is refused, naming both versions', () => {
    const text = recordLine({ k: 'segment', v: 99, pid: 1, thread: 'main', at: 1 });
    expect(() => parseSegment('old.jsonl', text)).toThrow(JournalVersionError);
    expect(() => parseSegment('old.jsonl', text)).toThrow(
      /version 99; this cohort reads version 1/,
    );
  });

  it('an agent resumed on another thread: its latest run supersedes the old, whatever lands late', () => {
    const dead = parseSegment(
      'dead',
      [
        start(1, 0, [message(1, 0)]),
        { k: 'step', a: agentId(1), inc: 0, m: [message(1, 1)] } as JournalRecord,
        // Written by the dead worker after the resume began: not part of the resumed run.
        { k: 'step', a: agentId(1), inc: 0, m: [message(1, 9)] } as JournalRecord,
      ]
        .map(recordLine)
        .join(''),
    );
    const fresh = parseSegment(
      'fresh',
      [
        start(1, 1, [message(1, 0), message(1, 1)]),
        { k: 'step', a: agentId(1), inc: 1, m: [message(1, 2)] } as JournalRecord,
      ]
        .map(recordLine)
        .join(''),
    );
    for (const order of [
      [dead, fresh],
      [fresh, dead],
    ]) {
      const agent = histories(order).get(agentId(1))!;
      expect(agent.inc).toBe(1);
      expect(agent.messages).toEqual([message(1, 0), message(1, 1), message(1, 2)]);
    }
  });

  it('compaction drops the records of agents whose result is not kept, and a segment left empty', async () => {
    const dir = tempDir('cohort-journal-');
    const pid = 4242;
    const write = (thread: string, records: JournalRecord[]) =>
      writeFileSync(
        path.join(dir, `journal-${pid}-${thread}.jsonl`),
        [{ k: 'segment', v: JOURNAL_VERSION, pid, thread, at: 1 } as JournalRecord, ...records]
          .map(recordLine)
          .join(''),
      );
    write('t1', [
      start(1, 0, [message(1, 0)]),
      start(2, 0, [message(2, 0)]),
      { k: 'result', a: agentId(1), at: 2, keep: false, r: resultOf(agentId(1)) },
      { k: 'result', a: agentId(2), at: 2, keep: true, r: resultOf(agentId(2), 'failed') },
    ]);
    write('t2', [start(3, 0, [message(3, 0)])]);
    write('main', [{ k: 'result', a: agentId(3), at: 2, keep: false, r: resultOf(agentId(3)) }]);
    // Another process's segment is not this one's to compact.
    writeFileSync(path.join(dir, 'journal-7-t1.jsonl'), recordLine(start(4, 0, [message(4, 0)])));
    await compactJournal(dir, pid);
    expect(readdirSync(dir).sort()).toEqual(['journal-4242-t1.jsonl', 'journal-7-t1.jsonl']);
    const agents = await readRun(dir);
    expect([...agents.keys()].sort()).toEqual([agentId(2), agentId(4)]);
    expect(agents.get(agentId(2))!.result).toEqual(resultOf(agentId(2), 'failed'));
  });
});

describe('restoreTranscript at every point a worker may die', () => {
  it('a transcript cut at any whole line (or torn in the next) resumes from what was committed', () => {
    // A transcript as a child writes it: the prompt, then per step an assistant message with its
    // tool calls and one user message answering them all (the last step may be a reply).
    const transcript = fc
      .array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 6 })
      .map((calls) => {
        const lines = [JSON.stringify({ role: 'user', content: 'go' })];
        calls.forEach((count, step) => {
          const ids = Array.from({ length: count }, (_, index) => `toolu_${step}_${index}`);
          lines.push(
            JSON.stringify({
              role: 'assistant',
              content: ids.map((id) => ({ type: 'tool_use', id, name: 'echo', input: {} })),
            }),
            JSON.stringify({
              role: 'user',
              content: ids.map((id) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' })),
            }),
          );
        });
        return lines;
      });
    fc.assert(
      fc.property(transcript, fc.nat(), fc.nat(), (lines, cutAt, tearAt) => {
        const cut = cutAt % (lines.length + 1);
        const whole = lines
          .slice(0, cut)
          .map((text) => `${text}\n`)
          .join('');
        const next = lines[cut];
        const torn = next === undefined ? '' : next.slice(0, tearAt % next.length);
        const state = restoreTranscript(whole + torn);
        if (cut === 0) {
          expect(state).toBeUndefined();
          return;
        }
        // Every whole line is kept. An assistant message without its answers was committed
        // before its tools ran: its calls are pending (they run again, its request does not).
        expect(state?.messages.map((message) => JSON.stringify(message))).toEqual(
          lines.slice(0, cut),
        );
        expect(state?.steps).toBe(Math.floor(cut / 2));
        expect(state?.ended).toBeUndefined();
        if (cut % 2 === 1) expect(state?.pending).toBeUndefined();
        else {
          const last = JSON.parse(lines[cut - 1]!) as { content: { id: string }[] };
          expect(state?.pending?.map((call) => call.id)).toEqual(
            last.content.map((block) => block.id),
          );
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('the journal through the real pool', () => {
  let rig: Rig;
  const gate = hostGate('gate');

  beforeAll(async () => {
    rig = await startRig({ threads: 1, hostTools: [gate.tool], replyCap: 1000 });
  });

  afterAll(async () => {
    await rig.close();
  });

  it('sixty agents on one thread: the journal holds each one’s steps, whole and in order', async () => {
    const steps = 4;
    const handles = Array.from({ length: 60 }, (_, agent) =>
      rig.engine.spawn({
        title: `agent ${agent}`,
        prompt: scripted([
          ...Array.from({ length: steps }, (_, step) => ({
            calls: [{ name: 'echo', input: { value: `agent ${agent} step ${step}` } }],
          })),
          { reply: `agent ${agent} done` },
        ]),
      }),
    );
    const results = await Promise.all(handles.map((handle) => handle.result));
    for (const [agent, result] of results.entries()) {
      expect(result).toMatchObject({ outcome: 'complete', text: `agent ${agent} done` });
      const transcript = readTranscript(result);
      // The prompt, two messages per step, and the reply step's two.
      expect(transcript).toHaveLength(1 + 2 * (steps + 1));
      assertToolUsesAnswered(transcript);
      const echoed = transcript.flatMap((message) =>
        message.role === 'user' && Array.isArray(message.content)
          ? message.content.flatMap((block) =>
              block.type === 'tool_result' ? [String(block.content)] : [],
            )
          : [],
      );
      expect(echoed.slice(0, steps)).toEqual(
        Array.from({ length: steps }, (_, step) => `agent ${agent} step ${step}`),
      );
    }
  });

  it('a result is never delivered before its journal record and its reply file exist', async () => {
    const missing: string[] = [];
    let checked = 0;
    const onEvent = (event: { type: string; result?: AgentResult }) => {
      if (event.type !== 'agent-settle' || !event.result) return;
      // On main, at the moment of delivery: the worker posted the result after its writes.
      const { id, logDir, replyFile } = event.result;
      checked++;
      try {
        if (readResult(logDir!, id).outcome !== event.result.outcome)
          missing.push(`${id}: other outcome`);
      } catch (error) {
        missing.push(String(error));
      }
      try {
        readFileSync(replyFile!);
      } catch {
        missing.push(`${replyFile}`);
      }
    };
    const handles = Array.from({ length: 40 }, (_, agent) =>
      rig.engine.spawn({
        prompt: scripted([
          { calls: [{ name: 'echo', input: {} }] },
          // Past the reply cap: it spills.
          { reply: `reply ${agent} ${'x'.repeat(2000)}` },
        ]),
        onEvent,
        eventTypes: ['agent-settle'],
      }),
    );
    await Promise.all(handles.map((handle) => handle.result));
    expect(checked).toBe(40);
    expect(missing).toEqual([]);
  });

  it('the run folder removed mid-run: the result is delivered whole', async () => {
    const before = gate.calls;
    const handle = rig.engine.spawn({
      prompt: scripted([{ calls: [{ name: 'gate', input: {} }] }, { reply: 'done anyway' }]),
    });
    await gate.entered(before + 1);
    rmSync(rig.logDir, { recursive: true, force: true });
    gate.open();
    const result = await handle.result;
    expect(result).toMatchObject({ outcome: 'complete', text: 'done anyway' });
  });
});

describe('the journal through the real pool, when a write fails or a worker dies', () => {
  it('the reply file cannot be written: the result keeps its text and folder, and names no reply file', async () => {
    const gate = hostGate('gate');
    const rig = await startRig({ threads: 1, hostTools: [gate.tool], replyCap: 1000 });
    try {
      const report = `the report ${'x'.repeat(2000)}`;
      const handle = rig.engine.spawn({
        prompt: scripted([{ calls: [{ name: 'gate', input: {} }] }, { reply: report }]),
      });
      await gate.entered();
      // A folder where the spill should go: its write fails.
      mkdirSync(path.join(rig.logDir, 'replies', `${handle.id}.md`), { recursive: true });
      gate.open();
      const result = await handle.result;
      expect(result).toMatchObject({ outcome: 'complete', truncated: true, logDir: rig.logDir });
      expect(result.replyFile).toBeUndefined();
      expect(readResult(rig.logDir, handle.id)).toEqual(result);
      assertToolUsesAnswered(readTranscript(result));
    } finally {
      await rig.close();
    }
  });

  it('a worker dies after a step’s tools answered but before that answer’s write: its tools run again, not its request', async () => {
    const rig = await startRig({ threads: 1, toolModules: [TEST_TOOLS, LOG_TOOLS] });
    try {
      const requestsBefore = rig.model.stats.requests;
      const files = tempDir();
      const first = path.join(files, 'first.txt');
      const second = path.join(files, 'second.txt');
      const events = eventLog();
      const handle = rig.engine.spawn({
        prompt: scripted([
          { calls: [{ name: 'count', input: { file: first } }] },
          {
            calls: [
              {
                name: 'count_then_crash',
                // The prompt, the first step's two messages and this step's response are
                // committed before it runs; its answer is not.
                input: { file: second, logDir: rig.logDir, committed: 4 },
              },
            ],
          },
          { reply: 'survived' },
        ]),
        onEvent: events.onEvent,
      });
      const result = await handle.result;
      expect(result).toMatchObject({ outcome: 'complete', text: 'survived' });
      expect(events.resumed()).toEqual([handle.id]);
      // The first step was committed and did not run again; the second's tool ran twice, and
      // its request once: three requests in all.
      expect(readFileSync(first, 'utf8')).toBe('ran\n');
      expect(readFileSync(second, 'utf8')).toBe('ran\nran\n');
      expect(rig.model.stats.requests - requestsBefore).toBe(3);
      const transcript = readTranscript(result);
      expect(transcript).toHaveLength(7);
      assertToolUsesAnswered(transcript);
      expect(result.usage.steps).toBe(3);
    } finally {
      await rig.close();
    }
  });

  it('children cancelled while queued: main journals their results off its event loop, and close waits for those writes', async () => {
    const rig = await startRig({ threads: 1, agentsPerThread: 1 });
    const running = rig.engine.spawn({ prompt: scripted([{ delayMs: 100, reply: 'first' }]) });
    const spawnQueued = (count: number) =>
      Array.from({ length: count }, () =>
        rig.engine.spawn({ prompt: scripted([{ reply: 'never' }]) }),
      );
    const cancelled = spawnQueued(30);
    for (const handle of cancelled) expect(handle.cancel('user')).toBe(true);
    await Promise.all(cancelled.map((handle) => handle.result));
    expect((await running.result).text).toBe('first');
    // These are still queued when close cancels them: their writes are queued during close.
    const atClose = spawnQueued(300);
    await rig.close();
    for (const handle of [...cancelled, ...atClose]) {
      const result = await handle.result;
      expect(result.outcome).toBe('cancelled');
      expect(readResult(rig.logDir, result.id)).toEqual(result);
    }
  });
});
