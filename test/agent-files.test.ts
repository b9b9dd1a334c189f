import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AgentDefinition } from '../src/main/agents/definition.js';
import { budgetFromData, loadAgentDefinitions } from '../src/main/agents/load.js';
import { tempDir, usageError } from './helpers.js';

const GOOD = [
  '---',
  'name: reviewer',
  'description: Reviews a diff and lists the risks.',
  'model: claude-sonnet-4-5',
  'tools: [read_file, list_files]',
  'maxSteps: 12',
  'budget:',
  '  inputTokens: 200000',
  '  outputTokens: 8000',
  '  steps: 20',
  '  usd: 0.5',
  '  time: 10m',
  '  tree: true',
  'outputSchema:',
  '  type: object',
  '  properties:',
  '    risks: { type: array, items: { type: string } }',
  '  required: [risks]',
  '---',
  '',
  'You review diffs.',
  '',
  'List every risk you find.',
  '',
].join('\n');

/** Writes `files` into a fresh folder; returns the folder. */
function folderWith(files: Record<string, string>): string {
  const dir = tempDir('cohort-agents-');
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

/** Loads a folder holding just `NAME.md`, which must be refused; returns the file and message. */
function refusal(name: string, text: string): { file: string; message: string } {
  const dir = folderWith({ [`${name}.md`]: text });
  return {
    file: path.join(dir, `${name}.md`),
    message: usageError(() => loadAgentDefinitions(dir, { required: true })).message,
  };
}

/** A file with the required fields, then `extra` frontmatter lines (from line 4 on). */
function withFields(extra: string[], body = 'Do the work.'): string {
  return ['---', 'name: helper', 'description: Helps.', ...extra, '---', body, ''].join('\n');
}

describe('a good agent file', () => {
  const expectedReviewer = (file: string): AgentDefinition => ({
    name: 'reviewer',
    description: 'Reviews a diff and lists the risks.',
    system: 'You review diffs.\n\nList every risk you find.',
    model: 'claude-sonnet-4-5',
    tools: ['read_file', 'list_files'],
    maxSteps: 12,
    budget: {
      inputTokens: 200000,
      outputTokens: 8000,
      steps: 20,
      usd: 0.5,
      timeMs: 600_000,
      tree: true,
    },
    outputSchema: {
      type: 'object',
      properties: { risks: { type: 'array', items: { type: 'string' } } },
      required: ['risks'],
    },
    file,
    lines: {
      name: 2,
      description: 3,
      model: 4,
      tools: 5,
      maxSteps: 6,
      budget: 7,
      outputSchema: 14,
    },
  });

  it('loads every field, the body as the system prompt, and the line of each field', () => {
    const dir = folderWith({ 'reviewer.md': GOOD });
    expect(loadAgentDefinitions(dir, { required: true })).toEqual([
      expectedReviewer(path.join(dir, 'reviewer.md')),
    ]);
  });

  it('reads the same definition with CRLF line endings and a UTF-8 BOM', () => {
    const dir = folderWith({ 'reviewer.md': `\uFEFF${GOOD.replaceAll('\n', '\r\n')}` });
    expect(loadAgentDefinitions(dir, { required: true })).toEqual([
      expectedReviewer(path.join(dir, 'reviewer.md')),
    ]);
  });

  it('takes tools as a comma-separated string, and time as whole milliseconds', () => {
    const dir = folderWith({
      'helper.md': withFields([
        'tools: read_file, list_files ,word_count',
        'budget: { time: 1500 }',
      ]),
    });
    const [definition] = loadAgentDefinitions(dir, { required: true });
    expect(definition?.tools).toEqual(['read_file', 'list_files', 'word_count']);
    expect(definition?.budget).toEqual({ timeMs: 1500 });
    expect(definition?.model).toBeUndefined();
    expect(definition?.lines).toEqual({ name: 2, description: 3, tools: 4, budget: 5 });
  });

  it('takes an empty tools list (the agent gets no tools but reply)', () => {
    const dir = folderWith({ 'helper.md': withFields(['tools: []']) });
    expect(loadAgentDefinitions(dir, { required: true })[0]?.tools).toEqual([]);
  });
});

describe('a malformed agent file is refused with file:line and what was expected', () => {
  const cases: { title: string; text: string; line: number; says: string[]; name?: string }[] = [
    {
      title: 'no frontmatter',
      text: 'Just a prompt.\n',
      line: 1,
      says: ['start with a `---` line', '`"Just a prompt."` (string)'],
    },
    { title: 'an empty file', text: '', line: 1, says: ['`---`', 'got an empty file'] },
    {
      title: 'unclosed frontmatter',
      text: '---\nname: helper\ndescription: Helps.\nDo the work.\n',
      line: 1,
      says: ['closing the frontmatter', 'got the end of the file'],
    },
    {
      title: 'a YAML syntax error',
      text: withFields(['model: a: b']),
      line: 4,
      says: ['Expected valid YAML', 'Nested mappings are not allowed'],
    },
    {
      title: 'an unclosed YAML bracket, shown on the last YAML line',
      text: withFields(['maxSteps: 3', 'tools: [read_file']),
      line: 5,
      says: ['Expected valid YAML', 'end with a ]'],
    },
    {
      title: 'a duplicate key',
      text: withFields(['model: one', 'model: two']),
      line: 5,
      says: ['Expected each field once', '`"model"` (string) again (first on line 4)'],
    },
    {
      title: 'frontmatter that is not a mapping',
      text: '---\n- name\n- description\n---\nDo the work.\n',
      line: 2,
      says: [
        'a YAML mapping of fields (name, description, model',
        '`["name","description"]` (array)',
      ],
    },
    {
      title: 'empty frontmatter',
      text: '---\n---\nDo the work.\n',
      line: 1,
      says: ['a YAML mapping of fields', 'got nothing'],
    },
    {
      title: 'an unknown field',
      text: withFields(['maxSteps: 3', 'colour: blue']),
      line: 5,
      says: [
        'Expected a known field (name, description, model, tools, maxSteps, budget, outputSchema, patienceMs, timeout, cache, cacheTtl)',
        '`"colour"` (string)',
      ],
    },
    {
      title: 'a missing name',
      text: '---\ndescription: Helps.\n---\nDo the work.\n',
      line: 1,
      says: ['set `name` to `helper` (the file name without .md)', 'got nothing'],
    },
    {
      title: 'a name that is not the file name',
      text: '---\ndescription: Helps.\nname: assistant\n---\nDo the work.\n',
      line: 3,
      says: ['Expected `name` to be `helper`, the file name without .md', '`"assistant"` (string)'],
    },
    {
      title: 'a name with characters outside the shape',
      name: 'help.me',
      text: '---\nname: help.me\ndescription: Helps.\n---\nDo the work.\n',
      line: 2,
      says: ['Expected `name` to be 1 to 64 of a-z, A-Z, 0-9, _ and -', '`"help.me"` (string)'],
    },
    {
      title: 'a missing description',
      text: '---\nname: helper\n---\nDo the work.\n',
      line: 1,
      says: ['set `description` to a non-empty string', 'got nothing'],
    },
    {
      title: 'an empty description',
      text: '---\nname: helper\ndescription: "  "\n---\nDo the work.\n',
      line: 3,
      says: ['Expected `description` to be a non-empty string', '`"  "` (string)'],
    },
    {
      title: 'a model that is not a string',
      text: withFields(['model: 42']),
      line: 4,
      says: ['Expected `model` to be a non-empty string', '`42` (number)'],
    },
    {
      title: 'a model with no value',
      text: withFields(['model:']),
      line: 4,
      says: ['Expected `model` to be a non-empty string', '`null` (null)'],
    },
    {
      title: 'tools that are neither a list nor a string',
      text: withFields(['tools: { read_file: true }']),
      line: 4,
      says: ['Expected `tools` to be an array of tool names', '`{"read_file":true}` (object)'],
    },
    {
      title: 'a tools list with a number in it',
      text: withFields(['tools: [read_file, 7]']),
      line: 4,
      says: ['Expected `tools` to be an array of tool names', '`7` (number) at position 2'],
    },
    {
      title: 'a comma-separated tools string with an empty entry',
      text: withFields(['tools: read_file,,list_files']),
      line: 4,
      says: ['comma-separated string', 'got an empty entry at position 2'],
    },
    {
      title: 'a tool named twice',
      text: withFields(['tools: read_file, read_file']),
      line: 4,
      says: ['name each tool once', '`read_file` twice'],
    },
    {
      title: 'maxSteps given as a string',
      text: withFields(['maxSteps: "10"']),
      line: 4,
      says: ['Expected `maxSteps` to be a whole number from 1 to 10000', '`"10"` (string)'],
    },
    {
      title: 'maxSteps of 0',
      text: withFields(['maxSteps: 0']),
      line: 4,
      says: ['Expected `maxSteps` to be a whole number from 1 to 10000', '`0` (number)'],
    },
    {
      title: 'maxSteps above the limit',
      text: withFields(['maxSteps: 10001']),
      line: 4,
      says: ['from 1 to 10000', '`10001` (number)'],
    },
    {
      title: 'a budget that is not a mapping',
      text: withFields(['budget: 5']),
      line: 4,
      says: ['Expected `budget` to be a mapping of limits (inputTokens,', '`5` (number)'],
    },
    {
      title: 'a budget with an unknown key (on its own line)',
      text: withFields(['budget:', '  steps: 4', '  dollars: 2']),
      line: 6,
      says: [
        'Expected `budget` to have only inputTokens, outputTokens, steps, usd, time, tree',
        'got `dollars`',
      ],
    },
    {
      title: 'a negative budget',
      text: withFields(['budget:', '  usd: -1']),
      line: 5,
      says: ['Expected `budget.usd` to be a number of dollars above 0', '`-1` (number)'],
    },
    {
      title: 'a fractional token budget',
      text: withFields(['budget: { inputTokens: 1.5 }']),
      line: 4,
      says: ['Expected `budget.inputTokens` to be a whole number from 1 and up', '`1.5` (number)'],
    },
    {
      title: 'a bad budget duration',
      text: withFields(['budget:', '  tree: false', '  time: soon']),
      line: 6,
      says: ['Expected `budget.time` to be a duration like 30s, 10m or 1h', '`"soon"` (string)'],
    },
    {
      title: 'a budget time of zero',
      text: withFields(['budget:', '  time: 0s']),
      line: 5,
      says: ['from 1 ms', '`"0s"` (string)'],
    },
    {
      title: 'a budget tree that is not a boolean',
      text: withFields(['budget:', '  tree: "yes"']),
      line: 5,
      says: ['Expected `budget.tree` to be true or false', '`"yes"` (string)'],
    },
    {
      title: 'an outputSchema that is not a mapping',
      text: withFields(['outputSchema: [string]']),
      line: 4,
      says: ['Expected `outputSchema` to be a mapping (a JSON Schema)', '`["string"]` (array)'],
    },
    {
      title: 'an outputSchema Ajv refuses',
      text: withFields(['maxSteps: 2', 'outputSchema:', '  type: nope']),
      line: 5,
      says: [
        'Expected `outputSchema` to be a JSON Schema that Ajv compiles',
        'data/type must be equal to one of the allowed values',
      ],
    },
    {
      title: 'an empty body',
      text: withFields([], '  \n\n'),
      line: 4,
      says: ['Expected a system prompt after the frontmatter', 'got an empty body'],
    },
  ];

  it.each(cases)('$title', ({ text, line, says, name = 'helper' }) => {
    const { file, message } = refusal(name, text);
    expect(message.startsWith(`${file}:${line}: `), message).toBe(true);
    for (const part of says) expect(message).toContain(part);
  });

  it('reports the line of a problem the same way with CRLF line endings and a BOM', () => {
    const text = `\uFEFF${withFields(['maxSteps: 3', 'budget:', '  usd: 0']).replaceAll('\n', '\r\n')}`;
    const { file, message } = refusal('helper', text);
    expect(message).toBe(
      `${file}:6: Expected \`budget.usd\` to be a number of dollars above 0, got \`0\` (number)`,
    );
  });
});

describe('the agents folder', () => {
  it('refuses a missing folder when required, naming its path', () => {
    const missing = path.join(tempDir(), 'agents');
    const error = usageError(() => loadAgentDefinitions(missing, { required: true }));
    expect(error.message).toBe(
      `Expected \`agentsDir\` to be a folder of agent files (NAME.md), got \`${missing}\`, which does not exist`,
    );
  });

  it('gives no definitions for a missing folder that was not required', () => {
    expect(loadAgentDefinitions(path.join(tempDir(), 'agents'), { required: false })).toEqual([]);
  });

  it('refuses a path that is a file, required or not', () => {
    const dir = folderWith({ 'agents.md': GOOD });
    const file = path.join(dir, 'agents.md');
    for (const required of [true, false]) {
      const error = usageError(() => loadAgentDefinitions(file, { required }));
      expect(error.message).toContain(`got \`${file}\`, which is not a folder`);
    }
  });

  it('loads only .md files, skips dot-files and folders, and sorts by name', () => {
    const dir = folderWith({
      'zeta.md': GOOD.replace('name: reviewer', 'name: zeta'),
      'alpha.md': GOOD.replace('name: reviewer', 'name: alpha'),
      'notes.txt': 'not an agent',
      'beta.md.bak': 'not an agent',
      README: 'not an agent',
      '.draft.md': 'not an agent either',
    });
    mkdirSync(path.join(dir, 'nested.md'));
    writeFileSync(path.join(dir, 'nested.md', 'inner.md'), 'not loaded: not recursive');
    const names = loadAgentDefinitions(dir, { required: true }).map((agent) => agent.name);
    expect(names).toEqual(['alpha', 'zeta']);
  });

  it('throws on a bad file beside a good one, returning nothing partial', () => {
    const dir = folderWith({
      'alpha.md': GOOD.replace('name: reviewer', 'name: alpha'),
      'beta.md': withFields(['maxSteps: 0']).replace('name: helper', 'name: beta'),
      'gamma.md': GOOD.replace('name: reviewer', 'name: gamma'),
    });
    let loaded: AgentDefinition[] | undefined;
    const error = usageError(() => {
      loaded = loadAgentDefinitions(dir, { required: true });
    });
    expect(loaded).toBeUndefined();
    expect(error.message.startsWith(`${path.join(dir, 'beta.md')}:4: `)).toBe(true);
  });

  it('reports the first bad file in name order', () => {
    const dir = folderWith({
      'b.md': 'no frontmatter',
      'a.md': 'no frontmatter either',
    });
    const error = usageError(() => loadAgentDefinitions(dir, { required: true }));
    expect(error.message.startsWith(`${path.join(dir, 'a.md')}:1: `)).toBe(true);
  });
});

describe('budgetFromData', () => {
  it('checks a budget from JSON, turning time into timeMs', () => {
    expect(budgetFromData({ usd: 2, time: '90s', steps: 5, tree: false }, '`budget`')).toEqual({
      usd: 2,
      timeMs: 90_000,
      steps: 5,
      tree: false,
    });
    expect(budgetFromData({}, '`budget`')).toEqual({});
  });

  it('names a nested field after a backticked `where`, and after any other', () => {
    expect(usageError(() => budgetFromData({ steps: 0 }, '`budget`')).message).toBe(
      'Expected `budget.steps` to be a whole number from 1 and up, got `0` (number)',
    );
    expect(usageError(() => budgetFromData({ steps: 0 }, 'the budget of task `t1`')).message).toBe(
      'Expected `steps` in the budget of task `t1` to be a whole number from 1 and up, got `0` (number)',
    );
  });

  it('refuses a value that is not a mapping, and a time that is not whole milliseconds', () => {
    expect(usageError(() => budgetFromData(null, '`budget`')).message).toContain(
      'Expected `budget` to be a mapping of limits',
    );
    expect(usageError(() => budgetFromData({ time: 2.5 }, '`budget`')).message).toContain(
      'got `2.5` (number)',
    );
  });
});
