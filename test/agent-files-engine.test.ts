import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentFileError } from '../src/main/agents/definition.js';
import { Engine } from '../src/main/engine.js';
import { Session } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import { DELIVERY_DISCIPLINE } from '../src/shared/tools/reply.js';
import { type ScriptedModel, type ScriptStep, startScriptedModel } from '../src/testing/index.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { scripted, TEST_TOOLS, tempDir } from './helpers.js';
import { type RecordingProxy, recordingProxy, type SeenRequest } from './recording-proxy.js';

// Agent files through the engine: a real engine with real workers, real files, the scripted
// model over HTTP behind a recording proxy (so a test reads the system prompt, model and tools
// each agent was given), and the CLI as a real child process.

const REVIEWER_PROMPT = 'You are the reviewer of the agent file. REVIEWER-FILE-PROMPT';
const HELPER_PROMPT = 'You are the helper of the agent file. HELPER-FILE-PROMPT';
const REVIEWER_SCHEMA = {
  type: 'object',
  properties: { risks: { type: 'array', items: { type: 'string' } } },
  required: ['risks'],
};

const REVIEWER = [
  '---',
  'name: reviewer',
  'description: Reviews a diff and lists the risks, most serious first.',
  'model: file-model-7',
  'tools: [echo]',
  'maxSteps: 2',
  'outputSchema:',
  '  type: object',
  '  properties:',
  '    risks: { type: array, items: { type: string } }',
  '  required: [risks]',
  '---',
  '',
  REVIEWER_PROMPT,
  '',
].join('\n');

const HELPER = [
  '---',
  'name: helper',
  'description: Helps with small chores.',
  '---',
  HELPER_PROMPT,
].join('\n');

/** A fresh folder holding `files`; returns the folder. */
function folderWith(files: Record<string, string>): string {
  const dir = tempDir('cohort-agents-');
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

/** A file whose line 3 is a bad `maxSteps` (the library and CLI name differ: `--max-steps`). */
const BROKEN = [
  '---',
  'name: broken',
  'maxSteps: 0',
  'description: Never loads.',
  '---',
  'Body.',
].join('\n');

let model: ScriptedModel;
let proxy: RecordingProxy;
let engine: Engine;
let agentsDir: string;

beforeAll(async () => {
  model = await startScriptedModel({ port: 0 });
  proxy = await recordingProxy(model.url);
  agentsDir = folderWith({ 'reviewer.md': REVIEWER, 'helper.md': HELPER });
  engine = await Engine.start({
    threads: 2,
    maxDepth: 2,
    agentsDir,
    logDir: tempDir('cohort-logs-'),
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

const toolNames = (request: SeenRequest | undefined) => request?.tools?.map((tool) => tool.name);
const toolNamed = (request: SeenRequest | undefined, name: string) =>
  request?.tools?.find((tool) => tool.name === name);

describe('a named agent run through the engine', () => {
  it('takes the file’s system prompt, model, tools and outputSchema', async () => {
    const result = await engine.run({
      agent: 'reviewer',
      prompt: task('File reviewer.', [{ reply: { risks: ['a leak'] } }]),
    });
    expect(result).toMatchObject({ outcome: 'complete', value: { risks: ['a leak'] } });
    const [request, ...more] = proxy.requestsOf('File reviewer.');
    expect(more).toHaveLength(0);
    expect(request?.system).toBe(`${REVIEWER_PROMPT}\n\n${DELIVERY_DISCIPLINE}`);
    expect(request?.model).toBe('file-model-7');
    expect(toolNames(request)).toEqual(['echo', 'reply']);
    expect(toolNamed(request, 'reply')?.input_schema.properties).toEqual({
      result: REVIEWER_SCHEMA,
    });
    expect(engine.agents.map((agent) => agent.name)).toEqual(['helper', 'reviewer']);
  });

  it('takes the file’s maxSteps', async () => {
    const echo = { calls: [{ name: 'echo', input: { value: 'again' } }] };
    const result = await engine.run({
      agent: 'reviewer',
      prompt: task('File steps.', [echo, echo, { reply: { risks: [] } }]),
    });
    expect(result.outcome).toBe('capped');
    expect(proxy.requestsOf('File steps.')).toHaveLength(2);
  });

  it('a spawn’s own fields win over the file’s', async () => {
    const echo = { calls: [{ name: 'cleanup', input: { marker: path.join(tempDir(), 'm') } }] };
    const result = await engine.run({
      agent: 'reviewer',
      prompt: task('Own fields.', [echo, echo, { reply: 'plain text now' }]),
      system: 'THE SPAWN SYSTEM',
      model: 'spawn-model-3',
      tools: ['cleanup'],
      maxSteps: 3,
      outputSchema: { type: 'string' },
    });
    expect(result).toMatchObject({ outcome: 'complete', value: 'plain text now' });
    const requests = proxy.requestsOf('Own fields.');
    expect(requests).toHaveLength(3);
    const [first] = requests;
    expect(first?.system).toBe(`THE SPAWN SYSTEM\n\n${DELIVERY_DISCIPLINE}`);
    expect(first?.model).toBe('spawn-model-3');
    expect(toolNames(first)).toEqual(['cleanup', 'reply']);
    expect(toolNamed(first, 'reply')?.input_schema.properties).toEqual({
      result: { type: 'string' },
    });
  });

  it('an unknown name is a UsageError listing the known names, and nothing runs', () => {
    const before = proxy.requests.length;
    // Read before and after in one synchronous stretch: a run that just settled may still hold
    // its slot until its worker task ends, so only a change would be this spawn's.
    const live = engine.liveCount;
    let caught: unknown;
    try {
      engine.spawn({ agent: 'nobody', prompt: 'never runs' });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(UsageError);
    expect((caught as Error).message).toBe(
      'Expected `agent` to name an agent file (known: `helper`, `reviewer`), got `"nobody"` (string)',
    );
    expect(engine.liveCount).toBe(live);
    expect(proxy.requests.length).toBe(before);
  });

  it('a spawn naming a file without a budget still has its own bad budget refused', () => {
    const live = engine.liveCount;
    for (const budget of [null, 0]) {
      let caught: unknown;
      try {
        engine.spawn({ agent: 'helper', prompt: 'never runs', budget: budget as never });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(UsageError);
      expect((caught as Error).message).toContain('Expected `budget` to be an object');
    }
    expect(engine.liveCount).toBe(live);
  });

  it('a child at depth 1 under maxDepth 2 is offered the named agents in its `agent` tool', async () => {
    const result = await engine.run({ prompt: task('Depth one.', [{ reply: 'seen' }]) });
    expect(result.outcome).toBe('complete');
    const agentTool = toolNamed(proxy.requestsOf('Depth one.')[0], 'agent');
    expect(agentTool?.description).toContain('- helper: Helps with small chores.');
    expect(agentTool?.description).toContain(
      '- reviewer: Reviews a diff and lists the risks, most serious first.',
    );
    expect(
      (agentTool?.input_schema.properties as Record<string, unknown> | undefined)?.agent,
    ).toEqual({ enum: ['helper', 'reviewer'] });
  });
});

describe('a root session naming an agent', () => {
  it('its child runs with the file’s prompt; the root’s `agent` tool lists names and descriptions', async () => {
    const session = new Session(engine);
    try {
      const child = task('Session helper.', [{ reply: 'helped' }]);
      const turn = await session.send(
        task('Session root.', [
          { calls: [{ name: 'agent', input: { title: 'chore', agent: 'helper', prompt: child } }] },
          { text: 'The helper is done.' },
        ]),
      );
      expect(turn).toMatchObject({ outcome: 'ready', text: 'The helper is done.' });
      const [childRequest] = proxy.requestsOf('Session helper.');
      expect(childRequest?.system).toBe(`${HELPER_PROMPT}\n\n${DELIVERY_DISCIPLINE}`);
      const rootRequest = proxy.requestsOf('Session root.')[0];
      expect(toolNames(rootRequest)).not.toContain('reply');
      const agentTool = toolNamed(rootRequest, 'agent');
      expect(agentTool?.description).toContain('- helper: Helps with small chores.');
      expect(agentTool?.description).toContain(
        '- reviewer: Reviews a diff and lists the risks, most serious first.',
      );
      expect(
        (agentTool?.input_schema.properties as Record<string, unknown> | undefined)?.agent,
      ).toEqual({ enum: ['helper', 'reviewer'] });
      // The sync child's text came back to the root as the tool's result.
      expect(JSON.stringify(session.transcript[2])).toContain('helped');
    } finally {
      await session.close();
    }
  });
});

describe('Engine.start and agent files', () => {
  it('a malformed file rejects with FILE:LINE: and starts no engine', async () => {
    const dir = folderWith({ 'broken.md': BROKEN, 'helper.md': HELPER });
    const logDir = path.join(tempDir(), 'never-made');
    const start = Engine.start({ agentsDir: dir, logDir, provider: { baseURL: proxy.url } });
    await expect(start).rejects.toBeInstanceOf(AgentFileError);
    await expect(start).rejects.toThrow(
      `${path.join(dir, 'broken.md')}:3: Expected \`maxSteps\` to be a whole number from 1 to 10000, got \`0\` (number)`,
    );
    // The engine makes its log folder as it starts its pool; the check refused it before that.
    expect(existsSync(logDir)).toBe(false);
  });

  it('a file naming an unknown tool is refused at the line of its `tools`', async () => {
    const file = [
      '---',
      'name: lost',
      'description: Names a tool no one has.',
      '',
      'tools: echo, teleport',
      '---',
      'Body.',
    ];
    const dir = folderWith({ 'lost.md': file.join('\n') });
    const logDir = path.join(tempDir(), 'never-made');
    const start = Engine.start({
      agentsDir: dir,
      logDir,
      toolModules: [TEST_TOOLS],
      provider: { baseURL: proxy.url },
    });
    await expect(start).rejects.toBeInstanceOf(AgentFileError);
    await expect(start).rejects.toThrow(
      new RegExp(
        `^${escapeRegExp(path.join(dir, 'lost.md'))}:5: Expected \`tools\` to name known tools \\(.*\`echo\`.*\\), got \`teleport\`\nEvery agent file in `,
      ),
    );
    expect(existsSync(logDir)).toBe(false);
  });

  it('picks up .cohort/agents under the workspace; a workspace without one has no agents', async () => {
    const workspace = tempDir('cohort-ws-');
    const folder = path.join(workspace, '.cohort', 'agents');
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, 'helper.md'), HELPER);
    const withAgents = await Engine.start({
      threads: 1,
      workspace,
      logDir: tempDir('cohort-logs-'),
      provider: { baseURL: proxy.url },
    });
    try {
      expect(withAgents.agents.map((agent) => [agent.name, agent.file])).toEqual([
        ['helper', path.join(folder, 'helper.md')],
      ]);
    } finally {
      await withAgents.close();
    }
    const bare = await Engine.start({
      threads: 1,
      workspace: tempDir('cohort-ws-'),
      logDir: tempDir('cohort-logs-'),
      provider: { baseURL: proxy.url },
    });
    try {
      expect(bare.agents).toEqual([]);
    } finally {
      await bare.close();
    }
  });
});

describe('agent files in the CLI', () => {
  it('`cohort agent --agents MISSING` exits 2 naming `--agents`', async () => {
    const missing = path.join(tempDir(), 'no-such-folder');
    const run = runCli(['agent', 'hello', '--agents', missing, '--base-url', model.url]);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain('`--agents`');
    expect(run.stderr()).toContain(missing);
    expect(run.stderr()).not.toContain('agentsDir');
  });

  it('`cohort batch --agents DIR` runs a line naming an agent with the file’s prompt', async () => {
    const dir = tempDir('cohort-batch-');
    const tasks = path.join(dir, 'tasks.jsonl');
    const out = path.join(dir, 'results.jsonl');
    const prompt = task('Batch helper.', [{ reply: 'chore done' }]);
    writeFileSync(tasks, `${JSON.stringify({ id: 'a', agent: 'helper', prompt })}\n`);
    // The reviewer file names `echo`, a tool of the test module: the CLI needs it too.
    const run = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--agents',
      agentsDir,
      '--tools',
      TEST_TOOLS,
      '--base-url',
      proxy.url,
    ]);
    expect((await run.exit).code).toBe(0);
    const lines = readResultLines(out) as { taskId: string; outcome: string; text?: string }[];
    expect(lines).toEqual([
      expect.objectContaining({ taskId: 'a', outcome: 'complete', text: 'chore done' }),
    ]);
    expect(proxy.requestsOf('Batch helper.')[0]?.system).toBe(
      `${HELPER_PROMPT}\n\n${DELIVERY_DISCIPLINE}`,
    );
  });

  it('a malformed file exits 2 with its FILE:LINE: message, not rewritten to flag names', async () => {
    const dir = folderWith({ 'broken.md': BROKEN });
    const before = proxy.requests.length;
    // `cohort agent` checks every file (`cohort batch` only those its tasks name: agents-check).
    const run = runCli(['agent', 'never runs', '--agents', dir, '--base-url', proxy.url]);
    expect((await run.exit).code).toBe(2);
    expect(run.stderr()).toContain(
      `${path.join(dir, 'broken.md')}:3: Expected \`maxSteps\` to be a whole number from 1 to 10000`,
    );
    expect(run.stderr()).not.toContain('--max-steps');
    expect(proxy.requests.length).toBe(before);
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
