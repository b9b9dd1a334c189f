import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLI, readResultLines } from './cli-helpers.js';
import { tempDir } from './helpers.js';

// The README's examples, taken from README.md itself (a section's heading, then its code fence)
// and run as printed in a temporary workspace: the agent-file example saved where the README says
// agent files live, the library example beside it, and the `cohort batch` commands in a shell with
// `cohort` on PATH. All offline, on the built-in scripted model, against the built package. If the
// README changes an example, the test runs the new one: it fails unless that still works.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const run = promisify(execFile);

/** The text under `heading` (a whole heading line), up to the next heading of its level or above. */
function section(heading: string): string {
  const lines = README.split('\n');
  const start = lines.indexOf(heading);
  if (start === -1) throw new Error(`README.md has no heading line \`${heading}\``);
  const level = /^#+/.exec(heading)?.[0].length ?? 0;
  let end = lines.length;
  let inFence = false;
  for (let index = start + 1; index < lines.length; index++) {
    const line = lines[index]!;
    // A `# comment` inside a code block is not a heading.
    if (/^```/.test(line)) inFence = !inFence;
    const hashes = inFence ? undefined : /^(#+) /.exec(line)?.[1]?.length;
    if (hashes !== undefined && hashes <= level) {
      end = index;
      break;
    }
  }
  return lines.slice(start + 1, end).join('\n');
}

/** The body of the first ```LANG fence of `text` that `accept` takes. */
function fence(text: string, lang: string, accept: (body: string) => boolean = () => true): string {
  const pattern = new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, 'gm');
  for (const match of text.matchAll(pattern)) {
    if (accept(match[1]!)) return match[1]!;
  }
  throw new Error(`README.md: no \`\`\`${lang} block here that fits`);
}

/**
 * The body of the first ```LANG fence of `text` that `accept` takes, where the fence may be indented
 * (inside a list item): its lines without that indent, as a reader pastes them.
 */
function indentedFence(
  text: string,
  lang: string,
  accept: (body: string) => boolean = () => true,
): string {
  const pattern = new RegExp(`^( *)\`\`\`${lang}\\n([\\s\\S]*?)^\\1\`\`\`$`, 'gm');
  for (const match of text.matchAll(pattern)) {
    const indent = match[1]!;
    const body = match[2]!
      .split('\n')
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n');
    if (accept(body)) return body;
  }
  throw new Error(`README.md: no \`\`\`${lang} block here that fits`);
}

/** A process environment with no real provider: every command runs on the built-in model. */
function offline(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env.ANTHROPIC_API_KEY;
  delete env.ANTHROPIC_BASE_URL;
  delete env.ANTHROPIC_AUTH_TOKEN;
  return env;
}

/** A folder with `cohort` on it that runs the built CLI, as `npm link` would put it on PATH. */
function cohortOnPath(): string {
  const bin = tempDir('cohort-bin-');
  const shim = path.join(bin, 'cohort');
  writeFileSync(
    shim,
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`,
  );
  chmodSync(shim, 0o755);
  return bin;
}

const AGENT_FILES = section('### Agent files, typed replies, budgets, traces');
const AGENT_FILE = fence(AGENT_FILES, 'text', (body) => /^name: \S+$/m.test(body));
/** Where the README says agent files live by default: `.cohort/agents` under the workspace. */
const AGENTS_FOLDER = /default `([^`]+)` under the\s+workspace/.exec(AGENT_FILES)?.[1];
const AGENT_NAME = /^name: (\S+)$/m.exec(AGENT_FILE)?.[1];

/**
 * A workspace holding the README's agent file where the README puts it, and two documents for
 * the library example's workspace survey.
 */
function workspaceWithAgentFile(): string {
  const workspace = tempDir('cohort-readme-ws-');
  if (AGENTS_FOLDER === undefined || AGENT_NAME === undefined) {
    throw new Error(
      'README.md: the agent-file section no longer says where files live or names one',
    );
  }
  const folder = path.join(workspace, AGENTS_FOLDER);
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, `${AGENT_NAME}.md`), AGENT_FILE);
  writeFileSync(path.join(workspace, 'README.md'), '# Example\n\nA workspace.\n');
  writeFileSync(path.join(workspace, 'package.json'), '{"name":"example"}\n');
  return workspace;
}

describe('the README agent-file example', () => {
  it('is the extractor, saved in .cohort/agents under the workspace', () => {
    expect(AGENTS_FOLDER).toBe('.cohort/agents');
    expect(AGENT_NAME).toBe('extractor');
  });

  it('checks ok as printed (cohort agents check, in the workspace)', async () => {
    const workspace = workspaceWithAgentFile();
    const { stdout } = await run(process.execPath, [CLI, 'agents', 'check', '--json'], {
      cwd: workspace,
      env: offline(),
    });
    const report = JSON.parse(stdout) as { files: Record<string, unknown>[]; bad: number };
    expect(report.bad).toBe(0);
    expect(report.files).toEqual([
      expect.objectContaining({
        name: 'extractor',
        ok: true,
        description: /^description: (.+)$/m.exec(AGENT_FILE)?.[1],
      }),
    ]);
  });
});

describe('the README library example, with the agent-file example in its workspace', () => {
  const LIBRARY = section('## Library');
  const CODE = fence(LIBRARY, 'js');
  let runner: string;

  beforeAll(() => {
    // `cohort-agents` resolves to this package's build, from a folder outside the workspace (so
    // the survey sees only the workspace's own files).
    runner = tempDir('cohort-readme-runner-');
    mkdirSync(path.join(runner, 'node_modules'));
    symlinkSync(ROOT, path.join(runner, 'node_modules', 'cohort-agents'), 'dir');
    writeFileSync(path.join(runner, 'library.mjs'), CODE);
  });

  it('is examples/library.mjs, as the README says', () => {
    expect(LIBRARY).toContain('This is [examples/library.mjs](examples/library.mjs)');
    const file = readFileSync(path.join(ROOT, 'examples', 'library.mjs'), 'utf8');
    // The file opens with a comment line saying what it is; the rest is the README's block.
    expect(file.replace(/^(\/\/.*\n)+/, '')).toBe(CODE);
  });

  it('runs as printed beside the README’s agent file, and exits by itself', async () => {
    const workspace = workspaceWithAgentFile();
    const { stdout } = await run(process.execPath, [path.join(runner, 'library.mjs')], {
      cwd: workspace,
      env: offline(),
      timeout: 60_000,
    });
    const lines = stdout.trim().split('\n');
    // One child, awaited: it read README.md and digested it.
    expect(lines[0]).toMatch(/^complete README\.md: 3 lines/);
    // A handle: id, status, then its result's outcome.
    expect(lines[1]).toMatch(/^ag_[a-z2-7]{12} (queued|running) complete$/);
    // A parent session: one async sub-agent per file, each settling, then the turn and the count.
    expect(lines).toContain('settled README.md');
    expect(lines).toContain('settled package.json');
    expect(lines.at(-1)).toBe('ready 2');
  });
});

describe('the README cohort batch example', () => {
  const COMMANDS = fence(section('### `cohort batch`'), 'sh');

  it('writes one result line per task line, each complete, and exits 0', async () => {
    const workspace = tempDir('cohort-readme-batch-');
    const bin = cohortOnPath();
    await run('/bin/sh', ['-e', '-c', COMMANDS], {
      cwd: workspace,
      env: offline({ PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` }),
      timeout: 60_000,
    });
    const tasks = readFileSync(path.join(workspace, 'tasks.jsonl'), 'utf8').trim().split('\n');
    const ids = tasks.map((line) => (JSON.parse(line) as { id: string }).id);
    const results = readResultLines(path.join(workspace, 'results.jsonl')) as {
      taskId: string;
      outcome: string;
      id: string;
      usage: unknown;
    }[];
    // A result line is the AgentResult plus "taskId", one per task.
    expect(results.map((result) => result.taskId).sort()).toEqual([...ids].sort());
    for (const result of results) {
      expect(result).toMatchObject({ outcome: 'complete', id: expect.stringMatching(/^ag_/) });
      expect(result.usage).toBeDefined();
    }
  });
});

describe('the README tasks-from-files example, then its cohort results commands', () => {
  const FILES_COMMANDS = indentedFence(section('### `cohort batch`'), 'sh', (body) =>
    body.includes('--files'),
  );
  const RESULTS_COMMANDS = fence(section('### `cohort results`'), 'sh');

  it('makes one typed task per matched file and prints their values as a Markdown table', async () => {
    const workspace = tempDir('cohort-readme-files-');
    mkdirSync(path.join(workspace, 'src', 'deep'), { recursive: true });
    writeFileSync(path.join(workspace, 'src', 'a.ts'), 'export const a = 1;\n');
    writeFileSync(path.join(workspace, 'src', 'deep', 'b.ts'), 'export const b = 2;\n');
    writeFileSync(path.join(workspace, 'notes.md'), 'Not a source file.\n');
    const bin = cohortOnPath();
    const { stdout } = await run('/bin/sh', ['-e', '-c', FILES_COMMANDS], {
      cwd: workspace,
      env: offline({ PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` }),
      timeout: 60_000,
    });
    const results = readResultLines(path.join(workspace, 'reviews.jsonl')) as {
      taskId: string;
      outcome: string;
      value: { risks: unknown };
    }[];
    // One task per .ts file, its id the path; each typed reply parsed into `value`.
    expect(results.map((result) => result.taskId).sort()).toEqual(['src/a.ts', 'src/deep/b.ts']);
    for (const result of results) {
      expect(result.outcome).toBe('complete');
      expect(Array.isArray(result.value.risks)).toBe(true);
    }
    const table = stdout.trim().split('\n');
    expect(table[0]).toBe('| taskId | outcome | value.risks |');
    expect(table).toHaveLength(2 + results.length);
    expect(table.slice(2).sort()).toEqual(
      results
        .map((result) => `| ${result.taskId} | complete | ${JSON.stringify(result.value.risks)} |`)
        .sort(),
    );
  });

  it("reads the batch example's results file with each results command, as printed", async () => {
    const workspace = tempDir('cohort-readme-results-');
    const bin = cohortOnPath();
    const env = offline({ PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` });
    await run('/bin/sh', ['-e', '-c', fence(section('### `cohort batch`'), 'sh')], {
      cwd: workspace,
      env,
      timeout: 60_000,
    });
    const { stdout } = await run('/bin/sh', ['-e', '-c', RESULTS_COMMANDS], {
      cwd: workspace,
      env,
      timeout: 60_000,
    });
    expect(stdout).toContain('results.jsonl: 2 task(s) in 2 line(s)');
    expect(stdout).toContain('outcomes: 2 complete');
    // The export went to out.csv, in the tasks file's order.
    const csv = readFileSync(path.join(workspace, 'out.csv'), 'utf8').trim().split('\r\n');
    expect(csv[0]).toBe('taskId,outcome,value.title,usage.costUsd');
    expect(csv.slice(1).map((row) => row.split(',').slice(0, 2).join(','))).toEqual([
      'a,complete',
      'b,complete',
    ]);
  });
});

// The README's promise for the agent file above: a task line naming it gets the parsed fields
// on its result line (`jq -c '.value' results.jsonl`). Offline, the scripted model makes that
// value from the schema and the file it read (docs/SCRIPTED-MODEL.md, "Typed replies").
describe('the README extractor, named by a batch task line', () => {
  it('ends complete with a value holding the title and the authors', async () => {
    const workspace = workspaceWithAgentFile();
    writeFileSync(
      path.join(workspace, 'paper.md'),
      '# On Threads\n\nBy Ada Lovelace and Alan Turing, 1950.\n',
    );
    const task = {
      id: 'paper',
      agent: AGENT_NAME,
      prompt: 'Read `paper.md` with read_file and extract its title, date and authors.',
    };
    writeFileSync(path.join(workspace, 'tasks.jsonl'), `${JSON.stringify(task)}\n`);
    const out = path.join(workspace, 'results.jsonl');
    await run(
      process.execPath,
      [CLI, 'batch', 'tasks.jsonl', '--out', out, '--workspace', '.', '--quiet'],
      { cwd: workspace, env: offline(), timeout: 60_000 },
    ).catch(() => undefined); // exit 1 when the task is not complete: the line says why
    const [result] = readResultLines(out) as { outcome: string; value?: unknown }[];
    expect(result).toMatchObject({
      outcome: 'complete',
      value: { title: expect.any(String), authors: expect.any(Array) },
    });
  });
});
