import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Engine } from '../src/main/engine.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { ToolResultBlock } from '../src/shared/provider/types.js';
import { restoreTranscript } from '../src/shared/restore.js';
import { BAD_REPLY_PREFIX, EXTRA_REPLY_TEXT } from '../src/shared/tools/reply.js';
import { type ScriptedModel, type ScriptStep, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli } from './cli-helpers.js';
import {
  assertToolUsesAnswered,
  contentBlocks,
  hostGate,
  readTranscript,
  scripted,
  TEST_TOOLS,
  tempDir,
} from './helpers.js';
import { type RecordingProxy, recordingProxy } from './recording-proxy.js';

// Typed replies end to end: a real engine with real workers, the scripted model over HTTP, and
// a recording proxy in front of it, so a test reads the very requests the model received (the
// tools offered, the reply tool's schema). The CLI runs as a real child process.

const RISKS = {
  type: 'object',
  properties: {
    risks: { type: 'array', items: { type: 'string' } },
    count: { type: 'integer' },
  },
  required: ['risks', 'count'],
  additionalProperties: false,
};

let model: ScriptedModel;
let proxy: RecordingProxy;
let engine: Engine;
let logDir: string;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
  proxy = await recordingProxy(model.url);
  logDir = tempDir('cohort-logs-');
  engine = await Engine.start({
    threads: 2,
    logDir,
    toolModules: [TEST_TOOLS],
    provider: { baseURL: proxy.url, model: 'cohort-scripted', maxRetries: 0 },
  });
});

afterAll(async () => {
  await engine.close();
  await proxy.close();
  await model.close();
});

/** A prompt led by `lead` (a marker unique to the test) that carries `steps`. */
const task = (lead: string, steps: ScriptStep[]) => scripted(steps, lead);

describe('typed replies through the engine', () => {
  it('a matching reply completes with the parsed value; the reply tool offered carries the schema', async () => {
    const value = { risks: ['a race in close()', 'an unchecked index'], count: 2 };
    const result = await engine.run({
      prompt: task('Typed valid.', [{ reply: value }]),
      outputSchema: RISKS,
    });
    expect(result.outcome).toBe('complete');
    expect(result.value).toEqual(value);
    expect(result.text).toBe(JSON.stringify(value, null, 2));
    const [request, ...more] = proxy.requestsOf('Typed valid.');
    expect(more).toHaveLength(0);
    const reply = request?.tools?.find((tool) => tool.name === 'reply');
    expect(reply?.input_schema.properties).toEqual({ result: RISKS });
    expect(reply?.input_schema.required).toEqual(['result']);
  });

  it('a reply that does not match is refused with the mismatch; the fixed one completes', async () => {
    const fixed = { risks: ['none found'], count: 1 };
    const result = await engine.run({
      prompt: task('Typed fixed.', [{ reply: { risks: ['x'], count: 'one' } }, { reply: fixed }]),
      outputSchema: RISKS,
    });
    expect(result).toMatchObject({ outcome: 'complete', value: fixed });
    expect(result.usage.steps).toBe(2);
    const transcript = readTranscript(result);
    assertToolUsesAnswered(transcript);
    const refused = contentBlocks(transcript[2]!)[0] as ToolResultBlock;
    expect(refused.is_error).toBe(true);
    expect(refused.content).toMatch(new RegExp(`^${escapeRegExp(BAD_REPLY_PREFIX)}`));
    expect(refused.content).toContain('/count must be integer');
    // The model saw the refusal before it replied again.
    const second = proxy.requestsOf('Typed fixed.')[1];
    expect(JSON.stringify(second?.messages.at(-1))).toContain('/count must be integer');
  });

  it('three replies that do not match fail it bad_reply, naming the last mismatch; no 4th request', async () => {
    const result = await engine.run({
      prompt: task('Typed hopeless.', [
        { reply: { risks: [] } },
        { reply: { risks: [], count: 0, extra: true } },
        { reply: 'just prose' },
        { reply: { risks: [], count: 0 } },
      ]),
      outputSchema: RISKS,
    });
    expect(result.outcome).toBe('failed');
    expect(result.code).toBe('bad_reply');
    expect(result.reason).toMatch(/^3 replies did not match the output schema; the last: /);
    expect(result.reason).toContain('`result` must be object');
    expect(result.reason).not.toContain('additional properties');
    expect(result.value).toBeUndefined();
    expect(proxy.requestsOf('Typed hopeless.')).toHaveLength(3);
  });

  it('two matching replies in one batch: the first is the value, the second is answered is_error', async () => {
    const first = { risks: ['first'], count: 1 };
    const result = await engine.run({
      prompt: task('Typed twice.', [
        { calls: [{ reply: first }, { reply: { risks: [], count: 0 } }] },
      ]),
      outputSchema: RISKS,
    });
    expect(result).toMatchObject({ outcome: 'complete', value: first });
    expect(result.text).toBe(JSON.stringify(first, null, 2));
    const transcript = readTranscript(result);
    assertToolUsesAnswered(transcript);
    const [accepted, extra] = contentBlocks(transcript[2]!) as ToolResultBlock[];
    expect(accepted?.is_error).toBeUndefined();
    expect(extra).toMatchObject({ is_error: true, content: EXTRA_REPLY_TEXT });
    expect(proxy.requestsOf('Typed twice.')).toHaveLength(1);
  });

  it('a schema Ajv refuses is a UsageError naming `outputSchema`, and nothing is spawned', () => {
    const before = proxy.requests.length;
    const live = engine.liveCount;
    expect(() =>
      engine.spawn({ prompt: 'never runs', outputSchema: { type: 'not-a-type' } }),
    ).toThrow(/^Expected `outputSchema` to be a JSON Schema, but it does not compile: /);
    expect(() =>
      engine.spawn({
        prompt: 'never runs',
        outputSchema: ['not', 'an', 'object'] as unknown as Record<string, unknown>,
      }),
    ).toThrow(
      /^Expected `outputSchema` to be a JSON Schema \(an object\) or a Standard Schema \(zod, valibot, arktype\) with a JSON Schema conversion, got /,
    );
    expect(engine.liveCount).toBe(live);
    expect(proxy.requests.length).toBe(before);
  });
});

describe('typed replies in cohort batch', () => {
  it('a task line with outputSchema gets a result line with value; a non-object schema is a bad line', async () => {
    const dir = tempDir('cohort-typed-batch-');
    const tasks = path.join(dir, 'tasks.jsonl');
    const out = path.join(dir, 'results.jsonl');
    const value = { risks: ['from the batch'], count: 1 };
    writeFileSync(
      tasks,
      [
        { id: 'typed', prompt: scripted([{ reply: value }]), outputSchema: RISKS },
        { id: 'bad', prompt: scripted([{ reply: 'x' }]), outputSchema: 'not a schema' },
      ]
        .map((line) => JSON.stringify(line))
        .join('\n'),
    );
    const run = runCli(['batch', tasks, '--out', out, '--base-url', model.url]);
    // A bad line makes the exit 1, though the good line ran and completed.
    expect((await run.exit).code).toBe(1);
    expect(run.stderr()).toMatch(
      /tasks\.jsonl:2: expected `outputSchema` to be a JSON Schema \(an object\), got /,
    );
    const lines = readResultLines(out) as ({ value?: unknown } & { taskId: string })[];
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ taskId: 'typed', outcome: 'complete', value });
  });
});

describe('a crash resume keeps the count of refused replies', () => {
  it('restoreTranscript counts the refused typed replies, and only those', () => {
    const line = (message: unknown) => JSON.stringify(message);
    const use = (id: string, name: string, input: unknown) =>
      line({ role: 'assistant', content: [{ type: 'tool_use', id, name, input }] });
    const answer = (id: string, content: string, isError: boolean) =>
      line({
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: id, content, ...(isError ? { is_error: true } : {}) },
        ],
      });
    const state = restoreTranscript(
      [
        line({ role: 'user', content: 'go' }),
        use('t1', 'reply', { result: 1 }),
        answer('t1', `${BAD_REPLY_PREFIX}: \`result\` must be object.`, true),
        use('t2', 'echo', {}),
        // An error that is not a refused reply does not count.
        answer('t2', '`echo` failed: boom', true),
        use('t3', 'reply', { result: 2 }),
        answer('t3', `${BAD_REPLY_PREFIX}: \`result\` must be object.`, true),
      ].join('\n'),
    );
    expect(state?.badReplies).toBe(2);
    expect(state?.ended).toBeUndefined();
    expect(state?.steps).toBe(3);
  });

  it('a child resumed after a worker crash counts the refusals before it: its third fails it', async () => {
    const crashModel = await startScriptedModel({ port: 0 });
    // The subject waits in a host tool (on main, so never blamed) while a sibling crashes the
    // worker: the crash lands after its two refusals are committed, whatever the machine's speed.
    const gate = hostGate('hold');
    const crashEngine = await Engine.start({
      threads: 1,
      maxCrashes: 1,
      logDir: tempDir('cohort-logs-'),
      toolModules: [TEST_TOOLS],
      hostTools: [gate.tool],
      provider: { baseURL: crashModel.url, model: 'cohort-scripted', maxRetries: 0 },
    });
    try {
      const events: AgentEvent[] = [];
      // Two refusals committed, then a third step held in the gate while the worker crashes. Were
      // the count lost on resume, the fourth step's refusal would be the first, and the script
      // would run out.
      const subject = crashEngine.spawn({
        prompt: scripted([
          { reply: 'not an object' },
          { reply: 'still not an object' },
          { calls: [{ name: 'hold', input: {} }] },
          { reply: 'third time, no object' },
        ]),
        outputSchema: RISKS,
        onEvent: (event) => events.push(event),
      });
      await gate.entered(1);
      // The prompt, two refused replies with their answers, and the held step's response: a
      // step's response is committed before its tools run.
      await vi.waitFor(
        () =>
          expect(readTranscript({ id: subject.id, logDir: crashEngine.logDir })).toHaveLength(6),
        { timeout: 10_000 },
      );
      const culprit = crashEngine.spawn({ prompt: scripted([{ calls: [{ name: 'exit' }] }]) });
      // The resumed subject runs its held tool call again (not the request): let it through.
      await culprit.result;
      gate.open();
      const [result, culpritResult] = await Promise.all([subject.result, culprit.result]);
      expect(culpritResult.code).toBe('worker_crashed');
      expect(
        events.some((event) => event.type === 'agent-resume' && event.agentId === subject.id),
      ).toBe(true);
      expect(result.outcome).toBe('failed');
      expect(result.code).toBe('bad_reply');
      expect(result.reason).toMatch(/^3 replies did not match the output schema/);
    } finally {
      await crashEngine.close();
      await crashModel.close();
    }
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\`]/g, '\\$&');
}
