import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { MessageParam } from '@anthropic-ai/sdk/resources/messages';
import { describe, expect, it } from 'vitest';
import { readRun } from '../src/shared/journal/reader.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { tempDir } from './helpers.js';

// The README's agent-file example, run as a newcomer runs it: the built CLI, no API key, so the
// built-in scripted model with no script, and prompts that name files and folders in plain words.
// What each child read is taken from the run's journal.

/** The agent file exactly as the README shows it (section "Agent files, typed replies, …"). */
function readmeExtractor(): string {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const block = /```text\n(---\nname: extractor\n[\s\S]*?)```/.exec(readme)?.[1];
  if (block === undefined) throw new Error('README.md no longer shows the extractor agent file');
  return block;
}

const ENGINE = [
  '# Notes on the Analytical Engine',
  '',
  'Authors: Ada Lovelace, Charles Babbage',
  'Date: 1843-10-01',
  '',
  'The engine weaves algebraic patterns.',
].join('\n');
const TURING = [
  '# On Computable Numbers',
  '',
  'By: Alan Turing',
  '',
  'A machine reads a tape.',
].join('\n');

/** A workspace with the extractor, two papers, and a file outside `papers/` nobody should read. */
function workspace(): string {
  const root = tempDir('cohort-scripted-defaults-');
  mkdirSync(path.join(root, '.cohort', 'agents'), { recursive: true });
  mkdirSync(path.join(root, 'papers'));
  writeFileSync(path.join(root, '.cohort', 'agents', 'extractor.md'), readmeExtractor());
  writeFileSync(path.join(root, 'papers', 'engine.md'), ENGINE);
  writeFileSync(path.join(root, 'papers', 'turing.md'), TURING);
  writeFileSync(path.join(root, 'notes.txt'), 'Not a paper.\n');
  return root;
}

/** Each tool call in a transcript, as `name input-json`, in order. */
function toolCalls(messages: MessageParam[]): string[] {
  const calls: string[] = [];
  for (const message of messages) {
    if (message.role !== 'assistant' || typeof message.content === 'string') continue;
    for (const block of message.content) {
      if (block.type === 'tool_use') calls.push(`${block.name} ${JSON.stringify(block.input)}`);
    }
  }
  return calls;
}

const ENGINE_VALUE = {
  title: 'Notes on the Analytical Engine',
  authors: ['Ada Lovelace', 'Charles Babbage'],
  date: '1843-10-01',
};
const TURING_VALUE = { title: 'On Computable Numbers', authors: ['Alan Turing'] };

describe('the scripted model with no script, through the CLI', () => {
  it('cohort run: a folder named in the prompt is all it reviews, by the agent the prompt names, typed', async () => {
    const root = workspace();
    const logs = tempDir();
    const run = runCli([
      'run',
      // The README's own command (section "Agent files, typed replies, …").
      'Run the extractor on every file of papers/',
      '--workspace',
      root,
      '--log-dir',
      logs,
      '--json',
    ]);
    const { code } = await run.exit;
    expect(code, run.stderr()).toBe(0);
    const events = run
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const rootCalls = events
      .filter((event) => event.type === 'tool-call' && event.agentId === 'root')
      .map((event) => [event.name, event.input.pattern ?? event.input.title, event.input.agent]);
    expect(rootCalls).toEqual([
      ['list_files', '{papers,papers/**}', undefined],
      ['agent', 'papers/engine.md', 'extractor'],
      ['agent', 'papers/turing.md', 'extractor'],
    ]);
    const settled = events.filter((event) => event.type === 'agent-settle');
    expect(
      Object.fromEntries(settled.map((event) => [event.result.title, event.result.value])),
    ).toEqual({ 'papers/engine.md': ENGINE_VALUE, 'papers/turing.md': TURING_VALUE });
    expect(settled.every((event) => event.result.outcome === 'complete')).toBe(true);

    // Each child read its own file, once, and nothing else.
    const history = await readRun(settled[0].result.logDir);
    const children = [...history.values()].filter((agent) => agent.id !== 'root');
    const reads = Object.fromEntries(
      children.map((agent) => [
        agent.result?.title,
        toolCalls(agent.messages).filter((call) => !call.startsWith('reply ')),
      ]),
    );
    expect(reads).toEqual({
      'papers/engine.md': ['read_file {"path":"papers/engine.md"}'],
      'papers/turing.md': ['read_file {"path":"papers/turing.md"}'],
    });
  });

  it('cohort batch: the agent file reads a plainly named file; an inline schema lists a folder and reads it', async () => {
    const root = workspace();
    const dir = tempDir();
    const tasks = path.join(dir, 'tasks.jsonl');
    const out = path.join(dir, 'results.jsonl');
    const schema = {
      type: 'object',
      properties: {
        title: { type: 'string' },
        files: { type: 'array', items: { type: 'string' }, minItems: 1 },
        authors: { type: 'array', items: { type: 'string' } },
      },
      required: ['title', 'files', 'authors'],
      additionalProperties: false,
    };
    writeFileSync(
      tasks,
      [
        { id: 'one', prompt: 'Extract the fields of papers/turing.md', agent: 'extractor' },
        { id: 'folder', prompt: 'Index every file of papers/', outputSchema: schema },
      ]
        .map((task) => JSON.stringify(task))
        .join('\n'),
    );
    const batch = runCli(['batch', tasks, '--out', out, '--workspace', root, '--quiet']);
    const { code } = await batch.exit;
    expect(code, batch.stderr()).toBe(0);
    const lines = readResultLines(out) as Array<{
      taskId: string;
      outcome: string;
      value: unknown;
      logDir: string;
      id: string;
    }>;
    const byTask = Object.fromEntries(lines.map((line) => [line.taskId, line]));
    expect(byTask.one).toMatchObject({ outcome: 'complete', value: TURING_VALUE });
    expect(byTask.folder).toMatchObject({
      outcome: 'complete',
      value: {
        title: 'Notes on the Analytical Engine',
        files: ['papers/engine.md', 'papers/turing.md'],
        authors: ['Ada Lovelace', 'Charles Babbage'],
      },
    });

    const history = await readRun(byTask.one!.logDir);
    expect(toolCalls(history.get(byTask.one!.id)!.messages)).toEqual([
      'read_file {"path":"papers/turing.md"}',
      `reply ${JSON.stringify({ result: TURING_VALUE })}`,
    ]);
    expect(toolCalls(history.get(byTask.folder!.id)!.messages).slice(0, 3)).toEqual([
      'list_files {"pattern":"{papers,papers/**}"}',
      'read_file {"path":"papers/engine.md"}',
      'read_file {"path":"papers/turing.md"}',
    ]);
  });
});
