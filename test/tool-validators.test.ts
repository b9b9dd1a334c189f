import { describe, expect, it } from 'vitest';
import { dispatchBatch } from '../src/shared/tools/dispatch.js';
import type { AnyTool, ToolContext } from '../src/shared/tools/types.js';

// Validators are compiled once per schema text, not once per tool object: every child has its own
// copy of each host tool. A copy must validate exactly as the original, and two schemas that
// differ must never share a validator.

const context: ToolContext = { signal: new AbortController().signal, agentId: 'ag_x', depth: 1 };

function hostToolCopy(schema: AnyTool['inputSchema']): AnyTool {
  // As a child's spec carries it across threads: a fresh object every time.
  return {
    name: 'lookup',
    description: 'lookup',
    inputSchema: structuredClone(schema),
    run: () => 'ok',
  };
}

async function errors(tool: AnyTool, inputs: unknown[]): Promise<boolean[]> {
  const outcome = await dispatchBatch(
    inputs.map((input, index) => ({ id: `t${index}`, name: tool.name, input })),
    { tools: new Map([[tool.name, tool]]), rules: { depth: 1, maxDepth: 1 }, context },
  );
  return outcome.results.map((result) => result.is_error === true);
}

describe('tool input validators', () => {
  const byKey = {
    type: 'object' as const,
    properties: { key: { type: 'string' } },
    required: ['key'],
  };
  const byId = {
    type: 'object' as const,
    properties: { id: { type: 'number' } },
    required: ['id'],
  };
  const inputs = [{ key: 'a' }, { key: 1 }, { id: 2 }, {}];

  it('checks every copy of a schema as the first one', async () => {
    const first = await errors(hostToolCopy(byKey), inputs);
    expect(first).toEqual([false, true, true, true]);
    for (let copy = 0; copy < 5; copy++)
      expect(await errors(hostToolCopy(byKey), inputs)).toEqual(first);
  });

  it('never checks a tool against another schema, even under the same name', async () => {
    await errors(hostToolCopy(byKey), inputs);
    expect(await errors(hostToolCopy(byId), inputs)).toEqual([true, true, false, true]);
    expect(await errors(hostToolCopy(byKey), inputs)).toEqual([false, true, true, true]);
  });
});
