import { isIPv4 } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { typedReplySchema } from '../src/shared/tools/reply.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { listPattern, namedPaths } from '../src/testing/path-mentions.js';
import { readHints } from '../src/testing/read-hints.js';
import { schemaValue } from '../src/testing/schema-value.js';

/** The worker's own check of a typed reply (src/shared/tools/output-schema.ts). */
function ajvCheck(schema: object, value: unknown): string | undefined {
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
  return validate(value) ? undefined : JSON.stringify(validate.errors);
}

/**
 * Ajv as the worker runs it knows no string formats, so each format's value is also checked by
 * an oracle that is not ours: Date parsing, the URL parser, node:net.
 */
const FORMAT_ORACLES: Record<string, (text: string) => boolean> = {
  date: (text) => /^\d{4}-\d{2}-\d{2}$/.test(text) && !Number.isNaN(Date.parse(text)),
  'date-time': (text) => /^\d{4}-\d{2}-\d{2}T/.test(text) && !Number.isNaN(Date.parse(text)),
  email: (text) => /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(text),
  uri: (text) => URL.canParse(text),
  uuid: (text) =>
    /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(text),
  ipv4: isIPv4,
};

/** A schema, and a name to report it by. Each must get a value both Ajv and we accept. */
const SATISFIABLE: Array<[string, Record<string, unknown>]> = [
  ['string', { type: 'string' }],
  ['number', { type: 'number' }],
  ['integer', { type: 'integer' }],
  ['boolean', { type: 'boolean' }],
  ['null', { type: 'null' }],
  ['enum', { enum: ['low', 'medium', 'high'] }],
  ['enum with a type that rules out its first entry', { type: 'integer', enum: ['one', 2, 3] }],
  ['const', { const: { kind: 'fixed', n: 1 } }],
  [
    'required and optional properties, closed',
    {
      type: 'object',
      properties: { id: { type: 'string' }, rank: { type: 'integer' }, note: { type: 'string' } },
      required: ['id', 'rank'],
      additionalProperties: false,
    },
  ],
  [
    'nested objects and arrays with bounds',
    {
      type: 'object',
      required: ['owner', 'tags', 'matrix'],
      properties: {
        owner: {
          type: 'object',
          required: ['login', 'team'],
          properties: {
            login: { type: 'string', minLength: 3, maxLength: 8 },
            team: {
              type: 'object',
              required: ['size'],
              properties: { size: { type: 'integer', minimum: 1 } },
            },
          },
        },
        tags: { type: 'array', items: { type: 'string', minLength: 2 }, minItems: 2, maxItems: 3 },
        matrix: {
          type: 'array',
          minItems: 1,
          items: { type: 'array', minItems: 2, items: { type: 'number' } },
        },
      },
    },
  ],
  [
    'maxItems below the items wanted',
    { type: 'array', items: { type: 'string' }, minItems: 0, maxItems: 0 },
  ],
  [
    'uniqueItems from an enum',
    { type: 'array', items: { enum: ['a', 'b', 'c'] }, minItems: 3, uniqueItems: true },
  ],
  [
    'uniqueItems of numbers and strings',
    {
      type: 'object',
      required: ['n', 's'],
      properties: {
        n: {
          type: 'array',
          items: { type: 'integer', minimum: 10 },
          minItems: 4,
          uniqueItems: true,
        },
        s: { type: 'array', items: { type: 'string' }, minItems: 3, uniqueItems: true },
      },
    },
  ],
  [
    'a tuple (items as a list) with no more items',
    {
      type: 'array',
      items: [{ type: 'string' }, { type: 'integer', minimum: 3 }],
      additionalItems: false,
      minItems: 2,
    },
  ],
  ['contains', { type: 'array', items: { type: 'integer' }, contains: { minimum: 5 } }],
  ...[
    'date',
    'date-time',
    'time',
    'email',
    'uri',
    'uuid',
    'ipv4',
    'ipv6',
    'hostname',
    'duration',
  ].map((format): [string, Record<string, unknown>] => [
    `format ${format}`,
    { type: 'string', format },
  ]),
  ['minLength', { type: 'string', minLength: 40 }],
  ['maxLength', { type: 'string', maxLength: 2 }],
  ['maxLength 0', { type: 'string', maxLength: 0 }],
  ['pattern: letters and digits', { type: 'string', pattern: '^[A-Z]{3}-\\d{4}$' }],
  ['pattern: alternation and groups', { type: 'string', pattern: '^(foo|bar)+-(?:x|y){2}baz$' }],
  [
    'pattern: negated class and minLength',
    { type: 'string', pattern: '^[^aeiou]+$', minLength: 5 },
  ],
  ['pattern: unanchored', { type: 'string', pattern: 'needle' }],
  ['pattern: an address shape', { type: 'string', pattern: '^\\w+@\\w+\\.(com|org)$' }],
  ['pattern: counted ranges', { type: 'string', pattern: '^v\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}$' }],
  ['pattern: optional parts and escapes', { type: 'string', pattern: '^\\$?\\d+(\\.\\d{2})?$' }],
  ['pattern and format together', { type: 'string', format: 'date', pattern: '^2000-' }],
  ['minimum above zero', { type: 'number', minimum: 5 }],
  ['maximum below zero', { type: 'number', maximum: -3 }],
  ['exclusiveMinimum (number form)', { type: 'number', exclusiveMinimum: 0 }],
  ['exclusiveMinimum on an integer', { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 2 }],
  ['a narrow open interval', { type: 'number', exclusiveMinimum: 0.1, exclusiveMaximum: 0.2 }],
  ['multipleOf with a minimum', { type: 'integer', multipleOf: 7, minimum: 10 }],
  ['a fractional multipleOf', { type: 'number', multipleOf: 0.1, minimum: 0.25 }],
  ['an integer with a fractional multipleOf', { type: 'integer', multipleOf: 0.5, minimum: 1.2 }],
  ['multipleOf with a negative maximum', { type: 'number', multipleOf: 3, maximum: -4 }],
  [
    'anyOf: the first workable option',
    {
      anyOf: [
        { type: 'string', minLength: 5, maxLength: 2 },
        { type: 'integer', minimum: 4 },
      ],
    },
  ],
  [
    'oneOf: a value exactly one option accepts',
    {
      oneOf: [
        { type: 'string', maxLength: 3 },
        { type: 'string', minLength: 2 },
      ],
    },
  ],
  [
    'allOf: constraints joined',
    {
      allOf: [
        { type: 'object', required: ['a'] },
        { required: ['b'], properties: { b: { type: 'integer', minimum: 2 } } },
      ],
    },
  ],
  ['not', { type: 'string', not: { const: 'value' } }],
  [
    'if/then/else',
    {
      type: 'object',
      required: ['kind'],
      properties: { kind: { enum: ['book', 'paper'] } },
      if: { properties: { kind: { const: 'book' } } },
      // biome-ignore lint/suspicious/noThenProperty: `then` is a JSON Schema keyword here.
      then: { required: ['isbn'], properties: { isbn: { type: 'string', pattern: '^\\d{13}$' } } },
    },
  ],
  [
    '$ref into $defs',
    {
      type: 'object',
      required: ['from', 'to'],
      properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
      $defs: {
        point: {
          type: 'object',
          required: ['x', 'y'],
          properties: { x: { type: 'integer', minimum: 1 }, y: { type: 'integer' } },
        },
      },
    },
  ],
  [
    '$ref into definitions, with siblings',
    {
      type: 'object',
      required: ['size'],
      properties: { size: { $ref: '#/definitions/positive', maximum: 9 } },
      definitions: { positive: { type: 'integer', exclusiveMinimum: 4 } },
    },
  ],
  [
    'a recursive schema with an $id of its own',
    {
      $id: 'urn:test:tree',
      type: 'object',
      required: ['name', 'children'],
      properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } },
    },
  ],
  ['nullable: string or null', { type: ['string', 'null'], minLength: 1 }],
  ['nullable: null first', { type: ['null', 'integer'], minimum: 3 }],
  ['only null fits', { type: ['string', 'null'], enum: [null] }],
  [
    'a required property not in properties',
    { type: 'object', required: ['extra'], additionalProperties: { type: 'integer', minimum: 2 } },
  ],
  [
    'patternProperties and minProperties',
    {
      type: 'object',
      minProperties: 2,
      properties: { a: { type: 'string' } },
      patternProperties: { '^x-': { type: 'boolean' } },
      required: ['x-flag'],
    },
  ],
  [
    'dependentRequired and dependencies',
    {
      type: 'object',
      required: ['card'],
      properties: {
        card: { type: 'string' },
        billing: { type: 'string' },
        zip: { type: 'string' },
      },
      dependentRequired: { card: ['billing'] },
      dependencies: { billing: ['zip'] },
    },
  ],
  ['untyped', {}],
  [
    'a zod schema as the engine converts it',
    z.toJSONSchema(
      z.object({
        risks: z.array(z.string()),
        count: z.number().int(),
        level: z.enum(['low', 'high']),
        owner: z.email().optional(),
        since: z.iso.date(),
        id: z.uuid(),
      }),
      { target: 'draft-7' },
    ) as Record<string, unknown>,
  ],
];

function formatsIn(schema: unknown, value: unknown, found: Array<[string, string]> = []) {
  if (typeof schema !== 'object' || schema === null) return found;
  const record = schema as Record<string, unknown>;
  if (typeof record.format === 'string' && typeof value === 'string')
    found.push([record.format, value]);
  if (typeof record.properties === 'object' && typeof value === 'object' && value !== null) {
    for (const [key, sub] of Object.entries(record.properties as object)) {
      formatsIn(sub, (value as Record<string, unknown>)[key], found);
    }
  }
  return found;
}

describe('schemaValue: a value for every schema it can satisfy', () => {
  it.each(SATISFIABLE)('%s', (_name, schema) => {
    const made = schemaValue(schema);
    expect(ajvCheck(schema, made.value)).toBeUndefined();
    expect(made.valid).toBe(true);
    for (const [format, text] of formatsIn(schema, made.value)) {
      expect(FORMAT_ORACLES[format]?.(text) ?? true, `${format}: ${text}`).toBe(true);
    }
    // Deterministic: the same schema, the same value.
    expect(schemaValue(schema).value).toEqual(made.value);
  });

  it('nested in the reply tool, the way the worker advertises it, its $refs still resolve', () => {
    const output = {
      type: 'object',
      required: ['items'],
      properties: { items: { type: 'array', minItems: 2, items: { $ref: '#/$defs/item' } } },
      $defs: {
        item: {
          type: 'object',
          required: ['sku'],
          properties: { sku: { type: 'string', pattern: '^[A-Z]{2}\\d{3}$' } },
        },
      },
    };
    const tool = typedReplySchema(output);
    const made = schemaValue((tool.properties as Record<string, unknown>).result, {
      document: tool,
    });
    expect(made.valid).toBe(true);
    expect(ajvCheck(tool, { result: made.value })).toBeUndefined();
    expect(made.value).toEqual({ items: [{ sku: 'AA000' }, { sku: 'AA000' }] });
  });

  it('gives the smallest value: optional properties out, empty lists, zero, the name as text', () => {
    const schema = {
      type: 'object',
      required: ['label', 'count', 'tags', 'ok'],
      properties: {
        label: { type: 'string' },
        count: { type: 'integer' },
        tags: { type: 'array', items: { type: 'string' } },
        ok: { type: 'boolean' },
        extra: { type: 'string' },
      },
    };
    expect(schemaValue(schema).value).toEqual({ label: 'label', count: 0, tags: [], ok: false });
  });
});

describe('schemaValue: formats and later drafts, which the worker does not check', () => {
  it('gives up a format the rest of the schema rules out, since Ajv checks no format', () => {
    const schema = { type: 'string', format: 'date', minLength: 11 };
    const made = schemaValue(schema);
    expect(made).toEqual({ value: 'value value', valid: true });
    expect(ajvCheck(schema, made.value)).toBeUndefined();
  });

  it('meets prefixItems and items together, as Ajv reads only items', () => {
    const schema = {
      type: 'array',
      prefixItems: [{ type: 'string', maxLength: 3 }],
      items: { type: 'string', minLength: 2 },
      minItems: 2,
    };
    const made = schemaValue(schema);
    expect(made.valid).toBe(true);
    expect(made.value).toEqual(['val', 'value 2']);
    expect(ajvCheck(schema, made.value)).toBeUndefined();
  });
});

describe('schemaValue: schemas it cannot satisfy', () => {
  const UNSATISFIABLE: Array<[string, Record<string, unknown>]> = [
    ['contradictory types', { allOf: [{ type: 'string' }, { type: 'number' }] }],
    [
      'a pattern shorter than its minLength allows',
      { type: 'string', pattern: '^a$', minLength: 3 },
    ],
    ['a lookahead the walker skips', { type: 'string', pattern: '^(?=.*\\d)(?=.*[A-Z])\\w{4}$' }],
    ['an empty range', { type: 'integer', minimum: 3, maximum: 2 }],
    [
      'a required property that is closed out',
      { type: 'object', required: ['a'], additionalProperties: false },
    ],
    [
      'a schema that requires itself',
      {
        $id: 'urn:test:loop',
        type: 'object',
        required: ['next'],
        properties: { next: { $ref: '#' } },
      },
    ],
  ];

  it.each(UNSATISFIABLE)(
    '%s: valid false, a deterministic value that Ajv refuses',
    (_name, schema) => {
      const made = schemaValue(schema);
      expect(made.valid).toBe(false);
      expect(ajvCheck(schema, made.value)).toBeDefined();
      expect(schemaValue(schema).value).toEqual(made.value);
    },
  );
});

describe('readHints: strings from what was read', () => {
  const paper = [
    '---',
    'authors: [Ada Lovelace, Charles Babbage]',
    '---',
    '',
    '# Notes on the Analytical Engine',
    '',
    'Published 1843-10-01. See https://example.org/engine for more; write to ada@example.org.',
  ].join('\n');
  const hints = readHints({
    prompt: 'Extract the fields of papers/engine.md',
    files: [{ path: 'papers/engine.md', text: paper }],
    digest: 'papers/engine.md: 7 lines',
  });

  it('fills the README extractor: title from the heading, authors and date from the text', () => {
    const extractor = {
      type: 'object',
      properties: {
        title: { type: 'string' },
        date: { type: 'string' },
        authors: { type: 'array' },
      },
      required: ['title', 'authors'],
    };
    const made = schemaValue(extractor, { hints });
    expect(made.value).toEqual({
      title: 'Notes on the Analytical Engine',
      date: '1843-10-01',
      authors: ['Ada Lovelace', 'Charles Babbage'],
    });
    expect(ajvCheck(extractor, made.value)).toBeUndefined();
  });

  it('matches names by their words and strings by their format, and keeps within the schema', () => {
    const schema = {
      type: 'object',
      required: [
        'fileName',
        'summary',
        'publishedAt',
        'contact',
        'homepage',
        'shortTitle',
        'level',
      ],
      properties: {
        fileName: { type: 'string' },
        summary: { type: 'string' },
        publishedAt: { type: 'string', format: 'date-time' },
        contact: { type: 'string', format: 'email' },
        homepage: { type: 'string', format: 'uri' },
        shortTitle: { type: 'string', maxLength: 8 },
        level: { enum: ['low', 'high'] },
      },
    };
    const made = schemaValue(schema, { hints });
    expect(made.value).toEqual({
      fileName: 'papers/engine.md',
      summary: 'papers/engine.md: 7 lines',
      publishedAt: '1843-10-01T00:00:00Z',
      contact: 'ada@example.org',
      homepage: 'https://example.org/engine',
      shortTitle: 'Notes on',
      level: 'low',
    });
    expect(ajvCheck(schema, made.value)).toBeUndefined();
  });

  it('reads authors from a byline, but not from a sentence that starts with "By"', () => {
    const schema = {
      type: 'object',
      required: ['authors'],
      properties: { authors: { type: 'array' } },
    };
    const authors = (text: string) =>
      schemaValue(schema, {
        hints: readHints({ prompt: 'p', files: [{ path: 'a.md', text }], digest: 'd' }),
      }).value;
    expect(authors('# On Threads\n\nBy Ada Lovelace and Alan Turing, 1950.\n')).toEqual({
      authors: ['Ada Lovelace', 'Alan Turing'],
    });
    expect(authors('By default, nothing is read.\n')).toEqual({ authors: [] });
    expect(authors('* Written by - Grace Hopper; Jean Sammet\n')).toEqual({
      authors: ['Grace Hopper', 'Jean Sammet'],
    });
  });

  it('takes a title from front matter, and never a front matter fence as the first line', () => {
    const titled = readHints({
      prompt: 'p',
      files: [{ path: 'a.md', text: '---\ntitle: "Front Title"\n---\n# Heading\n' }],
      digest: 'd',
    });
    const untitled = readHints({
      prompt: 'p',
      files: [{ path: 'b.txt', text: '---\nlayout: post\n---\n\nFirst words here.\n' }],
      digest: 'd',
    });
    const schema = {
      type: 'object',
      required: ['title'],
      properties: { title: { type: 'string' } },
    };
    expect(schemaValue(schema, { hints: titled }).value).toEqual({ title: 'Front Title' });
    expect(schemaValue(schema, { hints: untitled }).value).toEqual({ title: 'First words here.' });
  });

  it('leaves out an optional property whose hinted value the rest of the schema refuses', () => {
    const schema = {
      type: 'object',
      required: ['id'],
      properties: { id: { type: 'integer' }, title: { type: 'string', maxLength: 3 } },
      not: { required: ['title'] },
    };
    const made = schemaValue(schema, { hints });
    expect(made.value).toEqual({ id: 0 });
    expect(ajvCheck(schema, made.value)).toBeUndefined();
  });

  it('with nothing read, the title is the prompt and the value itself is the digest', () => {
    const bare = readHints({
      prompt: 'Name three risks.\nThen stop.',
      files: [],
      digest: 'prompt: 5 words',
    });
    expect(
      schemaValue(
        { type: 'object', required: ['title'], properties: { title: { type: 'string' } } },
        { hints: bare },
      ).value,
    ).toEqual({ title: 'Name three risks.' });
    expect(schemaValue({ type: 'string' }, { hints: bare }).value).toBe('prompt: 5 words');
    // A date it did not read is not made up for an optional property.
    expect(
      schemaValue(
        { type: 'object', properties: { date: { type: 'string', format: 'date' } } },
        { hints: bare },
      ).value,
    ).toEqual({});
  });
});

describe('namedPaths: the files and folders a prompt names', () => {
  const paths = (prompt: string) =>
    namedPaths(prompt).map(({ path, kind, quoted }) => `${path} ${kind}${quoted ? ' quoted' : ''}`);

  it('finds plain and backticked paths, folders and globs, in order, once each', () => {
    expect(paths('Review every file of src/main')).toEqual(['src/main folder']);
    expect(paths('Summarise README.md and docs/GOVERNOR.md.')).toEqual([
      'README.md file',
      'docs/GOVERNOR.md file',
    ]);
    expect(paths('Read `README.md`, then (see `docs/`) and ./src/*.ts; README.md again')).toEqual([
      'README.md file quoted',
      'docs folder quoted',
      'src/*.ts glob',
    ]);
    expect(paths('Digest `LICENSE` and "bin/cohort".')).toEqual([
      'LICENSE folder quoted',
      'bin/cohort folder',
    ]);
  });

  it('passes over what a fenced block quotes', () => {
    expect(
      paths('Review docs/a.md:\n```ts\nimport x from "src/x.ts";\n```\nand docs/b.md'),
    ).toEqual(['docs/a.md file', 'docs/b.md file']);
    expect(paths('Check this:\n~~~\nsee README.md\n')).toEqual([]);
  });

  it('passes over words that only look like paths', () => {
    expect(
      paths(
        'e.g. i.e. 1/2 12/05/2024 v2.0 https://example.com/a.md user@example.com /etc/passwd ../up.md -x.md `a b.md` `{"a":1}`',
      ),
    ).toEqual([]);
  });

  it('lists a folder with what is under it, in one pattern', () => {
    expect(listPattern(namedPaths('src/main'))).toBe('{src/main,src/main/**}');
    expect(listPattern(namedPaths('README.md'))).toBe('README.md');
    expect(listPattern(namedPaths('README.md docs/ src/*.ts'))).toBe(
      '{README.md,docs,docs/**,src/*.ts}',
    );
  });
});

describe('default policy over HTTP: named paths and typed replies', () => {
  let model: ScriptedModel;
  let client: Anthropic;

  beforeAll(async () => {
    model = await startScriptedModel();
    client = new Anthropic({ apiKey: 'test-key', baseURL: model.url, maxRetries: 0 });
  });

  afterAll(async () => {
    await model.close();
  });

  const loose = { type: 'object' as const };
  const fileTools = ['read_file', 'list_files'].map((name) => ({ name, input_schema: loose }));
  const untypedReply = { name: 'reply', input_schema: loose };
  const extractor = {
    type: 'object',
    properties: { title: { type: 'string' }, date: { type: 'string' }, authors: { type: 'array' } },
    required: ['title', 'authors'],
  };
  const typedReply = {
    name: 'reply',
    input_schema: typedReplySchema(extractor) as Anthropic.Tool.InputSchema,
  };

  type ToolUse = Anthropic.ToolUseBlock;
  const uses = (message: Anthropic.Message) =>
    message.content.filter((block): block is ToolUse => block.type === 'tool_use');
  const textOf = (message: Anthropic.Message) =>
    message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');

  /** A conversation: each turn sends it, appends the answer, and answers its calls with `answer`. */
  function conversation(prompt: string, tools: Anthropic.Tool[]) {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: prompt }];
    return {
      messages,
      async turn(): Promise<Anthropic.Message> {
        const message = await client.messages.create({
          model: 's',
          max_tokens: 4096,
          tools,
          messages,
        });
        messages.push({ role: 'assistant', content: message.content });
        return message;
      },
      answer(
        message: Anthropic.Message,
        answer: (use: ToolUse) => { content: string; is_error?: boolean },
      ) {
        messages.push({
          role: 'user',
          content: uses(message).map((use) => ({
            type: 'tool_result' as const,
            tool_use_id: use.id,
            ...answer(use),
          })),
        });
      },
    };
  }

  it('a child reads the plain paths its prompt names; one that is not there is passed over', async () => {
    const chat = conversation('Summarise README.md and docs/GONE.md', [untypedReply, ...fileTools]);
    const first = await chat.turn();
    expect(textOf(first)).toBe('Reading `README.md`, `docs/GONE.md`.');
    expect(uses(first).map((use) => [use.name, use.input])).toEqual([
      ['read_file', { path: 'README.md' }],
      ['read_file', { path: 'docs/GONE.md' }],
    ]);
    chat.answer(first, (use) =>
      (use.input as { path: string }).path === 'README.md'
        ? { content: '# cohort\n\nAgents.\n' }
        : {
            content: 'Expected `path` to name an existing file, got `docs/GONE.md`',
            is_error: true,
          },
    );
    const reply = uses(await chat.turn())[0]!;
    expect(reply.name).toBe('reply');
    expect((reply.input as { result: string }).result).toMatch(
      /^README\.md: 3 lines, 18 chars; first line: "# cohort";/,
    );
    expect((reply.input as { result: string }).result).not.toContain('GONE');
  });

  it('a child reads no path that only its preamble (a shared document before the prompt) mentions', async () => {
    const message = await client.messages.create({
      model: 's',
      max_tokens: 500,
      tools: [untypedReply, ...fileTools],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Shared notes: see docs/GOVERNOR.md and `README.md`.' },
            { type: 'text', text: 'Say what the notes are about.' },
          ],
        },
      ],
    });
    expect(uses(message).map((use) => use.name)).toEqual(['reply']);
  });

  it('a child lists a folder its prompt names, reads at most 20 of its files and says so', async () => {
    const chat = conversation('Review every file of src/main', [untypedReply, ...fileTools]);
    const first = await chat.turn();
    expect(uses(first).map((use) => [use.name, use.input])).toEqual([
      ['list_files', { pattern: '{src/main,src/main/**}' }],
    ]);
    const listed = Array.from(
      { length: 25 },
      (_, index) => `src/main/f${String(index).padStart(2, '0')}.ts`,
    );
    chat.answer(first, () => ({ content: listed.join('\n') }));
    const second = await chat.turn();
    expect(textOf(second)).toBe('Reading 20 of the 25 files listed (at most 20 are read).');
    expect(uses(second).map((use) => (use.input as { path: string }).path)).toEqual(
      listed.slice(0, 20),
    );
    chat.answer(second, (use) => ({
      content: `export const x = 1; // ${(use.input as { path: string }).path}\n`,
    }));
    const result = (uses(await chat.turn())[0]!.input as { result: string }).result;
    const lines = result.split('\n');
    expect(lines).toHaveLength(21);
    expect(lines[0]).toMatch(
      /^src\/main\/f00\.ts: 1 lines, \d+ chars; first line: .*; exports: x; fnv1a/,
    );
    expect(lines[20]).toBe('(20 of the 25 files listed were read: at most 20 are.)');
  });

  it('a typed reply gets a value made from the schema and the file read, valid against the tool', async () => {
    const chat = conversation('Extract the fields of `papers/engine.md`.', [
      typedReply,
      ...fileTools,
    ]);
    const first = await chat.turn();
    expect(uses(first).map((use) => use.input)).toEqual([{ path: 'papers/engine.md' }]);
    chat.answer(first, () => ({
      content: '# Notes on the Analytical Engine\n\nAuthors: Ada Lovelace and Charles Babbage\n',
    }));
    const reply = uses(await chat.turn())[0]!;
    expect(reply.input).toEqual({
      result: {
        title: 'Notes on the Analytical Engine',
        authors: ['Ada Lovelace', 'Charles Babbage'],
      },
    });
    expect(ajvCheck(typedReply.input_schema, reply.input)).toBeUndefined();
  });

  it('a typed reply the worker refused is sent again unchanged (so an unsatisfiable schema ends bad_reply)', async () => {
    const chat = conversation('Give the title.', [typedReply]);
    const first = await chat.turn();
    expect(uses(first)[0]!.input).toEqual({ result: { title: 'Give the title.', authors: [] } });
    chat.answer(first, () => ({
      content: 'Reply refused: `result` does not match the output schema',
      is_error: true,
    }));
    expect(uses(await chat.turn())[0]!.input).toEqual(uses(first)[0]!.input);
  });

  it('a root lists what its prompt names and fans out the named agent over it', async () => {
    const agentTool = {
      name: 'agent',
      input_schema: {
        type: 'object' as const,
        properties: {
          title: { type: 'string' },
          prompt: { type: 'string' },
          agent: { enum: ['digester', 'extractor'] },
        },
      },
    };
    const tools = [agentTool, ...fileTools];
    const chat = conversation('Run the extractor on every file of papers/.', tools);
    const first = await chat.turn();
    expect(textOf(first)).toBe('Listing what the prompt names: `papers`.');
    expect(uses(first)[0]!.input).toEqual({ pattern: '{papers,papers/**}' });
    chat.answer(first, () => ({ content: 'papers/a.md\npapers/b.md' }));
    const fan = await chat.turn();
    expect(uses(fan).map((use) => use.input)).toEqual(
      ['papers/a.md', 'papers/b.md'].map((path) => ({
        title: path,
        prompt: `Read the file \`${path}\` with read_file and reply with a short digest of it.`,
        mode: 'async',
        agent: 'extractor',
      })),
    );
  });

  it('a root whose named paths are not there surveys the whole workspace instead', async () => {
    const agentTool = { name: 'agent', input_schema: loose };
    const chat = conversation('Weigh the and/or question.', [agentTool, ...fileTools]);
    const first = await chat.turn();
    expect(uses(first)[0]!.input).toEqual({ pattern: '{and/or,and/or/**}' });
    chat.answer(first, () => ({ content: '' }));
    const second = await chat.turn();
    expect(textOf(second)).toBe(
      'Nothing the prompt names is in the workspace; surveying all of it.',
    );
    expect(uses(second)[0]!.input).toEqual({ pattern: '**/*' });
  });
});

describe('schemaValue on generated schemas (fast-check)', () => {
  const PATTERNS = ['^[a-z]+$', '^\\d{2,4}$', '^(ab|cd)-\\w+$', '^[A-F0-9]{6}$', 'x'];
  const FORMATS = ['date', 'date-time', 'email', 'uri', 'uuid', 'ipv4'];
  const NAMES = ['title', 'date', 'authors', 'summary', 'count', 'tags', 'id', 'url'];

  /** Schemas built only from constraints that can always be met together. */
  const { schema: satisfiable } = fc.letrec<{ schema: Record<string, unknown> }>((tie) => ({
    schema: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.record(
        {
          type: fc.constant('string'),
          minLength: fc.integer({ min: 0, max: 12 }),
          format: fc.constantFrom(...FORMATS),
        },
        { requiredKeys: ['type'] },
      ),
      fc.record({ type: fc.constant('string'), pattern: fc.constantFrom(...PATTERNS) }),
      fc
        .record({
          type: fc.constantFrom('number', 'integer'),
          low: fc.integer({ min: -50, max: 50 }),
          span: fc.integer({ min: 1, max: 100 }),
          multipleOf: fc.option(fc.constantFrom(1, 2, 5, 0.5), { nil: undefined }),
        })
        .map(({ type, low, span, multipleOf }) => ({
          type,
          minimum: low,
          maximum: low + span * 10,
          ...(multipleOf === undefined ? {} : { multipleOf }),
        })),
      fc.constant({ type: 'boolean' }),
      fc.constant({ type: ['null', 'string'] }),
      fc.constant({ enum: ['a', 1, null] }),
      fc
        .record({
          items: tie('schema'),
          minItems: fc.integer({ min: 0, max: 3 }),
          extra: fc.integer({ min: 0, max: 2 }),
        })
        .map(({ items, minItems, extra }) => ({
          type: 'array',
          items,
          minItems,
          maxItems: minItems + extra,
        })),
      fc
        .record({
          properties: fc.dictionary(fc.constantFrom(...NAMES), tie('schema'), { maxKeys: 4 }),
          closed: fc.boolean(),
          requireAll: fc.boolean(),
        })
        .map(({ properties, closed, requireAll }) => ({
          type: 'object',
          properties,
          required: requireAll ? Object.keys(properties) : Object.keys(properties).slice(0, 1),
          additionalProperties: !closed,
        })),
      fc
        .array(tie('schema'), { minLength: 1, maxLength: 3 })
        .map((options) => ({ anyOf: options })),
    ),
  }));

  const hints = readHints({
    prompt: 'Extract the fields.',
    files: [{ path: 'a.md', text: '# A Title\n\nAuthors: A. One and B. Two\n2024-02-29\n' }],
    digest: 'a.md: 4 lines',
  });

  it('makes a value Ajv accepts for every schema built from constraints that can be met together', () => {
    fc.assert(
      fc.property(satisfiable, (schema) => {
        const made = schemaValue(schema, { hints });
        expect(ajvCheck(schema, made.value)).toBeUndefined();
        expect(made.valid).toBe(true);
      }),
      { seed: 20261202, numRuns: 300 },
    );
  });

  it('never claims valid what Ajv refuses, for any mix of constraints', () => {
    const anything = fc
      .tuple(satisfiable, satisfiable, fc.constantFrom('allOf', 'oneOf', 'not'))
      .map(([a, b, how]) => (how === 'not' ? { ...a, not: b } : { [how]: [a, b] }));
    let valid = 0;
    fc.assert(
      fc.property(anything, (schema) => {
        const made = schemaValue(schema, { hints });
        if (made.valid) {
          valid++;
          expect(ajvCheck(schema, made.value)).toBeUndefined();
        }
      }),
      { seed: 20261202, numRuns: 300 },
    );
    // Most such pairs can be met; a generator that gave up on them would show here.
    expect(valid).toBeGreaterThan(150);
  });
});
