import { toStandardJsonSchema } from '@valibot/to-json-schema';
import { type } from 'arktype';
import * as v from 'valibot';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { checkEngine, Engine } from '../src/main/engine.js';
import { mapAgents } from '../src/main/map-agents.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { ToolResultBlock } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import type { StandardSchema } from '../src/shared/standard-schema.js';
import { standardJsonSchema } from '../src/shared/tools/output-schema.js';
import { BAD_REPLY_PREFIX } from '../src/shared/tools/reply.js';
import { type ScriptedModel, type ScriptStep, startScriptedModel } from '../src/testing/index.js';
import {
  assertToolUsesAnswered,
  contentBlocks,
  readTranscript,
  scripted,
  tempDir,
  usageError,
} from './helpers.js';
import { type RecordingProxy, recordingProxy } from './recording-proxy.js';

// Typed replies from schema libraries (zod 4, valibot, arktype), end to end: a real engine with
// real workers, the scripted model over HTTP behind a recording proxy, so a test reads the reply
// tool the model was offered. The schema object never leaves main: the worker checks replies
// against its JSON Schema, and main parses the value with the schema's own `validate`.

let model: ScriptedModel;
let proxy: RecordingProxy;
let engine: Engine;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
  proxy = await recordingProxy(model.url);
  engine = await Engine.start({
    threads: 2,
    logDir: tempDir('cohort-logs-'),
    provider: { baseURL: proxy.url, model: 'cohort-scripted', maxRetries: 0 },
  });
});

afterAll(async () => {
  await engine.close();
  await proxy.close();
  await model.close();
});

const task = (lead: string, steps: ScriptStep[]) => scripted(steps, lead);

/** The `result` schema of the reply tool the model was offered in the task's first request. */
function offeredSchema(lead: string): unknown {
  const reply = proxy.requestsOf(lead)[0]?.tools?.find((tool) => tool.name === 'reply');
  return (reply?.input_schema.properties as { result?: unknown } | undefined)?.result;
}

// A transform (a string becomes its word count) and a default (`tags`): the model writes the
// input, the caller gets the output.
const FINDING = z.object({
  title: z.string(),
  summary: z.string().transform((text) => text.split(/\s+/).length),
  tags: z.array(z.string()).default([]),
});

describe('a zod 4 schema', () => {
  it('types and parses the value on main: the model is shown the input JSON Schema, the caller gets the output', async () => {
    const events: AgentEvent[] = [];
    const lead = 'Zod typed.';
    const result = await engine.run({
      prompt: task(lead, [{ reply: { title: 'A race', summary: 'close can race a spawn' } }]),
      outputSchema: FINDING,
      onEvent: (event) => events.push(event),
    });
    expectTypeOf(result).toEqualTypeOf<
      AgentResult<{ title: string; summary: number; tags: string[] }>
    >();
    expect(result.outcome).toBe('complete');
    expect(result.value).toEqual({ title: 'A race', summary: 5, tags: [] });
    // `text` renders the reply as the model wrote it.
    expect(JSON.parse(result.text)).toEqual({ title: 'A race', summary: 'close can race a spawn' });
    expect(offeredSchema(lead)).toEqual(
      z.toJSONSchema(FINDING, { target: 'draft-07', io: 'input' }),
    );
    // The settle event a listener hears carries the parsed result too.
    const settle = events.find((event) => event.type === 'agent-settle');
    expect(settle?.type === 'agent-settle' && settle.result.value).toEqual(result.value);
  });

  it('a reply its JSON Schema refuses is refused on the worker and may be fixed, as for any typed reply', async () => {
    const lead = 'Zod fixed.';
    const result = await engine.run({
      prompt: task(lead, [
        { reply: { title: 7, summary: 'x' } },
        { reply: { title: 'fixed', summary: 'one two', tags: ['a'] } },
      ]),
      outputSchema: FINDING,
    });
    expect(result).toMatchObject({
      outcome: 'complete',
      value: { title: 'fixed', summary: 2, tags: ['a'] },
    });
    const transcript = readTranscript(result);
    assertToolUsesAnswered(transcript);
    const refused = contentBlocks(transcript[2]!)[0] as ToolResultBlock;
    expect(refused.is_error).toBe(true);
    expect(refused.content).toContain(BAD_REPLY_PREFIX);
    expect(refused.content).toContain('/title must be string');
  });

  it('a refinement the JSON Schema cannot state fails it bad_reply with the issues, after one request', async () => {
    const lead = 'Zod refined.';
    const EVEN = z.object({ n: z.number().refine((n) => n % 2 === 0, 'must be even') });
    const result = await engine.run({
      prompt: task(lead, [{ reply: { n: 3 } }, { reply: { n: 4 } }]),
      outputSchema: EVEN,
    });
    expect(result).toMatchObject({ outcome: 'failed', code: 'bad_reply', text: '' });
    expect(result.reason).toBe(
      'The reply matched the JSON Schema of `outputSchema`, but the schema refused it: /n: must be even',
    );
    expect(result.value).toBeUndefined();
    expect(proxy.requestsOf(lead)).toHaveLength(1);
  });

  it('an async refinement is awaited: the result settles after it, and the handle reads running until then', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    // Open once both children have replied and both values wait in their parse.
    const seen = new Set<number>();
    let reached!: () => void;
    const entered = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const GATED = z.object({
      n: z.number().refine(async (n) => {
        seen.add(n);
        if (seen.size === 2) reached();
        await gate;
        return n > 0;
      }, 'must be positive'),
    });
    const good = engine.spawn({
      prompt: task('Zod async good.', [{ reply: { n: 2 } }]),
      outputSchema: GATED,
    });
    const bad = engine.spawn({
      prompt: task('Zod async bad.', [{ reply: { n: -2 } }]),
      outputSchema: GATED,
    });
    await entered;
    // Both have replied and their values are being parsed on main: neither has settled.
    expect([good.status, bad.status]).toEqual(['running', 'running']);
    open();
    expect(await good.result).toMatchObject({ outcome: 'complete', value: { n: 2 } });
    expect(await bad.result).toMatchObject({
      outcome: 'failed',
      code: 'bad_reply',
      reason:
        'The reply matched the JSON Schema of `outputSchema`, but the schema refused it: /n: must be positive',
    });
    expect([good.status, bad.status]).toEqual(['settled', 'settled']);
  });

  it('mapAgents yields the parsed, typed values', async () => {
    const SCORE = z.object({ score: z.number().int() }).transform(({ score }) => score * 10);
    const specs = [1, 2, 3].map((score) => ({
      prompt: task(`Zod map ${score}.`, [{ reply: { score } }]),
      outputSchema: SCORE,
    }));
    const values: number[] = [];
    for await (const { result } of mapAgents(engine, specs)) {
      expectTypeOf(result.value).toEqualTypeOf<number | undefined>();
      values.push(result.value!);
    }
    expect(values.sort((a, b) => a - b)).toEqual([10, 20, 30]);
  });
});

describe('a recursive zod schema', () => {
  it('refers to its own root, and still works nested in the reply tool: it gets an `$id` of its own', async () => {
    const Node: z.ZodType<{ name: string; children?: { name: string }[] | undefined }> = z.object({
      name: z.string(),
      get children() {
        return z.array(Node).optional();
      },
    });
    const tree = { name: 'root', children: [{ name: 'leaf', children: [] }] };
    const lead = 'Zod recursive.';
    const result = await engine.run({
      prompt: task(lead, [{ reply: { name: 'root', children: [{ name: 7 }] } }, { reply: tree }]),
      outputSchema: Node,
    });
    expect(result).toMatchObject({ outcome: 'complete', value: tree });
    expect(offeredSchema(lead)).toMatchObject({
      $id: expect.stringMatching(/^urn:cohort:output-schema:[0-9a-f]{32}$/),
      properties: { children: { items: { $ref: '#' } } },
    });
    // The nested node was checked against the root's schema: its number name was refused.
    const refused = contentBlocks(readTranscript(result)[2]!)[0] as ToolResultBlock;
    expect(refused.content).toContain('/children/0/name must be string');
  });
});

describe('other schema libraries', () => {
  it('valibot, through toStandardJsonSchema: a typed value', async () => {
    const AUTHOR = toStandardJsonSchema(
      v.object({ name: v.string(), born: v.optional(v.number(), 1900) }),
    );
    const result = await engine.run({
      prompt: task('Valibot typed.', [{ reply: { name: 'Ada' } }]),
      outputSchema: AUTHOR,
    });
    expectTypeOf(result.value).toEqualTypeOf<{ name: string; born: number } | undefined>();
    expect(result).toMatchObject({ outcome: 'complete', value: { name: 'Ada', born: 1900 } });
  });

  it('arktype, whose types are functions: a typed value, with a morph applied', async () => {
    const COUNT = type({ label: 'string', count: 'string.integer.parse' });
    const result = await engine.run({
      prompt: task('Arktype typed.', [{ reply: { label: 'lines', count: '42' } }]),
      outputSchema: COUNT,
    });
    expectTypeOf(result.value).toEqualTypeOf<{ label: string; count: number } | undefined>();
    expect(result).toMatchObject({ outcome: 'complete', value: { label: 'lines', count: 42 } });
  });

  it('any Standard Schema with a toJSONSchema() method and no ~standard.jsonSchema', async () => {
    let asked: unknown;
    const UPPER = {
      '~standard': {
        version: 1,
        vendor: 'hand-made',
        validate: (value: unknown) =>
          typeof value === 'string'
            ? { value: value.toUpperCase() }
            : { issues: [{ message: 'not a string' }] },
      },
      toJSONSchema(options: unknown) {
        asked = options;
        return { type: 'string' };
      },
    } satisfies StandardSchema<unknown, string> & { toJSONSchema(options: unknown): unknown };
    const result = await engine.run({
      prompt: task('Hand-made typed.', [{ reply: 'shout' }]),
      outputSchema: UPPER,
    });
    expect(asked).toEqual({ target: 'draft-07' });
    expect(result).toMatchObject({ outcome: 'complete', value: 'SHOUT' });
  });
});

describe('JSON Schema as before', () => {
  it('types the value by the type argument; the value is the reply as parsed JSON', async () => {
    const schema = {
      type: 'object',
      properties: { count: { type: 'integer' } },
      required: ['count'],
    };
    const result = await engine.run<{ count: number }>({
      prompt: task('JSON typed.', [{ reply: { count: 3 } }]),
      outputSchema: schema,
    });
    expectTypeOf(result.value).toEqualTypeOf<{ count: number } | undefined>();
    expect(result).toMatchObject({ outcome: 'complete', value: { count: 3 } });
    expect(offeredSchema('JSON typed.')).toEqual(schema);
  });
});

describe('a Standard Schema that cannot give a JSON Schema', () => {
  it('is a UsageError naming `outputSchema` and how to convert it; nothing runs', () => {
    const before = proxy.requests.length;
    const live = engine.liveCount;
    const error = usageError(() =>
      engine.spawn({
        prompt: 'never runs',
        // @ts-expect-error: a valibot schema alone has no JSON Schema conversion
        outputSchema: v.object({ name: v.string() }),
      }),
    );
    expect(error.message).toMatch(
      /^Expected `outputSchema` to be a JSON Schema or a Standard Schema with a JSON Schema conversion \(`~standard\.jsonSchema`, or a `toJSONSchema\(\)` method\), got a valibot schema with neither: /,
    );
    expect(error.message).toContain(
      '`toStandardJsonSchema(schema)` from `@valibot/to-json-schema`',
    );
    expect(engine.liveCount).toBe(live);
    expect(proxy.requests.length).toBe(before);
  });

  it('a conversion that throws is a UsageError naming `outputSchema` with the library`s reason', () => {
    const error = usageError(() =>
      engine.spawn({ prompt: 'never runs', outputSchema: z.object({ when: z.date() }) }),
    );
    expect(error.message).toBe(
      'Expected `outputSchema` (a zod schema) to convert to a JSON Schema (draft-07), but its conversion threw: Date cannot be represented in JSON Schema',
    );
  });

  it('a ~standard of another version is refused', () => {
    const error = usageError(() =>
      engine.spawn({
        prompt: 'never runs',
        outputSchema: {
          '~standard': { version: 2, vendor: 'future', jsonSchema: {} },
        } as never,
      }),
    );
    expect(error.message).toBe(
      "Expected `outputSchema['~standard'].version` to be 1 (a Standard Schema of version 1), got `2` (number)",
    );
  });

  it("the engine's check refuses it as a spawn would", async () => {
    const check = await checkEngine({});
    const error = usageError(() =>
      check.checkAgent({
        prompt: 'never runs',
        outputSchema: { '~standard': { version: 1, vendor: 'bare' } } as never,
      }),
    );
    expect(error.message).toContain('got a bare schema with neither');
  });
});

describe('the conversion', () => {
  it('runs once per schema object and gives plain JSON, which can cross threads', () => {
    let calls = 0;
    const schema: StandardSchema<unknown, string> = {
      '~standard': {
        version: 1,
        vendor: 'counted',
        jsonSchema: {
          input: (options) => {
            calls++;
            // What no thread could be sent: a function, and a key left undefined.
            return { type: 'string', target: options.target, describe: () => 'x', note: undefined };
          },
          output: () => ({}),
        },
      },
    };
    const first = standardJsonSchema('outputSchema', schema);
    expect(first).toEqual({ type: 'string', target: 'draft-07' });
    expect(Object.keys(first)).toEqual(['type', 'target']);
    expect(structuredClone(first)).toEqual(first);
    expect(standardJsonSchema('outputSchema', schema)).toBe(first);
    expect(calls).toBe(1);
  });
});
