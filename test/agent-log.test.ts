import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentLog } from '../src/shared/agent-log.js';
import { LogLane, LogWriter, threadLogWriter } from '../src/shared/log-writer.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import { restoreTranscript } from '../src/shared/restore.js';
import type { AgentResult } from '../src/shared/result.js';
import {
  assertToolUsesAnswered,
  eventLog,
  hostGate,
  type Rig,
  readTranscript,
  scripted,
  startRig,
  TEST_TOOLS,
  tempDir,
} from './helpers.js';

const LOG_TOOLS = fileURLToPath(new URL('./fixtures/log-tools.mjs', import.meta.url));

const line = (agent: number, seq: number): MessageParam => ({
  role: 'user',
  content: `agent ${agent} message ${seq}`,
});

function resultOf(dir: string, replyFile?: string): AgentResult {
  return {
    id: path.basename(dir),
    title: 'a title',
    outcome: 'complete',
    text: 'the text',
    truncated: false,
    logDir: dir,
    ...(replyFile === undefined ? {} : { replyFile }),
    generation: 0,
    elapsedMs: 1,
    usage: { inputTokens: 0, outputTokens: 0, providerCalls: 1, steps: 1 },
  };
}

function transcriptOf(dir: string): string[] {
  const file = path.join(dir, 'transcript.jsonl');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(0, -1) : [];
}

/** A pause of one kind: none, a microtask, the end of the event-loop turn, or a timer. */
function pause(kind: number): Promise<void> | undefined {
  if (kind === 0) return undefined;
  if (kind === 1) return Promise.resolve();
  if (kind === 2) return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => setTimeout(resolve, 1));
}

describe('the log writer, on this thread', () => {
  it('appends of many agents, interleaved at random, land whole and in order, each in its own transcript', async () => {
    const schedule = fc.record({
      agents: fc.integer({ min: 1, max: 10 }),
      appends: fc.array(
        fc.record({
          agent: fc.nat(),
          lines: fc.integer({ min: 1, max: 3 }),
          pause: fc.integer({ min: 0, max: 3 }),
        }),
        { minLength: 1, maxLength: 40 },
      ),
    });
    await fc.assert(
      fc.asyncProperty(schedule, async ({ agents, appends }) => {
        const root = tempDir('cohort-log-prop-');
        // Two folders in flight at most: most wait their turn, and their appends queue up.
        const writer = new LogWriter(2);
        const logs = Array.from(
          { length: agents },
          (_, index) => new AgentLog(path.join(root, `ag_${index}`), writer),
        );
        const expected: string[][] = logs.map(() => []);
        let seq = 0;
        for (const append of appends) {
          const agent = append.agent % agents;
          const messages = Array.from({ length: append.lines }, () => line(agent, seq++));
          logs[agent]!.appendTranscript(messages);
          expected[agent]!.push(...messages.map((message) => JSON.stringify(message)));
          await pause(append.pause);
        }
        const results = await Promise.all(logs.map((log) => log.finish(resultOf(log.dir), true)));
        for (const [index, log] of logs.entries()) {
          expect(transcriptOf(log.dir)).toEqual(expected[index]);
          const onDisk = JSON.parse(readFileSync(path.join(log.dir, 'result.json'), 'utf8'));
          expect(onDisk).toEqual(results[index]);
        }
        expect(writer.pending).toBe(0);
        rmSync(root, { recursive: true, force: true });
      }),
      { numRuns: 30 },
    );
  });

  it('writes nothing on the caller’s turn; flush and finish resolve once the files are there', async () => {
    const dir = path.join(tempDir(), 'ag_one');
    const log = new AgentLog(dir);
    log.writeMeta({ id: 'ag_one' });
    log.appendTranscript([line(0, 0)]);
    // Queued, not done: the event loop is not held up by the disk.
    expect(existsSync(dir)).toBe(false);
    await log.flush();
    expect(transcriptOf(dir)).toEqual([JSON.stringify(line(0, 0))]);
    log.appendTranscript([line(0, 1)]);
    const replyFile = log.spillReply('the whole reply', false);
    const result = await log.finish(resultOf(dir, replyFile), true);
    expect(result).toEqual(resultOf(dir, replyFile));
    expect(readFileSync(replyFile, 'utf8')).toBe('the whole reply');
    expect(transcriptOf(dir)).toHaveLength(2);
    expect(JSON.parse(readFileSync(path.join(dir, 'result.json'), 'utf8'))).toEqual(result);
  });

  it('an append that fails stops the transcript: nothing later is written until it is replaced', async () => {
    const dir = path.join(tempDir(), 'ag_stop');
    const lane = new LogLane(dir, new LogWriter());
    // A folder where the transcript should be: the first append cannot open it.
    mkdirSync(path.join(dir, 'transcript.jsonl'), { recursive: true });
    const first = await lane.run({ kind: 'append', file: 'transcript.jsonl', data: 'one\n' });
    expect(first).toBeInstanceOf(Error);
    rmSync(path.join(dir, 'transcript.jsonl'), { recursive: true });
    // The way is clear now, but a later step without the one before would leave a hole.
    const second = await lane.run({ kind: 'append', file: 'transcript.jsonl', data: 'two\n' });
    expect(second).toBe(first);
    expect(existsSync(path.join(dir, 'transcript.jsonl'))).toBe(false);
    // A resumed child replaces the transcript: appends go on from there.
    expect(await lane.run({ kind: 'replace', file: 'transcript.jsonl', data: 'one\n' })).toBe(null);
    expect(await lane.run({ kind: 'append', file: 'transcript.jsonl', data: 'two\n' })).toBe(null);
    expect(readFileSync(path.join(dir, 'transcript.jsonl'), 'utf8')).toBe('one\ntwo\n');
  });

  it('finish never rejects: it names no reply file it could not write, and no folder that is gone', async () => {
    const root = tempDir();
    const blocked = new AgentLog(path.join(root, 'ag_blocked'));
    mkdirSync(path.join(blocked.dir, 'reply.md'), { recursive: true });
    const replyFile = blocked.spillReply('text', false);
    const kept = await blocked.finish(resultOf(blocked.dir, replyFile), true);
    expect(kept.logDir).toBe(blocked.dir);
    expect(kept.replyFile).toBeUndefined();
    const onDisk = JSON.parse(readFileSync(path.join(blocked.dir, 'result.json'), 'utf8'));
    expect(onDisk).toEqual(kept);

    // The folder cannot be made: a file stands where its parent should be.
    const nowhere = path.join(root, 'a-file');
    writeFileSync(nowhere, 'not a folder');
    const lost = new AgentLog(path.join(nowhere, 'ag_lost'));
    lost.appendTranscript([line(0, 0)]);
    const spilled = lost.spillReply('text', false);
    const result = await lost.finish(resultOf(lost.dir, spilled), true);
    expect(result.logDir).toBeUndefined();
    expect(result.replyFile).toBeUndefined();
    expect(result.text).toBe('the text');
  });
});

describe('restoreTranscript at every point a worker may die', () => {
  it('a transcript cut at any whole line (or torn in the next) resumes from its last committed step', () => {
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
        // An assistant message without its answers is a step not committed: it runs again.
        const committed = cut % 2 === 1 ? cut : cut - 1;
        expect(state?.messages.map((message) => JSON.stringify(message))).toEqual(
          lines.slice(0, committed),
        );
        expect(state?.steps).toBe((committed - 1) / 2);
        expect(state?.ended).toBeUndefined();
      }),
      { numRuns: 300 },
    );
  });
});

describe('agent logs through the real pool', () => {
  let rig: Rig;
  const gate = hostGate('gate');

  beforeAll(async () => {
    rig = await startRig({ threads: 1, hostTools: [gate.tool] });
  });

  afterAll(async () => {
    await rig.close();
  });

  it('sixty agents on one thread: every transcript on disk holds its own steps, whole and in order', async () => {
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
      const transcript = readTranscript(result.logDir);
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

  it('a result is never delivered before its result.json and its reply file exist', async () => {
    const missing: string[] = [];
    let checked = 0;
    const onEvent = (event: { type: string; result?: AgentResult }) => {
      if (event.type !== 'agent-settle' || !event.result) return;
      // On main, at the moment of delivery: the worker posted the result after its writes.
      const { logDir, replyFile } = event.result;
      checked++;
      if (!logDir || !existsSync(path.join(logDir, 'result.json'))) missing.push(`${logDir}`);
      else {
        const onDisk = JSON.parse(readFileSync(path.join(logDir, 'result.json'), 'utf8'));
        if (onDisk.outcome !== event.result.outcome) missing.push(`${logDir}: other outcome`);
      }
      if (!replyFile || !existsSync(replyFile)) missing.push(`${replyFile}`);
    };
    const handles = Array.from({ length: 40 }, (_, agent) =>
      rig.engine.spawn({
        prompt: scripted([
          { calls: [{ name: 'echo', input: {} }] },
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

  it('the folder removed mid-run: the result is delivered whole, naming no folder', async () => {
    const before = gate.calls;
    const handle = rig.engine.spawn({
      prompt: scripted([{ calls: [{ name: 'gate', input: {} }] }, { reply: 'done anyway' }]),
    });
    await gate.entered(before + 1);
    const dir = path.join(rig.logDir, handle.id);
    rmSync(dir, { recursive: true, force: true });
    gate.open();
    const result = await handle.result;
    expect(result).toMatchObject({ outcome: 'complete', text: 'done anyway' });
    expect(result.logDir).toBeUndefined();
    expect(result.replyFile).toBeUndefined();
    expect(existsSync(dir)).toBe(false);
  });
});

describe('agent logs through the real pool, when a write fails or a worker dies', () => {
  it('the reply file cannot be written: the result keeps its text and folder, and names no reply file', async () => {
    const gate = hostGate('gate');
    const rig = await startRig({ threads: 1, hostTools: [gate.tool] });
    try {
      const handle = rig.engine.spawn({
        prompt: scripted([{ calls: [{ name: 'gate', input: {} }] }, { reply: 'the report' }]),
      });
      await gate.entered();
      const dir = path.join(rig.logDir, handle.id);
      mkdirSync(path.join(dir, 'reply.md'));
      gate.open();
      const result = await handle.result;
      expect(result).toMatchObject({ outcome: 'complete', text: 'the report', logDir: dir });
      expect(result.replyFile).toBeUndefined();
      expect(JSON.parse(readFileSync(path.join(dir, 'result.json'), 'utf8'))).toEqual(result);
      assertToolUsesAnswered(readTranscript(dir));
    } finally {
      await rig.close();
    }
  });

  it('a worker dies after a step has answered but before its write: the child redoes that step from the one before', async () => {
    const rig = await startRig({ threads: 1, toolModules: [TEST_TOOLS, LOG_TOOLS] });
    try {
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
                // The prompt and the first step's two messages are committed before it runs.
                input: { file: second, logDir: rig.logDir, committed: 3 },
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
      // The first step was committed and did not run again; the second ran twice.
      expect(readFileSync(first, 'utf8')).toBe('ran\n');
      expect(readFileSync(second, 'utf8')).toBe('ran\nran\n');
      const transcript = readTranscript(result.logDir);
      expect(transcript).toHaveLength(7);
      assertToolUsesAnswered(transcript);
      expect(result.usage.steps).toBe(3);
    } finally {
      await rig.close();
    }
  });

  it('children cancelled while queued: main writes their result.json off its event loop, and close waits for those writes', async () => {
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
    expect(threadLogWriter().pending).toBe(0);
    for (const handle of [...cancelled, ...atClose]) {
      const result = await handle.result;
      expect(result.outcome).toBe('cancelled');
      const onDisk = JSON.parse(readFileSync(path.join(result.logDir!, 'result.json'), 'utf8'));
      expect(onDisk).toEqual(result);
    }
  });
});
