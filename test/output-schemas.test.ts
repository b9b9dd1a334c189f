import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAgentFile } from '../src/main/agents/load.js';
import { checkEngine, Engine } from '../src/main/engine.js';
import type { EngineCheck } from '../src/main/engine-check.js';
import { runAgentLoop } from '../src/shared/loop/agent-loop.js';
import { DEFAULT_PROVIDER_CONFIG } from '../src/shared/provider/config.js';
import { Provider } from '../src/shared/provider/provider.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import { outputValidator } from '../src/shared/tools/output-schema.js';
import { type ScriptedModel, type ScriptStep, startScriptedModel } from '../src/testing/index.js';
import { readTranscript, scripted, TEST_TOOLS, tempDir, usageError } from './helpers.js';
import { promptOf, type RecordingProxy, recordingProxy } from './recording-proxy.js';

// Output schemas (typed replies) as users and models write them: two that share an `$id`, many
// distinct ones, and ones with `$ref`s. A real engine with one worker thread (so every schema is
// compiled on the same thread), the scripted model over HTTP behind a recording proxy that keeps
// the requests the model received.

let model: ScriptedModel;
let proxy: RecordingProxy;
let engine: Engine;
let check: EngineCheck;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
  proxy = await recordingProxy(model.url);
  engine = await Engine.start({
    threads: 1,
    logDir: tempDir('cohort-logs-'),
    toolModules: [TEST_TOOLS],
    provider: { baseURL: proxy.url, model: 'cohort-scripted', maxRetries: 0 },
  });
  check = await checkEngine({});
});

afterAll(async () => {
  await engine.close();
  await proxy.close();
  await model.close();
});

const SHARED_ID = 'https://schemas.cohort.invalid/reply.json';

describe('two output schemas that share an `$id`', () => {
  const NAMED = {
    $id: SHARED_ID,
    type: 'object',
    properties: { name: { type: 'string' } },
    required: ['name'],
    additionalProperties: false,
  };
  const COUNTED = {
    $id: SHARED_ID,
    type: 'object',
    properties: { count: { type: 'integer' } },
    required: ['count'],
    additionalProperties: false,
  };

  it('both pass checkAgent, and both run through one engine to their values', async () => {
    expect(() => check.checkAgent({ prompt: 'x', outputSchema: NAMED })).not.toThrow();
    expect(() => check.checkAgent({ prompt: 'x', outputSchema: COUNTED })).not.toThrow();
    const named = await engine.run({
      prompt: scripted([{ reply: { name: 'first' } }]),
      outputSchema: NAMED,
    });
    const counted = await engine.run({
      prompt: scripted([{ reply: { count: 2 } }]),
      outputSchema: COUNTED,
    });
    expect(named).toMatchObject({ outcome: 'complete', value: { name: 'first' } });
    expect(counted).toMatchObject({ outcome: 'complete', value: { count: 2 } });
  });

  it('each is checked against its own schema, not the other one sharing its `$id`', async () => {
    // `{ name }` matches NAMED only: under COUNTED it is refused, then the fixed reply is taken.
    const result = await engine.run({
      prompt: scripted([{ reply: { name: 'wrong schema' } }, { reply: { count: 7 } }]),
      outputSchema: COUNTED,
    });
    expect(result).toMatchObject({ outcome: 'complete', value: { count: 7 } });
    expect(result.usage.steps).toBe(2);
  });
});

describe('outputValidator keeps a bounded cache of compiled schemas', () => {
  // The cache is module-private. What shows from outside is identity: a cached schema's validator
  // is the same function again; an evicted one is compiled anew into a different function.
  const distinct = (tag: string, index: number) => ({
    type: 'object',
    properties: { [`${tag}${index}`]: { const: index } },
    required: [`${tag}${index}`],
  });

  it('holds 256: all of 256 fresh schemas are still cached; the 257th evicts the least recently used', () => {
    const schemas = Array.from({ length: 256 }, (_, index) => distinct('held', index));
    const first = schemas.map((schema) => outputValidator(schema));
    // In insertion order, each use moves it last: were the bound below 256, the first would have
    // been evicted already and each lookup would miss.
    schemas.forEach((schema, index) => {
      expect(outputValidator(schema), `schema ${index}`).toBe(first[index]);
    });
    // The order of use is the insertion order again: one more evicts schema 0, and only it.
    outputValidator(distinct('extra', 0));
    expect(outputValidator(schemas[1]!)).toBe(first[1]);
    const again = outputValidator(schemas[0]!);
    expect(again).not.toBe(first[0]);
    // The evicted schema, compiled again, still validates. (This was a test of its own that
    // compiled 300 more schemas to evict one; each compile costs ~10 ms.)
    expect(again({ held0: 0 })).toBe(true);
    expect(again({ held0: 1 })).toBe(false);
    expect(again.errors?.[0]?.instancePath).toBe('/held0');
  });
});

describe('`$ref`s in an output schema', () => {
  const WITH_DEFS = {
    type: 'object',
    $defs: { item: { type: 'string', minLength: 1 } },
    properties: { items: { type: 'array', items: { $ref: '#/$defs/item' } } },
    required: ['items'],
    additionalProperties: false,
  };
  const WITH_DEFINITIONS = {
    type: 'object',
    definitions: { level: { enum: ['low', 'high'] } },
    properties: { level: { $ref: '#/definitions/level' } },
    required: ['level'],
  };

  /** The reply tool's input schema in the requests of the agent whose prompt starts with `lead`. */
  function replySchemas(lead: string): Record<string, unknown>[] {
    return proxy.requests
      .filter((request) => promptOf(request).startsWith(lead))
      .map((request) => request.tools?.find((tool) => tool.name === 'reply')?.input_schema ?? {});
  }

  it('`#/$defs/…`: the reply tool the model got has the `$defs` at its top, and the reply resolves them', async () => {
    const steps: ScriptStep[] = [
      // An empty item breaks `minLength` in the definition: refused, so the `$ref` resolved.
      { reply: { items: ['risk', ''] } },
      { reply: { items: ['risk', 'another'] } },
    ];
    const result = await engine.run({
      prompt: scripted(steps, 'Defs schema.'),
      outputSchema: WITH_DEFS,
    });
    expect(result).toMatchObject({ outcome: 'complete', value: { items: ['risk', 'another'] } });
    expect(JSON.stringify(readTranscript(result)[2])).toContain(
      '/items/1 must NOT have fewer than 1 characters',
    );
    const schemas = replySchemas('Defs schema.');
    expect(schemas).toHaveLength(2);
    for (const schema of schemas) {
      expect(schema.$defs).toEqual(WITH_DEFS.$defs);
      expect(schema.properties).toEqual({ result: WITH_DEFS });
    }
  });

  it('`#/definitions/…`: lifted to the top the same way, and a matching reply completes', async () => {
    const result = await engine.run({
      prompt: scripted([{ reply: { level: 'high' } }], 'Definitions schema.'),
      outputSchema: WITH_DEFINITIONS,
    });
    expect(result).toMatchObject({ outcome: 'complete', value: { level: 'high' } });
    const [schema] = replySchemas('Definitions schema.');
    expect(schema?.definitions).toEqual(WITH_DEFINITIONS.definitions);
    expect(schema).not.toHaveProperty('$defs');
  });

  const ROOT_REF = {
    type: 'object',
    properties: { children: { type: 'array', items: { $ref: '#' } } },
  };
  const PROPERTY_REF = {
    type: 'object',
    properties: { a: { type: 'string' }, b: { $ref: '#/properties/a' } },
  };

  it.each([
    ['#', ROOT_REF],
    ['#/properties/a', PROPERTY_REF],
  ])(
    '`$ref: "%s"` without an `$id` is refused by checkAgent and by engine.spawn, naming it',
    (ref, schema) => {
      const requests = proxy.requests.length;
      for (const refuse of [
        () => check.checkAgent({ prompt: 'x', outputSchema: schema }),
        () => engine.spawn({ prompt: 'never runs', outputSchema: schema }),
      ]) {
        const { message } = usageError(refuse);
        expect(message).toMatch(/^Expected `outputSchema` to be usable as a reply's schema, but /);
        expect(message).toContain(`\`$ref\` \`${ref}\``);
      }
      expect(proxy.requests.length).toBe(requests);
    },
  );

  it('the same `$ref`s with an `$id` of their own pass checkAgent', () => {
    for (const schema of [ROOT_REF, PROPERTY_REF]) {
      const own = {
        $id: `https://schemas.cohort.invalid/${Object.keys(schema).length}`,
        ...schema,
      };
      expect(() => check.checkAgent({ prompt: 'x', outputSchema: own })).not.toThrow();
    }
  });

  it('an agent file with `$ref: "#/properties/a"` is refused at FILE:LINE of `outputSchema`', () => {
    const file = path.join(tempDir('cohort-agents-'), 'helper.md');
    const text = (schemaLines: string[]) =>
      [
        '---',
        'name: helper',
        'description: Helps.',
        'outputSchema:',
        ...schemaLines,
        '---',
        'Do the work.',
        '',
      ].join('\n');
    const { message } = usageError(() =>
      parseAgentFile(
        file,
        text([
          '  type: object',
          '  properties:',
          '    a: { type: string }',
          "    b: { $ref: '#/properties/a' }",
        ]),
      ),
    );
    expect(message).toMatch(
      /^.*helper\.md:4: Expected `outputSchema` to be usable as a reply's schema, but its `\$ref` `#\/properties\/a` /,
    );
    expect(message.startsWith(`${path.resolve(file)}:4: `)).toBe(true);
    // A `$ref` into `$defs` is fine in a file too.
    const good = parseAgentFile(
      file,
      text([
        '  type: object',
        '  $defs: { a: { type: string } }',
        '  properties:',
        "    b: { $ref: '#/$defs/a' }",
      ]),
    );
    expect(good.outputSchema?.properties).toEqual({ b: { $ref: '#/$defs/a' } });
  });
});

describe('a resumed child whose transcript already holds its last refusal', () => {
  const SCHEMA = {
    type: 'object',
    properties: { ok: { type: 'boolean' } },
    required: ['ok'],
  };

  /** Runs the loop as a resumed child at depth 1, `badReplies` refusals read back. */
  async function resume(badReplies: number) {
    const provider = new Provider({
      ...DEFAULT_PROVIDER_CONFIG,
      model: 'cohort-scripted',
      baseURL: model.url,
      maxRetries: 0,
    });
    // Three steps committed before the crash; the script's next step (its 4th) is a good reply,
    // so a request, were one made, would complete the child.
    const steps: ScriptStep[] = [
      { reply: 'no' },
      { reply: 'still no' },
      { reply: 'never' },
      { reply: { ok: true } },
    ];
    const committed: MessageParam[][] = [];
    const requestsBefore = model.stats.requests;
    try {
      const outcome = await runAgentLoop({
        agentId: `resumed-${badReplies}`,
        depth: 1,
        maxDepth: 1,
        messages: [
          { role: 'user', content: scripted(steps) },
          ...Array.from({ length: 3 }, (_, index): MessageParam[] => [
            {
              role: 'assistant',
              content: [
                { type: 'tool_use', id: `t${index}`, name: 'reply', input: { result: 'no' } },
              ],
            },
            {
              role: 'user',
              content: [
                {
                  type: 'tool_result',
                  tool_use_id: `t${index}`,
                  content: 'refused',
                  is_error: true,
                },
              ],
            },
          ]).flat(),
        ],
        tools: new Map(),
        provider,
        maxSteps: 10,
        signal: new AbortController().signal,
        sink: { commit: (messages) => void committed.push(messages) },
        resumeFrom: { steps: 3, counted: 3, nextStepFree: false, badReplies },
        outputSchema: SCHEMA,
        maxBadReplies: 3,
      });
      return { outcome, requests: model.stats.requests - requestsBefore, committed };
    } finally {
      await provider.close();
    }
  }

  it('with 3 refusals it fails bad_reply at once: no request, nothing committed', async () => {
    const { outcome, requests, committed } = await resume(3);
    expect(outcome).toMatchObject({ kind: 'failed', failure: { code: 'bad_reply' } });
    expect(outcome.kind === 'failed' && outcome.failure.message).toMatch(
      /^3 replies did not match the output schema/,
    );
    expect(requests).toBe(0);
    expect(committed).toEqual([]);
  });

  it('with 2 refusals it goes on: the next request is made and its good reply taken', async () => {
    const { outcome, requests } = await resume(2);
    expect(outcome).toEqual({ kind: 'replied', replies: [{ ok: true }] });
    expect(requests).toBe(1);
  });
});
