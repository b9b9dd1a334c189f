import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type BatchTask, checkTaskLine, parseTasks } from '../src/cli/task-lines.js';
import { MAX_DURATION_MS, parseDuration } from '../src/shared/duration.js';
import { UsageError } from '../src/shared/errors.js';
import { isMainMessage, isWorkerMessage } from '../src/shared/protocol.js';
import { restoreTranscript } from '../src/shared/restore.js';

describe('decoders of outside data never throw, and accept what they should (fast-check)', () => {
  it('tasks lines: any text gives tasks or line-numbered errors, never a throw', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (text) => {
        const parsed = parseTasks(text);
        const lines = text.split('\n').length;
        for (const error of parsed.errors) {
          expect(error.line).toBeGreaterThanOrEqual(1);
          expect(error.line).toBeLessThanOrEqual(lines);
          expect(error.message.length).toBeGreaterThan(0);
        }
      }),
    );
  });

  it('tasks lines: any well-formed task round-trips through its JSON line', () => {
    const task: fc.Arbitrary<BatchTask> = fc.record(
      {
        id: fc.string({ minLength: 1, maxLength: 20 }).filter((id) => id.trim() !== ''),
        prompt: fc.string({ minLength: 1, maxLength: 80 }).filter((prompt) => prompt.trim() !== ''),
        title: fc.string({ maxLength: 20 }),
        system: fc.string({ maxLength: 40 }),
        tools: fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }),
        maxSteps: fc.integer({ min: 1, max: 100 }),
        model: fc.string({ maxLength: 20 }),
      },
      { requiredKeys: ['id', 'prompt'] },
    );
    fc.assert(
      fc.property(task, (value) => {
        expect(checkTaskLine(JSON.stringify(value))).toEqual({ ok: true, task: value });
      }),
    );
  });

  it('tasks lines: any JSON object with a bad field is refused with a message', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 })),
        (object) => {
          const checked = checkTaskLine(JSON.stringify(object));
          if (!checked.ok) expect(checked.message).toMatch(/\S/);
          else {
            expect(typeof checked.task.prompt).toBe('string');
            expect(checked.task.id).not.toBe('');
          }
        },
      ),
    );
  });

  it('messages crossing threads: anything that is not a well-formed message is refused', () => {
    fc.assert(
      fc.property(fc.anything(), (value) => {
        const worker = isWorkerMessage(value);
        const main = isMainMessage(value);
        if (worker)
          expect(['started', 'event', 'result']).toContain((value as { type: string }).type);
        if (main) expect((value as { type: string }).type).toBe('cancel');
      }),
    );
    expect(isWorkerMessage({ type: 'result', result: { id: 'ag_x', outcome: 'complete' } })).toBe(
      true,
    );
    expect(isWorkerMessage({ type: 'result', result: null })).toBe(false);
    expect(isWorkerMessage({ type: 'started', threadId: '1' })).toBe(false);
    expect(isMainMessage({ type: 'cancel', reason: 'user' })).toBe(true);
    expect(isMainMessage({ type: 'cancel' })).toBe(false);
  });

  it('transcripts read back after a crash: any text restores to a valid state or to nothing', () => {
    const line = fc.oneof(
      fc.string({ maxLength: 60 }),
      fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
      fc.constantFrom(
        '{"role":"user","content":"go"}',
        '{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"reply","input":{"result":1}}]}',
        '{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}',
        '{"role":"assistant","content":[{"type":"text","text":"hi"}]}',
      ),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 12 }), (lines) => {
        const state = restoreTranscript(lines.join('\n'));
        if (!state) return;
        expect(state.messages[0]!.role).toBe('user');
        // A response whose calls were not answered is pending: its calls run again.
        if (state.pending) {
          expect(state.messages.at(-1)!.role).toBe('assistant');
          expect(state.pending.length).toBeGreaterThan(0);
        } else if (!state.ended) expect(state.messages.at(-1)!.role).toBe('user');
        expect(state.counted).toBeLessThanOrEqual(state.steps);
      }),
    );
  });

  it('durations: anything either parses to whole milliseconds within the timer limit or throws a UsageError', () => {
    // Well-formed texts too: random strings alone would almost never reach the parsing branch.
    const durationText = fc
      .tuple(fc.nat(10_000_000), fc.constantFrom('', 'ms', 's', 'm', 'h', ' s', 'x'))
      .map(([count, unit]) => `${count}${unit}`);
    const seen = { parsed: 0, refused: 0 };
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 12 }), fc.double(), durationText), (value) => {
        let ms: number;
        try {
          ms = parseDuration(value);
        } catch (error) {
          // Only the parse is inside the try: a failed assertion must not pass for a refusal.
          expect(error).toBeInstanceOf(UsageError);
          seen.refused++;
          return;
        }
        seen.parsed++;
        expect(
          Number.isInteger(ms) && ms >= 0 && ms <= MAX_DURATION_MS,
          `${String(value)} -> ${ms}`,
        ).toBe(true);
      }),
    );
    expect(seen.parsed).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
  });
});
