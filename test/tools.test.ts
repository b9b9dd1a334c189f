import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { allowedAt, dispatchBatch } from '../src/shared/tools/dispatch.js';
import type { AnyTool, ToolContext } from '../src/shared/tools/types.js';
import { listFilesTool, readFileTool } from '../src/shared/tools/workspace.js';

function workspace(): { root: string; outside: string } {
  const base = mkdtempSync(path.join(os.tmpdir(), 'cohort-tools-'));
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  mkdirSync(path.join(root, 'sub'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(root, 'a.txt'), 'one\ntwo\nthree\n');
  writeFileSync(path.join(root, 'sub', 'b.ts'), 'export const b = 1;\n');
  writeFileSync(path.join(outside, 'secret.txt'), 'secret');
  symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
  symlinkSync(outside, path.join(root, 'linkdir'));
  return { root, outside };
}

const context = (root: string): ToolContext => ({
  signal: new AbortController().signal,
  agentId: 'ag_test',
  depth: 1,
  workspace: root,
});

describe('workspace tools', () => {
  it('reads a file whole and by line range', async () => {
    const { root } = workspace();
    expect(await readFileTool.run({ path: 'a.txt' }, context(root))).toBe('one\ntwo\nthree\n');
    expect(await readFileTool.run({ path: 'a.txt', startLine: 2, endLine: 3 }, context(root))).toBe(
      'two\nthree',
    );
  });

  it('refuses paths that leave the workspace through .., an absolute path or a symlink', async () => {
    const { root, outside } = workspace();
    await expect(
      readFileTool.run({ path: '../outside/secret.txt' }, context(root)),
    ).rejects.toThrow(/inside the workspace/);
    await expect(
      readFileTool.run({ path: path.join(outside, 'secret.txt') }, context(root)),
    ).rejects.toThrow(/inside the workspace/);
    await expect(readFileTool.run({ path: 'link.txt' }, context(root))).rejects.toThrow(
      /link that leads out/,
    );
    await expect(readFileTool.run({ path: 'linkdir/secret.txt' }, context(root))).rejects.toThrow(
      /link that leads out/,
    );
    await expect(listFilesTool.run({ pattern: '../**' }, context(root))).rejects.toThrow(
      /leaves it/,
    );
  });

  it('lists files by glob and leaves symbolic links out', async () => {
    const { root } = workspace();
    const listing = String(await listFilesTool.run({}, context(root)));
    expect(listing.split('\n')).toEqual(['a.txt', 'sub/b.ts']);
    expect(await listFilesTool.run({ pattern: '**/*.ts' }, context(root))).toBe('sub/b.ts');
  });
});

describe('dispatchBatch', () => {
  const order: string[] = [];
  const echo: AnyTool = {
    name: 'echo',
    description: 'echo',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    run: (input: { text: string }) => {
      order.push(input.text);
      return { echoed: input.text };
    },
  };
  const boom: AnyTool = {
    name: 'boom',
    description: 'throws',
    inputSchema: { type: 'object' },
    run: () => {
      throw new Error('kaboom');
    },
  };
  const tools = new Map([
    ['echo', echo],
    ['boom', boom],
  ]);
  const ctx: ToolContext = { signal: new AbortController().signal, agentId: 'ag_x', depth: 1 };

  it('answers every call once, in order, with errors as is_error values', async () => {
    order.length = 0;
    const outcome = await dispatchBatch(
      [
        { id: 't1', name: 'echo', input: { text: 'first' } },
        { id: 't2', name: 'nope', input: {} },
        { id: 't3', name: 'echo', input: { text: 7 } },
        { id: 't4', name: 'boom', input: {} },
        { id: 't5', name: 'reply', input: { result: 'done' } },
        { id: 't6', name: 'echo', input: { text: 'after reply' } },
        { id: 't7', name: 'echo', input: {}, inputError: 'its arguments were not valid JSON: {' },
      ],
      { tools, rules: { depth: 1, maxDepth: 1 }, context: ctx },
    );
    expect(outcome.results.map((result) => result.tool_use_id)).toEqual([
      't1',
      't2',
      't3',
      't4',
      't5',
      't6',
      't7',
    ]);
    expect(outcome.results.map((result) => result.is_error === true)).toEqual([
      false,
      true,
      true,
      true,
      false,
      false,
      true,
    ]);
    expect(outcome.results[0]!.content).toBe('{\n  "echoed": "first"\n}');
    expect(outcome.results[1]!.content).toMatch(
      /Unknown tool `nope`. Expected one of: `echo`, `boom`, `reply`/,
    );
    expect(outcome.results[2]!.content).toMatch(
      /Invalid input for `echo`: \/text must be string.*got `\{"text":7\}` \(object\)/,
    );
    expect(outcome.results[3]!.content).toBe('`boom` failed: kaboom');
    expect(outcome.replies).toEqual(['done']);
    expect(order).toEqual(['first', 'after reply']);
  });

  it('refuses reply at the root and the spawn family at maxDepth', async () => {
    const outcome = await dispatchBatch([{ id: 'r', name: 'reply', input: { result: 'x' } }], {
      tools,
      rules: { depth: 0, maxDepth: 1 },
      context: { ...ctx, depth: 0 },
    });
    expect(outcome.results[0]!.is_error).toBe(true);
    expect(outcome.results[0]!.content).toMatch(/only for sub-agents/);
    expect(outcome.replies).toEqual([]);
    expect(allowedAt('agent', { depth: 1, maxDepth: 1 })).toBe(false);
    expect(allowedAt('agent', { depth: 0, maxDepth: 1 })).toBe(true);
    expect(allowedAt('reply', { depth: 0, maxDepth: 1 })).toBe(false);
  });
});
