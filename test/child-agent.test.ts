import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../src/shared/events.js';
import { NUDGE_TEXT } from '../src/shared/tools/reply.js';
import {
  assertToolUsesAnswered,
  makeWorkspace,
  nextEvent,
  type Rig,
  readHistory,
  readTranscript,
  scripted,
  startRig,
  tempDir,
} from './helpers.js';

let rig: Rig;

beforeAll(async () => {
  rig = await startRig({
    threads: 1,
    workspace: makeWorkspace(),
    replyCap: 1000,
    // The scripted model honours max_tokens: the 50,000-character reply below needs room.
    provider: { maxTokens: 32_000 },
  });
});

afterAll(async () => {
  await rig.close();
});

describe('the reply contract, through the real pool and the real SDK', () => {
  it('seed 000 incident: a brief, a tool call, a sign-off without reply → one nudge → empty, brief nowhere', async () => {
    const brief = `THE BRIEF ${'testing setup details '.repeat(150)}`;
    const result = await rig.engine.run({
      title: 'incident',
      prompt: scripted([
        { text: brief, calls: [{ name: 'read_file', input: { path: 'alpha.ts' } }] },
        { text: 'Done, nothing else to report.' },
        { text: 'Still done.' },
      ]),
    });
    expect(result.outcome).toBe('empty');
    expect(result.text).toBe('');
    expect(JSON.stringify(result)).not.toContain('THE BRIEF');
    expect(result.replyFile).toBeUndefined();
    const transcript = readTranscript(result);
    assertToolUsesAnswered(transcript);
    const nudges = transcript.filter((message) => message.content === NUDGE_TEXT);
    expect(nudges).toHaveLength(1);
    expect(result.usage.steps).toBe(3);
  });

  it('reply beside a cleanup call: the reply arrives intact, the cleanup runs and is answered, no further request', async () => {
    const marker = path.join(tempDir(), 'cleaned');
    const before = rig.model.stats.requests;
    const result = await rig.engine.run({
      prompt: scripted([
        { calls: [{ reply: 'THE REPORT\nline two' }, { name: 'cleanup', input: { marker } }] },
      ]),
    });
    expect(result.outcome).toBe('complete');
    expect(result.text).toBe('THE REPORT\nline two');
    expect(readFileSync(marker, 'utf8')).toBe('cleaned');
    expect(rig.model.stats.requests - before).toBe(1);
    const transcript = readTranscript(result);
    assertToolUsesAnswered(transcript);
    const last = transcript.at(-1)!;
    expect(Array.isArray(last.content) && last.content.map((block) => block.type)).toEqual([
      'tool_result',
      'tool_result',
    ]);
  });

  it('a one-word answer beside a long cleanup narration returns the one word', async () => {
    const marker = path.join(tempDir(), 'cleaned');
    const narration = 'Now I will remove the temporary script and tidy up. '.repeat(40);
    const result = await rig.engine.run({
      prompt: scripted([
        { text: narration, calls: [{ reply: 'yes' }, { name: 'cleanup', input: { marker } }] },
      ]),
    });
    expect(result).toMatchObject({ outcome: 'complete', text: 'yes', truncated: false });
  });

  it('keeps real newlines of a string payload and pretty-prints an object payload', async () => {
    const text = await rig.engine.run({ prompt: scripted([{ reply: '# Title\n\n- a\n- b' }]) });
    expect(text.text).toBe('# Title\n\n- a\n- b');
    // Within the reply cap the text is the whole reply: no file is written for it.
    expect(text.replyFile).toBeUndefined();
    const object = await rig.engine.run({
      prompt: scripted([{ reply: { files: ['a', 'b'], ok: true } }]),
    });
    expect(object.text).toBe('{\n  "files": [\n    "a",\n    "b"\n  ],\n  "ok": true\n}');
  });

  it('spills a reply past the cap whole: markdown as .md, one object as .json', async () => {
    const long = `# Title\n\n${'- item\n'.repeat(400)}`;
    const text = await rig.engine.run({ prompt: scripted([{ reply: long }]) });
    expect(text.truncated).toBe(true);
    expect(path.basename(text.replyFile!)).toBe(`${text.id}.md`);
    expect(readFileSync(text.replyFile!, 'utf8')).toBe(long);
    const files = Array.from({ length: 300 }, (_, index) => `file-${index}`);
    const object = await rig.engine.run({ prompt: scripted([{ reply: { files, ok: true } }]) });
    expect(object.truncated).toBe(true);
    expect(path.basename(object.replyFile!)).toBe(`${object.id}.json`);
    expect(JSON.parse(readFileSync(object.replyFile!, 'utf8'))).toEqual({ files, ok: true });
  });

  it('a whitespace-only text block before a tool call never goes back to the provider', async () => {
    // The scripted model, like the real API, refuses whitespace-only text in a request.
    const result = await rig.engine.run({
      prompt: scripted([
        { text: '\n\n', calls: [{ name: 'echo', input: { value: 'hi' } }] },
        { reply: 'done' },
      ]),
    });
    expect(result).toMatchObject({ outcome: 'complete', text: 'done' });
  });

  it('appends two replies of one batch in call order, a blank line between', async () => {
    const result = await rig.engine.run({
      prompt: scripted([{ calls: [{ reply: 'first part' }, { reply: { second: 2 } }] }]),
    });
    expect(result.text).toBe('first part\n\n{\n  "second": 2\n}');
  });

  it('clips a payload over the cap head + tail and spills the full text', async () => {
    const payload = `HEAD-${'0123456789'.repeat(5000)}-TAIL`;
    const result = await rig.engine.run({ prompt: scripted([{ reply: payload }]) });
    expect(result.outcome).toBe('complete');
    expect(result.truncated).toBe(true);
    expect(result.text.length).toBeLessThanOrEqual(1000);
    expect(result.text.startsWith('HEAD-')).toBe(true);
    expect(result.text.endsWith('-TAIL')).toBe(true);
    expect(result.text).toMatch(/characters elided/);
    expect(readFileSync(result.replyFile!, 'utf8')).toBe(payload);
  });

  it('prose, the nudge, then a reply → complete', async () => {
    const result = await rig.engine.run({
      prompt: scripted([{ text: 'Here is my answer in prose.' }, { reply: 'answer via reply' }]),
    });
    expect(result).toMatchObject({ outcome: 'complete', text: 'answer via reply' });
    expect(result.usage.steps).toBe(2);
  });

  it('the nudge does not count against maxSteps', async () => {
    const result = await rig.engine.run({
      maxSteps: 1,
      prompt: scripted([{ text: 'prose only' }, { reply: 'done' }]),
    });
    expect(result).toMatchObject({ outcome: 'complete', text: 'done' });
  });

  it('a child that keeps calling tools hits its step cap, with no text', async () => {
    const call = { name: 'echo', input: { value: 'again' } };
    const result = await rig.engine.run({
      maxSteps: 3,
      prompt: scripted([
        { calls: [call] },
        { calls: [call] },
        { calls: [call] },
        { calls: [call] },
      ]),
    });
    expect(result).toMatchObject({ outcome: 'capped', text: '' });
    expect(result.usage.steps).toBe(3);
    assertToolUsesAnswered(readTranscript(result));
  });

  // A 500 counts against the retries; 429s and 529s are the governor's (governor.test.ts).
  it('a provider failing past its retries → failed, with the reason, and no text', async () => {
    const result = await rig.engine.run({
      prompt: scripted([{ error: { status: 500 } }]),
    });
    expect(result.outcome).toBe('failed');
    expect(result.code).toBe('server_error');
    expect(result.reason).toMatch(
      /^provider server_error: http:\/\/127\.0\.0\.1:\d+\/v1\/messages answered 500/,
    );
    expect(result.text).toBe('');
    expect(result.usage.providerCalls).toBe(3);
  });

  it('a 429 then success honours retry-after and completes', async () => {
    const result = await rig.engine.run({
      prompt: scripted([
        { error: { status: 429, retryAfterMs: 5 }, faultAttempts: 1, reply: 'after retry' },
      ]),
    });
    expect(result).toMatchObject({ outcome: 'complete', text: 'after retry' });
    expect(result.usage.providerCalls).toBe(2);
  });

  it('eventTypes: a listener that asks only for retries gets no step or tool events across the thread', async () => {
    const seen: AgentEvent['type'][] = [];
    const requestIds: (string | undefined)[] = [];
    const result = await rig.engine.run({
      prompt: scripted([
        {
          error: { status: 429, retryAfterMs: 5 },
          faultAttempts: 1,
          calls: [{ name: 'list_files', input: {} }],
        },
        { reply: 'done' },
      ]),
      onEvent: (event) => {
        seen.push(event.type);
        if (event.type === 'provider-retry') requestIds.push(event.requestId);
      },
      eventTypes: ['provider-retry'],
    });
    expect(result.outcome).toBe('complete');
    // The worker sent only the retry; main's own settle event is filtered as the worker's are.
    expect(seen).toEqual(['provider-retry']);
    // The retry names the refused request, as the scripted model's request-id header gave it.
    expect(requestIds).toEqual([expect.stringMatching(/^req_/)]);
  });

  it('journals its start, its steps and its result in the run folder, and writes no file of its own', async () => {
    const result = await rig.engine.run({
      title: '../../evil title',
      prompt: scripted([{ calls: [{ name: 'echo', input: { value: 'hi' } }] }, { reply: 'x' }]),
    });
    expect(result.logDir).toBe(rig.logDir);
    const history = readHistory(result);
    expect(history.meta).toMatchObject({ id: result.id, title: '../../evil title', depth: 1 });
    // The prompt, then two steps of two messages each.
    expect(history.messages).toHaveLength(5);
    expect(history.steps).toBe(2);
    expect(history.result).toEqual(result);
    // Nothing in the run folder is named by the agent: the threads' journal segments, and the
    // spills of the replies past the cap (not this one's).
    for (const name of readdirSync(rig.logDir)) {
      expect(name).toMatch(/^(journal-\d+-(main|t\d+)\.jsonl|replies)$/);
    }
    const replies = path.join(rig.logDir, 'replies');
    const spilled = existsSync(replies) ? readdirSync(replies) : [];
    expect(spilled.some((name) => name.startsWith(result.id))).toBe(false);
  });

  it('advertises reply and the allowed tools to a child, never the spawn family at maxDepth 1', async () => {
    const seen = nextEvent<{ tools?: string[] }>(
      rig.model,
      'request',
      (event) => Array.isArray(event.tools) && event.tools.includes('reply'),
    );
    const result = await rig.engine.run({ prompt: scripted([{ reply: 'ok' }]) });
    expect(result.outcome).toBe('complete');
    const tools = (await seen).tools!;
    expect(tools).toEqual([
      'read_file',
      'list_files',
      'cleanup',
      'echo',
      'throw',
      'count',
      'crash',
      'exit',
      'hog',
      'spin',
      'sleep',
      'wait',
      'reply',
    ]);
    const limited = nextEvent<{ tools?: string[] }>(
      rig.model,
      'request',
      (event) => event.tools?.length === 2,
    );
    await rig.engine.run({ tools: ['echo'], prompt: scripted([{ reply: 'ok' }]) });
    expect((await limited).tools).toEqual(['echo', 'reply']);
  });

  it('refuses a call to a tool that was not advertised, and the child goes on', async () => {
    const result = await rig.engine.run({
      tools: ['echo'],
      prompt: scripted([
        {
          calls: [
            { name: 'read_file', input: { path: 'alpha.ts' } },
            { name: 'agent', input: { title: 't', prompt: 'p' } },
          ],
        },
        { reply: 'went on' },
      ]),
    });
    expect(result.text).toBe('went on');
    const transcript = readTranscript(result);
    const answers = transcript[2]!.content as { is_error?: boolean; content: string }[];
    expect(answers.map((answer) => answer.is_error)).toEqual([true, true]);
    expect(answers[0]!.content).toMatch(/Unknown tool `read_file`/);
  });
});

describe('cancellation on the pool', () => {
  it('cancel mid-stream aborts the HTTP request, settles cancelled, and a sibling on the same worker finishes', async () => {
    const single = await startRig({ threads: 1 });
    try {
      let midStream!: () => void;
      const firstDelta = new Promise<void>((resolve) => {
        midStream = resolve;
      });
      const victim = single.engine.spawn({
        prompt: scripted([{ text: 'streaming slowly', stall: { ms: 60_000 } }]),
        onEvent: (event: AgentEvent) => {
          if (event.type === 'text-delta') midStream();
        },
      });
      const sibling = single.engine.spawn({
        prompt: scripted([
          { calls: [{ name: 'echo', input: { value: 1 } }] },
          { reply: 'sibling done' },
        ]),
      });
      // The victim's first delta has arrived and the server is stalling: it is mid-stream.
      await firstDelta;
      const closed = nextEvent(single.model, 'client-closed');
      expect(victim.cancel('user')).toBe(true);
      const result = await victim.result;
      expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user', text: '' });
      await closed;
      expect((await sibling.result).text).toBe('sibling done');
      expect(victim.cancel('user')).toBe(false);
    } finally {
      await single.close();
    }
  });

  it('a tool stuck in a synchronous loop: its worker is terminated after the grace period; the stuck child settles cancelled, its sibling resumes elsewhere', async () => {
    const single = await startRig({ threads: 1, cancelGraceMs: 100 });
    try {
      const settled = new Map<string, number>();
      const resumed: string[] = [];
      const count = (event: AgentEvent) => {
        if (event.type === 'agent-settle')
          settled.set(event.agentId, (settled.get(event.agentId) ?? 0) + 1);
        if (event.type === 'agent-resume') resumed.push(event.agentId);
      };
      const siblingWaiting = nextEvent(single.model, 'request');
      const sibling = single.engine.spawn({
        prompt: scripted([{ delayMs: 500, reply: 'sibling finished after all' }]),
        onEvent: count,
      });
      await siblingWaiting;
      let spinning!: () => void;
      const inSpin = new Promise<void>((resolve) => {
        spinning = resolve;
      });
      const stuck = single.engine.spawn({
        prompt: scripted([{ calls: [{ name: 'spin', input: {} }] }]),
        onEvent: (event) => {
          count(event);
          if (event.type === 'tool-call' && event.name === 'spin') spinning();
        },
      });
      await inSpin;
      stuck.cancel('user');
      const [stuckResult, siblingResult] = await Promise.all([stuck.result, sibling.result]);
      expect(stuckResult).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      expect(siblingResult).toMatchObject({
        outcome: 'complete',
        text: 'sibling finished after all',
      });
      expect(resumed).toEqual([sibling.id]);
      expect(settled.get(stuck.id)).toBe(1);
      expect(settled.get(sibling.id)).toBe(1);
      // The pool replaced the worker and goes on.
      const after = await single.engine.run({ prompt: scripted([{ reply: 'alive' }]) });
      expect(after.text).toBe('alive');
    } finally {
      await single.close();
    }
  });

  it('a queued child is cancelled without touching a worker', async () => {
    const tiny = await startRig({ threads: 1, agentsPerThread: 1 });
    try {
      const first = tiny.engine.spawn({ prompt: scripted([{ delayMs: 200, reply: 'first' }]) });
      const queued = tiny.engine.spawn({ prompt: scripted([{ reply: 'second' }]) });
      expect(queued.status).toBe('queued');
      expect(queued.cancel('user')).toBe(true);
      expect(await queued.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      expect((await first.result).text).toBe('first');
    } finally {
      await tiny.close();
    }
  });

  it('an AbortSignal cancels a child; closing the engine cancels the rest with reason shutdown', async () => {
    const own = await startRig({ threads: 1 });
    const controller = new AbortController();
    const waiting = nextEvent(own.model, 'request');
    const signalled = own.engine.spawn({
      prompt: scripted([{ delayMs: 60_000, reply: 'x' }]),
      signal: controller.signal,
    });
    await waiting;
    controller.abort();
    expect(await signalled.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
    const stillRunning = own.engine.spawn({ prompt: scripted([{ delayMs: 60_000, reply: 'x' }]) });
    await own.close();
    expect(await stillRunning.result).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
  });
});
