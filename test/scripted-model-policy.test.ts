import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';

let model: ScriptedModel;
let client: Anthropic;

beforeAll(async () => {
  model = await startScriptedModel();
  client = new Anthropic({ apiKey: 'test-key', baseURL: model.url, maxRetries: 0 });
});

afterAll(async () => {
  await model.close();
});

const schema = { type: 'object' as const };
const rootTools = ['agent', 'agents', 'agent_cancel', 'list_files', 'read_file'].map((name) => ({
  name,
  input_schema: schema,
}));
const childTools = ['reply', 'read_file'].map((name) => ({ name, input_schema: schema }));

type ToolUse = Anthropic.ToolUseBlock;

function toolUses(message: Anthropic.Message): ToolUse[] {
  return message.content.filter((block): block is ToolUse => block.type === 'tool_use');
}

/** The result of the reply call a message makes; fails the test when there is none. */
function replyResult(message: Anthropic.Message): unknown {
  const reply = toolUses(message).find((use) => use.name === 'reply');
  if (reply === undefined)
    throw new Error(`expected a reply call, got ${JSON.stringify(message.content)}`);
  return (reply.input as { result: unknown }).result;
}

function textOf(message: Anthropic.Message): string {
  return message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

function inboxBlock(
  result: { id: string; title: string; outcome: string; reason?: string },
  text: string,
) {
  return {
    type: 'text' as const,
    text: `${JSON.stringify({ kind: 'agent_result', ...result })}\n\n${text}`,
  };
}

describe('default policy: root', () => {
  it('lists files, fans out async agents, waits for every result, then reports', async () => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Review the workspace.' }];
    const turn = async () => {
      const message = await client.messages
        .stream({ model: 's', max_tokens: 1000, tools: rootTools, messages })
        .finalMessage();
      messages.push({ role: 'assistant', content: message.content });
      return message;
    };

    const survey = await turn();
    expect(textOf(survey)).toBe('Surveying the workspace.');
    const [list] = toolUses(survey);
    expect(list).toMatchObject({ name: 'list_files', input: { pattern: '**/*' } });
    messages.push({
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: list!.id,
          // A listing cut at its limit ends with a line that is not a path.
          content: 'src/a.ts\nREADME.md\n\ndocs/b.md\n[… 2 more not listed]\n',
        },
      ],
    });

    const fan = await turn();
    expect(fan.stop_reason).toBe('tool_use');
    const agents = toolUses(fan);
    expect(agents.map((use) => use.input)).toEqual(
      ['src/a.ts', 'README.md', 'docs/b.md'].map((path) => ({
        title: path,
        prompt: `Read the file \`${path}\` with read_file and reply with a short digest of it.`,
        mode: 'async',
      })),
    );
    const ids = ['ag_a', 'ag_b', 'ag_c'];
    messages.push({
      role: 'user',
      content: agents.map((use, index) => ({
        type: 'tool_result' as const,
        tool_use_id: use.id,
        content: JSON.stringify({
          id: ids[index],
          title: (use.input as { title: string }).title,
          status: 'started',
          logDir: '/tmp/x',
        }),
      })),
    });

    const started = await turn();
    expect(textOf(started)).toBe(
      'Started 3 agents; I will compose the report when their results arrive.',
    );
    expect(started.stop_reason).toBe('end_turn');

    messages.push({
      role: 'user',
      content: [
        inboxBlock({ id: 'ag_b', title: 'README.md', outcome: 'complete' }, 'README digest'),
      ],
    });
    const waiting = await turn();
    expect(textOf(waiting)).toBe('Received 1 of 3 results; waiting for the rest.');

    messages.push({
      role: 'user',
      content: [
        inboxBlock({ id: 'ag_c', title: 'docs/b.md', outcome: 'failed', reason: 'provider' }, ''),
        inboxBlock(
          { id: 'ag_a', title: 'src/a.ts', outcome: 'complete' },
          'a.ts digest\nsecond line',
        ),
      ],
    });
    const report = await turn();
    expect(report.stop_reason).toBe('end_turn');
    expect(textOf(report)).toBe(
      [
        '# Report',
        '3 results: 2 complete, 1 failed.',
        '## src/a.ts\n\na.ts digest\nsecond line',
        '## README.md\n\nREADME digest',
        '## docs/b.md\n\n_[failed: provider]_',
      ].join('\n\n'),
    );
  });

  it('caps the fan-out at 64 files and says so', async () => {
    const paths = Array.from({ length: 70 }, (_, index) => `file-${index}.txt`);
    const message = await client.messages.create({
      model: 's',
      // 64 agent calls take ~8,000 characters: max_tokens must leave room for them.
      max_tokens: 4096,
      tools: rootTools,
      messages: [
        { role: 'user', content: 'Go.' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'toolu_l', name: 'list_files', input: {} }],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_l', content: paths.join('\n') }],
        },
      ],
    });
    expect(toolUses(message)).toHaveLength(64);
    expect(textOf(message)).toContain('first 64 (the cap)');
  });
});

describe('default policy: child', () => {
  it('reads the file named in its prompt, then replies with a deterministic digest', async () => {
    const prompt = 'Read the file `src/lib.ts` with read_file and reply with a short digest of it.';
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: prompt }];
    const read = await client.messages.create({
      model: 's',
      max_tokens: 500,
      tools: childTools,
      messages,
    });
    const [call] = toolUses(read);
    expect(call).toMatchObject({ name: 'read_file', input: { path: 'src/lib.ts' } });
    const source = [
      '',
      '// A library.',
      'export function alpha() {}',
      'export async function beta() {}',
      'export class Gamma {}',
      'export const delta = 1;',
      'const hidden = 2;',
      '',
    ].join('\n');
    messages.push({ role: 'assistant', content: read.content });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: call!.id, content: source }],
    });
    const replied = await client.messages
      .stream({ model: 's', max_tokens: 500, tools: childTools, messages })
      .finalMessage();
    const digest = replyResult(replied);
    expect(digest).toMatch(
      /^src\/lib\.ts: 7 lines, \d+ chars; first line: "\/\/ A library\."; exports: alpha, beta, Gamma, delta; fnv1a [0-9a-f]{8}$/,
    );
    const again = await client.messages.create({
      model: 's',
      max_tokens: 500,
      tools: childTools,
      messages,
    });
    expect(replyResult(again)).toBe(digest);
  });

  it('says so when the read failed, and digests the prompt when there is no file', async () => {
    const failed = await client.messages.create({
      model: 's',
      max_tokens: 500,
      tools: childTools,
      messages: [
        { role: 'user', content: 'Digest `gone.txt`.' },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_r', name: 'read_file', input: { path: 'gone.txt' } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_r',
              content: 'ENOENT: no such file',
              is_error: true,
            },
          ],
        },
      ],
    });
    expect(replyResult(failed)).toBe('gone.txt: could not be read: ENOENT: no such file');
    const noFile = await client.messages.create({
      model: 's',
      max_tokens: 500,
      tools: [{ name: 'reply', input_schema: schema }],
      messages: [{ role: 'user', content: 'Summarise the idea of parallel agents.' }],
    });
    expect(replyResult(noFile)).toMatch(/^prompt: 6 words, 38 chars;/);
  });
});

describe('default policy: neither', () => {
  it('echoes the request in a short text answer', async () => {
    const message = await client.messages.create({
      model: 's',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Hello there.' }],
    });
    expect(message.stop_reason).toBe('end_turn');
    expect(textOf(message)).toBe(
      'Scripted model, no script: I read 1 message(s); the last one says "Hello there.".',
    );
  });
});
