import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { AgentEvent } from '../src/shared/events.js';
import { restoreTranscript } from '../src/shared/restore.js';
import { NUDGE_TEXT } from '../src/shared/tools/reply.js';
import {
  agentCall,
  assertToolUsesAnswered,
  hostGate,
  nextEvent,
  readTranscript,
  scripted,
  startRig,
  tempDir,
} from './helpers.js';

describe('a crashed worker loses no agent', () => {
  for (const [tool, what] of [
    ['exit', 'process.exit'],
    ['crash', 'an exception escaping a tool'],
    ['hog', 'running out of memory'],
  ] as const) {
    it(`${what}: siblings resume from their last committed step; the culprit fails after its bounded crashes`, async () => {
      const rig = await startRig({ threads: 1, maxOldGenerationSizeMb: 64, maxCrashes: 3 });
      try {
        const counter = path.join(tempDir(), 'count.txt');
        const events: AgentEvent[] = [];
        // The sibling commits a step (it counts once), then waits in its next provider request.
        const inSecondStep = nextEvent<{ turn: number; tools?: string[] }>(
          rig.model,
          'request',
          (event) => event.turn === 1,
        );
        const sibling = rig.engine.spawn({
          prompt: scripted([
            { calls: [{ name: 'count', input: { file: counter } }] },
            { delayMs: 400, reply: 'sibling survived' },
          ]),
          onEvent: (event) => events.push(event),
        });
        await inSecondStep;
        // Its first step counts as committed once the write of its lines has completed (the
        // writes run off the worker's event loop): prompt, assistant message, tool result.
        await vi.waitFor(
          () => expect(readTranscript({ id: sibling.id, logDir: rig.logDir })).toHaveLength(3),
          { timeout: 10_000 },
        );
        const culprit = rig.engine.spawn({
          prompt: scripted([{ calls: [{ name: tool, input: {} }] }]),
          onEvent: (event) => events.push(event),
        });
        const [siblingResult, culpritResult] = await Promise.all([sibling.result, culprit.result]);
        expect(culpritResult.outcome).toBe('failed');
        expect(culpritResult.code).toBe('worker_crashed');
        expect(culpritResult.reason).toMatch(/^worker crashed 3 times while this agent ran a tool/);
        expect(siblingResult).toMatchObject({ outcome: 'complete', text: 'sibling survived' });
        // Resumed from its committed step: the first step's tool did not run again.
        expect(readFileSync(counter, 'utf8')).toBe('ran\n');
        expect(siblingResult.usage.steps).toBe(2);
        expect(
          events.some((event) => event.type === 'agent-resume' && event.agentId === sibling.id),
        ).toBe(true);
        assertToolUsesAnswered(readTranscript(siblingResult));
        const settles = events.filter((event) => event.type === 'agent-settle');
        expect(settles.map((event) => event.agentId).sort()).toEqual(
          [culprit.id, sibling.id].sort(),
        );
        // The pool goes on.
        expect((await rig.engine.run({ prompt: scripted([{ reply: 'still here' }]) })).text).toBe(
          'still here',
        );
      } finally {
        await rig.close();
      }
    });
  }
});

describe('restoreTranscript', () => {
  const user = (content: string) => JSON.stringify({ role: 'user', content });
  const use = (id: string, name: string, input: unknown) =>
    JSON.stringify({ role: 'assistant', content: [{ type: 'tool_use', id, name, input }] });
  const answer = (id: string, isError = false) =>
    JSON.stringify({
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: id,
          content: 'ok',
          ...(isError ? { is_error: true } : {}),
        },
      ],
    });
  const text = (value: string) =>
    JSON.stringify({ role: 'assistant', content: [{ type: 'text', text: value }] });

  it('a committed reply batch means the child had finished: its replies come back, no step re-runs', () => {
    const state = restoreTranscript(
      [user('go'), use('t1', 'reply', { result: 'the report' }), answer('t1')].join('\n'),
    );
    expect(state?.ended).toEqual({ kind: 'replied', replies: ['the report'] });
  });

  it('a refused reply does not count as finished', () => {
    const state = restoreTranscript(
      [user('go'), use('t1', 'reply', { result: 'x' }), answer('t1', true)].join('\n'),
    );
    expect(state?.ended).toBeUndefined();
    expect(state?.steps).toBe(1);
  });

  it('drops a torn last line; an unanswered tool_use is pending: its tools run again, not its request', () => {
    const state = restoreTranscript(
      [
        user('go'),
        use('t1', 'echo', {}),
        answer('t1'),
        use('t2', 'echo', {}),
        '{"role":"user","cont',
      ].join('\n'),
    );
    expect(state?.messages).toHaveLength(4);
    expect(state?.steps).toBe(2);
    expect(state?.counted).toBe(2);
    expect(state?.pending).toEqual([{ id: 't2', name: 'echo', input: {} }]);
    // A text-only response with nothing after it was not a terminal commit: that step runs again.
    const prose = restoreTranscript(
      [user('go'), use('t1', 'echo', {}), answer('t1'), text('thinking aloud')].join('\n'),
    );
    expect(prose?.messages).toHaveLength(3);
    expect(prose?.pending).toBeUndefined();
  });

  it('keeps the nudge latch; the step after the nudge is free; a text after the nudge is the end', () => {
    const nudge = JSON.stringify({ role: 'user', content: NUDGE_TEXT });
    const justNudged = restoreTranscript([user('go'), text('prose'), nudge].join('\n'));
    expect(justNudged).toMatchObject({ nudged: true, steps: 1, counted: 1, nextStepFree: true });
    const ended = restoreTranscript(
      [user('go'), text('prose'), nudge, text('more prose')].join('\n'),
    );
    expect(ended?.ended).toEqual({ kind: 'empty' });
    expect(restoreTranscript('')).toBeUndefined();
    expect(restoreTranscript('not json')).toBeUndefined();
  });
});

describe('a parent resumed after its worker died finds the agents it started', () => {
  it.each(['sync', 'async'] as const)(
    '%s: its step’s spawn is not started again, and the child’s one result reaches it',
    async (mode) => {
      const gate = hostGate('gate');
      const rig = await startRig({
        threads: 1,
        maxDepth: 2,
        maxCrashes: 1,
        hostTools: [gate.tool],
      });
      try {
        const events: AgentEvent[] = [];
        const held = [{ calls: [{ name: 'gate', input: {} }] }, { reply: 'child done' }];
        // Sync: the parent waits on its child, which waits at the gate. Async: the parent's
        // step starts the child and waits at the gate itself, in the same batch.
        const parent = rig.engine.spawn({
          title: 'parent',
          prompt: scripted(
            mode === 'sync'
              ? [{ calls: [agentCall('child', held)] }, { reply: 'parent done' }]
              : [
                  {
                    calls: [
                      agentCall('child', [{ reply: 'child done' }], 'async'),
                      { name: 'gate', input: {} },
                    ],
                  },
                  { text: 'Waiting for my agent.' },
                  { reply: 'parent done' },
                ],
          ),
          onEvent: (event) => events.push(event),
        });
        await gate.entered(1);
        // Its step's response is committed before its tools run: the resume finds it.
        await vi.waitFor(
          () => expect(readTranscript({ id: parent.id, logDir: rig.logDir })).toHaveLength(2),
          { timeout: 10_000 },
        );
        const culprit = rig.engine.spawn({ prompt: scripted([{ calls: [{ name: 'exit' }] }]) });
        expect((await culprit.result).code).toBe('worker_crashed');
        gate.open();
        const result = await parent.result;
        expect(result).toMatchObject({ outcome: 'complete', text: 'parent done' });
        expect(
          events.some((event) => event.type === 'agent-resume' && event.agentId === parent.id),
        ).toBe(true);
        // One child, started once, whose result came back once.
        const starts = events.filter(
          (event) => event.type === 'agent-start' && event.title === 'child',
        );
        expect(starts).toHaveLength(1);
        const transcript = readTranscript(result);
        assertToolUsesAnswered(transcript);
        const blocks = transcript.flatMap((message) =>
          message.role === 'user' && Array.isArray(message.content) ? message.content : [],
        );
        const delivered = blocks.filter((block) =>
          mode === 'sync'
            ? block.type === 'tool_result' && block.content === 'child done'
            : block.type === 'text' &&
              block.text.startsWith('{"kind":"agent_result"') &&
              block.text.includes(starts[0]!.agentId),
        );
        expect(delivered).toHaveLength(1);
      } finally {
        await rig.close();
      }
    },
  );
});
