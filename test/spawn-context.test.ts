import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { UsageError } from '../src/shared/errors.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { AnyTool, ToolContext } from '../src/shared/tools/types.js';
import {
  contentBlocks,
  eventLog,
  hostGate,
  type Rig,
  readJournal,
  scripted,
  startRig,
  syncAgent,
  TEST_TOOLS,
} from './helpers.js';
import { type RecordingProxy, recordingProxy } from './recording-proxy.js';

// Per-spawn context and credentials end to end: a real engine and workers, the real SDK against
// the scripted model over HTTP (through a recording proxy where a test reads request headers).

const CONTEXT_TOOLS = fileURLToPath(new URL('./fixtures/context-tools.mjs', import.meta.url));

/** A host tool that records the `context` each call saw, and answers with its tenant. */
function recorder(): {
  tool: AnyTool;
  seen: { agentId: string; depth: number; context: unknown }[];
} {
  const seen: { agentId: string; depth: number; context: unknown }[] = [];
  return {
    seen,
    tool: {
      name: 'whose_host',
      description: 'Says whose request this agent works on.',
      inputSchema: { type: 'object' },
      run: (_input: unknown, context: ToolContext) => {
        seen.push({ agentId: context.agentId, depth: context.depth, context: context.context });
        return 'noted';
      },
    },
  };
}

/** The text of every tool_result of `name`'s calls in the run's journal, by agent id. */
function toolOutputs(logDir: string, name: string): Map<string, string[]> {
  const outputs = new Map<string, string[]>();
  for (const history of readJournal(logDir).values()) {
    const ids = new Set<string>();
    for (const message of history.messages) {
      for (const block of contentBlocks(message)) {
        if (block.type === 'tool_use' && block.name === name) ids.add(block.id);
        if (block.type === 'tool_result' && ids.has(block.tool_use_id)) {
          const text =
            typeof block.content === 'string'
              ? block.content
              : (block.content ?? []).map((part) => ('text' in part ? part.text : '')).join('');
          outputs.set(history.id, [...(outputs.get(history.id) ?? []), text]);
        }
      }
    }
  }
  return outputs;
}

/** Every file under `dir`, read as text. */
function filesUnder(dir: string): { file: string; text: string }[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => {
      const file = path.join(entry.parentPath, entry.name);
      return { file, text: readFileSync(file, 'utf8') };
    });
}

const calls = (...names: string[]) => ({ calls: names.map((name) => ({ name, input: {} })) });

describe('per-spawn context', () => {
  let rig: Rig | undefined;

  afterEach(async () => {
    await rig?.close();
    rig = undefined;
  });

  it('reaches host tools as itself and worker tools as a clone, down to a grandchild', async () => {
    const host = recorder();
    rig = await startRig({
      threads: 1,
      maxDepth: 2,
      toolModules: [TEST_TOOLS, CONTEXT_TOOLS],
      hostTools: [host.tool],
    });
    const request = {
      tenant: 'acme',
      when: new Date(0),
      ids: new Map([['doc-1', 1]]),
      note: 'PRIVATE-NOTE-7731',
    };
    const group = rig.engine.group({ context: request });
    const result = await group.run({
      title: 'parent',
      prompt: scripted([
        calls('whose', 'whose_host'),
        { calls: [syncAgent('grandchild', [calls('whose', 'whose_host'), { reply: 'g done' }])] },
        { reply: 'p done' },
      ]),
    });
    expect(result.outcome).toBe('complete');
    // Host tools get the very object, the grandchild's too (it inherits its parent's).
    expect(host.seen.map((call) => call.depth)).toEqual([1, 2]);
    for (const call of host.seen) expect(call.context).toBe(request);
    // Worker tools get a structured clone: a Date and a Map survive it.
    const outputs = [...toolOutputs(rig.logDir, 'whose').values()].flat();
    expect(outputs).toHaveLength(2);
    for (const output of outputs) {
      expect(JSON.parse(output)).toEqual({ tenant: 'acme', date: true, ids: ['doc-1'] });
    }
    // The context itself is journaled nowhere (only what a tool chose to return).
    for (const { file, text } of filesUnder(rig.logDir)) {
      expect(text, file).not.toContain('PRIVATE-NOTE-7731');
    }
    // A spawn's own context wins over its group's.
    const own = await group.run({
      prompt: scripted([calls('whose_host'), { reply: 'done' }]),
      context: { tenant: 'other' },
    });
    expect(own.outcome).toBe('complete');
    expect(host.seen.at(-1)?.context).toEqual({ tenant: 'other' });
  });

  it('goes with its child and its key to the fresh worker it resumes on after a crash', async () => {
    const hold = hostGate('hold');
    rig = await startRig({
      threads: 1,
      maxCrashes: 1,
      toolModules: [TEST_TOOLS, CONTEXT_TOOLS],
      hostTools: [hold.tool],
    });
    const log = eventLog();
    const proxy = await recordingProxy(rig.model.url);
    const key = 'resumed-key-40d1c7a2';
    const waiter = rig.engine.spawn({
      title: 'waiter',
      prompt: scripted([calls('hold'), calls('whose'), { reply: 'waiter done' }], 'WAITER'),
      context: { tenant: 'resumed-co' },
      provider: { apiKey: key, baseURL: proxy.url },
      onEvent: log.onEvent,
    });
    await hold.entered();
    const culprit = await rig.engine.run({ prompt: scripted([calls('exit')]) });
    expect(culprit).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });
    hold.open();
    expect(await waiter.result).toMatchObject({ outcome: 'complete', text: 'waiter done' });
    expect(log.resumed()).toEqual([waiter.id]);
    const outputs = toolOutputs(rig.logDir, 'whose').get(waiter.id) ?? [];
    expect(outputs.map((output) => JSON.parse(output).tenant)).toEqual(['resumed-co']);
    // Its requests after the resume carried its key too: its first step, then its last two.
    const seen = proxy.requestsOf('WAITER');
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect(new Set(seen.map((request) => request.credential))).toEqual(new Set([key]));
    await proxy.close();
  });

  it('one a worker tool cannot be given is refused at spawn; host tools alone take anything', async () => {
    rig = await startRig({ threads: 1, toolModules: [CONTEXT_TOOLS] });
    const unclonable = { tenant: 'acme', log: () => undefined };
    expect(() => rig!.engine.spawn({ prompt: 'x', context: unclonable })).toThrow(UsageError);
    expect(() => rig!.engine.spawn({ prompt: 'x', context: unclonable })).toThrow(
      /^Expected `context` to be a value a structured clone can copy/,
    );
    expect(() => rig!.engine.group({ context: unclonable })).toThrow(/^Expected `group\.context` /);
    await rig.close();

    const host = recorder();
    rig = await startRig({ threads: 1, toolModules: [], hostTools: [host.tool] });
    const result = await rig.engine.run({
      prompt: scripted([calls('whose_host'), { reply: 'ok' }]),
      context: unclonable,
    });
    expect(result.outcome).toBe('complete');
    expect(host.seen[0]?.context).toBe(unclonable);
  });
});

describe('per-spawn and per-group credentials', () => {
  let rig: Rig | undefined;
  let proxy: RecordingProxy | undefined;

  afterEach(async () => {
    await rig?.close();
    await proxy?.close();
    rig = undefined;
    proxy = undefined;
  });

  it('each group’s key reaches its requests and the governor apart, and nothing else', async () => {
    const keyA = 'tenant-a-key-5f1d9c02b7e4';
    const keyB = 'tenant-b-key-88c3a1e0d6f2';
    rig = await startRig({ threads: 1, maxDepth: 2 });
    // The groups name their own server: a recording proxy in front of the scripted model.
    proxy = await recordingProxy(rig.model.url);
    const engine = rig.engine;
    const events: AgentEvent[] = [];
    const a = engine.group({ name: 'a', provider: { apiKey: keyA, baseURL: proxy.url } });
    const b = engine.group({ name: 'b', provider: { apiKey: keyB, baseURL: proxy.url } });
    const [resultA, resultB, grand] = await Promise.all([
      // A model that echoes its key: redacted in its reply, its tool input and its events.
      a.run({
        prompt: scripted(
          [{ calls: [{ name: 'echo', input: { value: keyA } }] }, { reply: `my key is ${keyA}` }],
          'KEY-A',
        ),
        onEvent: (event) => events.push(event),
      }),
      b.run({ prompt: scripted([{ reply: `B says ${keyB}` }], 'KEY-B') }),
      // Its own agents inherit its key.
      a.run({
        prompt: scripted(
          [{ calls: [syncAgent('KEY-A-GRANDCHILD', [{ reply: 'g' }])] }, { reply: 'parent' }],
          'KEY-A-PARENT',
        ),
      }),
    ]);
    expect([resultA.outcome, resultB.outcome, grand.outcome]).toEqual([
      'complete',
      'complete',
      'complete',
    ]);
    const credentials = (lead: string) => [
      ...new Set(proxy!.requestsOf(lead).map((request) => request.credential)),
    ];
    expect(credentials('KEY-A')).toEqual([keyA]);
    expect(credentials('KEY-B')).toEqual([keyB]);
    expect(credentials('Task KEY-A-GRANDCHILD.')).toEqual([keyA]);
    // Requests without a key of their own carry the environment's (the placeholder here).
    const plain = await engine
      .group({ provider: { baseURL: proxy.url } })
      .run({ prompt: scripted([{ reply: 'plain' }], 'KEY-NONE') });
    expect(plain.outcome).toBe('complete');
    expect(credentials('KEY-NONE')).toHaveLength(1);
    expect(credentials('KEY-NONE')).not.toContain(keyA);
    // The governor learns each key's limits apart: three accounts, one per key.
    const keys = new Set(engine.governor!.states().map((state) => state.key.split(' ')[0]));
    expect(keys.size).toBe(3);
    // A bad key is refused without being shown.
    let thrown = '';
    try {
      engine.spawn({ prompt: 'x', provider: { apiKey: `${keyA} ` } });
    } catch (error) {
      thrown = (error as Error).message;
    }
    expect(thrown).toMatch(/`provider\.apiKey`/);
    const logDir = rig.logDir;
    await rig.close();
    rig = undefined;
    const seen = [
      JSON.stringify([resultA, resultB, grand, plain]),
      JSON.stringify(events),
      thrown,
      ...filesUnder(logDir).map(({ text }) => text),
    ];
    expect(resultA.text).toBe('my key is [redacted]');
    expect(resultB.text).toBe('B says [redacted]');
    for (const text of seen) {
      expect(text).not.toContain(keyA);
      expect(text).not.toContain(keyB);
    }
  });

  it('refuses a key or a context in queue mode, which would store them in Redis', async () => {
    const { carriedOf } = await import('../src/main/carried.js');
    const rules = { workerTools: false, queued: true };
    expect(() =>
      carriedOf({ provider: { apiKey: 'a-key-of-a-tenant' } }, undefined, rules),
    ).toThrow(/^Expected no `provider\.apiKey` in queue mode/);
    expect(() => carriedOf({ context: { tenant: 'acme' } }, undefined, rules, 'group.')).toThrow(
      /^Expected no `group\.context` in queue mode/,
    );
    expect(carriedOf({}, undefined, rules)).toBeUndefined();
  });
});
