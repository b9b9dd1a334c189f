import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flagMessage } from '../src/cli/option-flags.js';
import { checkTasks, parseTasks, taskAgentOptions } from '../src/cli/task-lines.js';
import { checkEngine, Engine, type EngineOptions } from '../src/main/engine.js';
import { Session } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import type { ToolResultBlock } from '../src/shared/provider/types.js';
import type { AnyTool } from '../src/shared/tools/types.js';
import {
  contentBlocks,
  makeWorkspace,
  type Rig,
  readTranscript,
  scripted,
  startRig,
  tempDir,
} from './helpers.js';

/** Real tool module files, one per way a module can be good or bad. */
const modules = {} as Record<
  'good' | 'throws' | 'hangs' | 'slow' | 'handle' | 'reply' | 'dupA' | 'dupB' | 'noRun',
  string
>;
let folder: string;
let workspace: string;

function toolSource(name: string): string {
  return `{ name: '${name}', description: 'd', inputSchema: { type: 'object' }, run: () => 'ok' }`;
}

beforeAll(() => {
  folder = tempDir('cohort-input-');
  workspace = makeWorkspace();
  const write = (name: keyof typeof modules, text: string) => {
    modules[name] = path.join(folder, `${name}.mjs`);
    writeFileSync(modules[name], text);
  };
  write('good', `export const tools = [${toolSource('lookup')}];\n`);
  write('throws', "throw new Error('boom at import');\n");
  write('hangs', `await new Promise(() => {});\nexport const tools = [${toolSource('never')}];\n`);
  // Still importing after the test's short timeout, but it would finish: a timer keeps it alive.
  write(
    'slow',
    `await new Promise((resolve) => setTimeout(resolve, 5_000));\nexport const tools = [${toolSource('late')}];\n`,
  );
  write(
    'handle',
    `setInterval(() => {}, 1_000);\nexport const tools = [${toolSource('pooled')}];\n`,
  );
  write('reply', `export default ${toolSource('reply')};\n`);
  write('dupA', `export const tools = [${toolSource('search')}];\n`);
  write('dupB', `export const tools = [${toolSource('other')}, ${toolSource('search')}];\n`);
  write(
    'noRun',
    "export const tools = [{ name: 'x', description: 'd', inputSchema: { type: 'object' } }];\n",
  );
});

const hostTool = (name: string): AnyTool => ({
  name,
  description: 'a host tool',
  inputSchema: { type: 'object' },
  run: () => 'ok',
});

/** The UsageError `checkEngine` rejects with, or a failure when it resolves. */
async function refusal(options: EngineOptions, importTimeoutMs?: number): Promise<string> {
  const error = await checkEngine(
    options,
    importTimeoutMs === undefined ? {} : { importTimeoutMs },
  ).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(UsageError);
  return (error as UsageError).message;
}

describe('checkEngine: tool modules are imported and checked before anything starts', () => {
  it('lists the tools of a valid module beside the built-in ones', async () => {
    const check = await checkEngine({ workspace, toolModules: [modules.good] });
    expect(check.toolNames).toEqual(['read_file', 'list_files', 'lookup']);
    // Children at depth 1 may spawn only when maxDepth is above 1.
    const deeper = await checkEngine({ toolModules: [modules.good], maxDepth: 2 });
    expect(deeper.toolNames).toEqual(['lookup', 'agent', 'agents', 'agent_cancel']);
  });

  it('refuses a module that throws on import, naming the option, the path and the cause', async () => {
    expect(await refusal({ toolModules: [modules.good, modules.throws] })).toBe(
      `Expected \`toolModules[1]\` (\`${modules.throws}\`) to be an ES module exporting valid tools, but importing it failed: boom at import`,
    );
  });

  it('refuses a module whose import awaits forever, naming it', async () => {
    expect(await refusal({ toolModules: [modules.hangs] }, 5_000)).toBe(
      `Expected \`toolModules[0]\` (\`${modules.hangs}\`) to finish importing, but its import can never finish (a top-level await that never settles?)`,
    );
  });

  it('gives up on a module still importing after the timeout, naming it and the timeout', async () => {
    expect(await refusal({ toolModules: [modules.slow] }, 100)).toBe(
      `Expected \`toolModules[0]\` (\`${modules.slow}\`) to finish importing within 100 ms, but it was still importing (a top-level await that never settles?)`,
    );
  });

  it('a module that opens a handle at import does not keep an engine-only program alive', async () => {
    // Imported by the start-up check in a throw-away worker, not on main: after close() the
    // program ends by itself, as the README promises.
    const script = `
      import { Engine } from ${JSON.stringify(path.resolve('dist/src/index.js'))};
      const engine = await Engine.start({ toolModules: [${JSON.stringify(modules.handle)}], threads: 1 });
      await engine.close();
      console.log('closed');
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script]);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    const code = await new Promise((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      child.on('exit', (exitCode, signal) => {
        clearTimeout(timer);
        resolve(exitCode ?? signal);
      });
    });
    expect(out.trim()).toBe('closed');
    expect(code).toBe(0);
  });

  it('refuses a module whose export is not a tool', async () => {
    expect(await refusal({ toolModules: [modules.noRun] })).toMatch(
      /`toolModules\[0\]` .* but its tool #0 lacks a `run` function$/,
    );
  });

  it('refuses a missing module path and a folder', async () => {
    const missing = path.join(folder, 'missing.mjs');
    expect(await refusal({ toolModules: [missing] })).toBe(
      `Expected \`toolModules[0]\` to be the path of an existing ES module, got \`${missing}\`, which does not exist`,
    );
    expect(await refusal({ toolModules: [folder] })).toMatch(/which is a folder$/);
  });

  it('refuses a tool named reply: every sub-agent gets its own', async () => {
    expect(await refusal({ toolModules: [modules.reply] })).toBe(
      `Expected no tool named \`reply\` (it is reserved: every sub-agent gets its own), got one from \`toolModules[0]\` (\`${modules.reply}\`)`,
    );
    expect(await refusal({ hostTools: [hostTool('reply')] })).toMatch(/from `hostTools\[0\]`$/);
  });

  it('refuses two tools of one name, across modules, host tools and the built-in ones', async () => {
    expect(await refusal({ toolModules: [modules.dupA, modules.dupB] })).toBe(
      `Expected every tool to have its own name, got \`search\` from \`toolModules[0]\` (\`${modules.dupA}\`) and from \`toolModules[1]\` (\`${modules.dupB}\`)`,
    );
    expect(await refusal({ toolModules: [modules.good], hostTools: [hostTool('lookup')] })).toMatch(
      /got `lookup` from `toolModules\[0\]` .* and from `hostTools\[0\]`$/,
    );
    expect(await refusal({ workspace, hostTools: [hostTool('read_file')] })).toMatch(
      /got `read_file` from the built-in workspace tools/,
    );
    // `agent` is taken only while agents may spawn.
    expect(await refusal({ hostTools: [hostTool('agent')] })).toMatch(
      /got `agent` from `hostTools\[0\]` and from the built-in agent tools/,
    );
    const noSpawning = await checkEngine({ maxDepth: 0, hostTools: [hostTool('agent')] });
    expect(noSpawning.toolNames).toEqual(['agent']);
  });

  it('Engine.start makes the same checks, so library users get them too', async () => {
    await expect(Engine.start({ toolModules: [modules.throws] })).rejects.toThrow(
      /importing it failed: boom at import/,
    );
    await expect(Engine.start({ toolModules: [modules.reply] })).rejects.toThrow(UsageError);
  });
});

describe('checkEngine: paths and URLs', () => {
  it('refuses a workspace that is missing or is a file, and takes a folder', async () => {
    const missing = path.join(folder, 'no-such-folder');
    expect(await refusal({ workspace: missing })).toBe(
      `Expected \`workspace\` to be an existing folder, got \`${missing}\`, which does not exist`,
    );
    expect(await refusal({ workspace: modules.good })).toBe(
      `Expected \`workspace\` to be an existing folder, got \`${modules.good}\`, which is not a folder`,
    );
    await expect(checkEngine({ workspace })).resolves.toBeDefined();
  });

  it('refuses a log root under a regular file, and takes one that can be made', async () => {
    const under = path.join(modules.good, 'logs');
    expect(await refusal({ logDir: under })).toBe(
      `Expected \`logDir\` to be a folder or a path where one can be made, got \`${under}\`, but \`${modules.good}\` is not a folder`,
    );
    await expect(checkEngine({ logDir: path.join(folder, 'new', 'logs') })).resolves.toBeDefined();
  });

  it('refuses a base URL that is not http(s), and takes one that is', async () => {
    expect(await refusal({ provider: { baseURL: 'ftp://x' } })).toBe(
      'Expected `provider.baseURL` to be an http:// or https:// URL, got `ftp://x` (string)',
    );
    expect(await refusal({ provider: { baseURL: 'not a url' } })).toMatch(/got `not a url`/);
    await expect(checkEngine({ provider: { baseURL: 'http://ok' } })).resolves.toBeDefined();
  });
});

describe('checkAgent: what spawn refuses', () => {
  it('refuses empty prompts, titles and models, and steps out of bounds', async () => {
    const { checkAgent } = await checkEngine({});
    const refused = (options: object): string => {
      try {
        checkAgent(options as never);
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      throw new Error(`accepted ${JSON.stringify(options)}`);
    };
    expect(refused({})).toBe('Expected `prompt` to be a non-empty string, got nothing');
    expect(refused({ prompt: '  ' })).toMatch(/^Expected `prompt` to be a non-empty string/);
    expect(refused({ prompt: 'p', title: '' })).toMatch(/^Expected `title` to be a non-empty/);
    expect(refused({ prompt: 'p', model: '' })).toMatch(/^Expected `model` to be a non-empty/);
    expect(refused({ prompt: 'p', maxSteps: 1e300 })).toBe(
      'Expected `maxSteps` to be a whole number from 1 to 10000, got `1e+300` (number)',
    );
    expect(refused({ prompt: 'p', maxSteps: 0 })).toMatch(/`maxSteps`/);
    expect(refused({ prompt: 'p', maxSteps: 2.5 })).toMatch(/`maxSteps`/);
    expect(refused({ prompt: 'p', tools: 'echo' })).toMatch(/`tools` to be an array of strings/);
    expect(() =>
      checkAgent({ prompt: 'p', title: 't', maxSteps: 10_000, system: '' }),
    ).not.toThrow();
  });

  it('refuses unknown tool names with the list of known ones; reply is always known', async () => {
    const { checkAgent } = await checkEngine({ workspace, toolModules: [modules.good] });
    expect(() => checkAgent({ prompt: 'p', tools: ['read_fil', 'lookup', 'grep'] })).toThrow(
      'Expected `tools` to name known tools (`read_file`, `list_files`, `lookup`), got `read_fil`, `grep`',
    );
    expect(() => checkAgent({ prompt: 'p', tools: ['lookup', 'reply'] })).not.toThrow();
    const bare = await checkEngine({});
    expect(() => bare.checkAgent({ prompt: 'p', tools: ['read_file'] })).toThrow(
      'Expected `tools` to name known tools (none), got `read_file`',
    );
  });

  it('knows the spawn family only at depths that may spawn', async () => {
    const { checkAgent } = await checkEngine({ maxDepth: 2 });
    expect(() => checkAgent({ prompt: 'p', tools: ['agent'] })).not.toThrow();
    expect(() => checkAgent({ prompt: 'p', tools: ['agent'] }, 2)).toThrow(
      'Expected `tools` to name known tools (none), got `agent`',
    );
  });
});

describe('batch lines checked by the engine before any runs', () => {
  it('keeps the good lines and reports each refused one with its line number', async () => {
    const text = [
      '{"id":"good1","prompt":"one","tools":["read_file"]}',
      '{"id":"m","prompt":"p","model":""}',
      'not json',
      '{"id":"t","prompt":"p","title":""}',
      '',
      '{"id":"s","prompt":"p","maxSteps":1e300}',
      '{"id":"u","prompt":"p","tools":["read_fil"]}',
      '{"id":"good2","prompt":"two","maxSteps":3}',
    ].join('\n');
    const { checkAgent } = await checkEngine({ workspace });
    const parsed = parseTasks(text);
    // The line check already knows the bounds of maxSteps; the engine's check does the rest.
    expect(parsed.tasks).toHaveLength(5);
    const checked = checkTasks(parsed, (task) => checkAgent(taskAgentOptions(task)));
    expect(checked.tasks.map((task) => task.id)).toEqual(['good1', 'good2']);
    expect(checked.errors.map((error) => error.line)).toEqual([2, 3, 4, 6, 7]);
    expect(checked.errors[0]!.message).toMatch(/^Expected `model` to be a non-empty string/);
    expect(checked.errors[1]!.message).toMatch(/^invalid JSON/);
    expect(checked.errors[2]!.message).toMatch(/^Expected `title` to be a non-empty string/);
    expect(checked.errors[3]!.message).toMatch(
      /^expected `maxSteps` to be a whole number from 1 to 10000/,
    );
    expect(checked.errors[4]!.message).toBe(
      'Expected `tools` to name known tools (`read_file`, `list_files`), got `read_fil`',
    );
    expect([...checked.lineOf]).toEqual([
      ['good1', 1],
      ['good2', 8],
    ]);
  });

  it('turns a task into exactly the agent options batch runs', () => {
    expect(taskAgentOptions({ id: 'a', prompt: 'p' })).toEqual({
      prompt: 'p',
      title: 'a',
      streamText: false,
    });
    expect(
      taskAgentOptions({
        id: 'a',
        prompt: 'p',
        title: 'T',
        system: 'S',
        tools: ['x'],
        maxSteps: 3,
        model: 'm',
      }),
    ).toEqual({
      prompt: 'p',
      title: 'T',
      streamText: false,
      system: 'S',
      tools: ['x'],
      maxSteps: 3,
      model: 'm',
    });
  });
});

describe('flagMessage', () => {
  it('names CLI flags instead of library options, and leaves the rest', () => {
    expect(flagMessage('Expected `ceilingMs` to be a whole number, got `0` (number)')).toBe(
      'Expected `--ceiling` to be a whole number, got `0` (number)',
    );
    expect(flagMessage('Expected `toolModules[1]` (`/x/a.mjs`) to be an ES module')).toBe(
      'Expected `--tools` (`/x/a.mjs`) to be an ES module',
    );
    expect(flagMessage('`provider.baseURL` and `provider.idleTimeoutMs`, `workspace`')).toBe(
      '`--base-url` and `--idle-timeout`, `--workspace`',
    );
    expect(flagMessage('`replyCap`, `hostTools[0]`, `tools`')).toBe(
      '`replyCap`, `hostTools[0]`, `tools`',
    );
  });
});

describe('unknown tools with a real engine and the scripted model', () => {
  let rig: Rig;
  const knownToChildren =
    /\(`read_file`, `list_files`, `cleanup`, `echo`, .*`wait`\), got `read_fil`$/;

  beforeAll(async () => {
    rig = await startRig({ threads: 1, workspace: makeWorkspace(), maxDepth: 2 });
  });
  afterAll(async () => {
    await rig.close();
  });

  it('engine.spawn throws a UsageError listing the known tools, and starts nothing', () => {
    expect(() => rig.engine.spawn({ prompt: 'p', tools: ['read_fil'] })).toThrow(UsageError);
    expect(() => rig.engine.spawn({ prompt: 'p', tools: ['read_fil'] })).toThrow(
      /^Expected `tools` to name known tools \(`read_file`, .*`agent`, `agents`, `agent_cancel`\), got `read_fil`$/,
    );
    expect(rig.engine.liveCount).toBe(0);
    expect(rig.engine.toolNames).toContain('echo');
  });

  it('the root asking for an unknown tool gets a clear is_error, and its turn goes on', async () => {
    const session = new Session(rig.engine);
    try {
      const turn = await session.send(
        scripted([
          { calls: [{ name: 'agent', input: { title: 't', prompt: 'p', tools: ['read_fil'] } }] },
          { text: 'I will do it myself.' },
        ]),
      );
      expect(turn.text).toBe('I will do it myself.');
      const answer = contentBlocks(session.transcript[2]!)[0] as ToolResultBlock;
      expect(answer.is_error).toBe(true);
      expect(answer.content).toMatch(/^`agent` failed: Expected `tools` to name known tools/);
      expect(answer.content).toMatch(/`agent_cancel`\), got `read_fil`$/);
    } finally {
      await session.close();
    }
  });

  it('a child asking over the host bridge for an unknown tool gets the same is_error', async () => {
    const result = await rig.engine.run({
      prompt: scripted([
        { calls: [{ name: 'agent', input: { title: 't', prompt: 'p', tools: ['read_fil'] } }] },
        { reply: 'went on' },
      ]),
    });
    expect(result.text).toBe('went on');
    const answer = contentBlocks(readTranscript(result)[2]!)[0] as ToolResultBlock;
    expect(answer.is_error).toBe(true);
    // The grandchild (depth 2) may not spawn: the spawn family is not among its known tools.
    expect(answer.content).toMatch(/^`agent` failed: Expected `tools` to name known tools/);
    expect(answer.content).toMatch(knownToChildren);
  });
});
