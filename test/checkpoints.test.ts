import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChildPool } from '../src/main/runners/local/pool.js';
import type { ChildSpec } from '../src/shared/child-spec.js';
import { newAgentId } from '../src/shared/ids.js';
import { DEFAULT_PROVIDER_CONFIG } from '../src/shared/provider/config.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { readTranscript, scripted, TEST_TOOLS, tempDir } from './helpers.js';

interface Write {
  replace: boolean;
  lines: string;
}

// Three steps: two tool steps, each committed with its results, then the reply.
const THREE_STEPS = scripted([
  { calls: [{ name: 'echo', input: { value: 'first' } }] },
  { calls: [{ name: 'echo', input: { value: 'second' } }] },
  { reply: 'done after three steps' },
]);

/** The transcript a copy made of `writes` holds: appends add, a replace starts over. */
function applyWrites(writes: readonly Write[]): string {
  let text = '';
  for (const write of writes) text = write.replace ? write.lines : text + write.lines;
  return text;
}

function parseLines(text: string): MessageParam[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as MessageParam);
}

describe('step checkpoints over the uplink', () => {
  let model: ScriptedModel;
  let pool: ChildPool;
  let logRoot: string;
  let requests = 0;

  beforeAll(async () => {
    model = await startScriptedModel({ port: 0 });
    model.on('request', () => {
      requests++;
    });
    logRoot = tempDir('cohort-checkpoints-');
    pool = new ChildPool({ threads: 1 });
    await pool.warm();
  });

  afterAll(async () => {
    await pool?.close();
    await model?.close();
  });

  function specFor(prompt: string, more: Partial<ChildSpec> = {}): ChildSpec {
    const id = newAgentId();
    return {
      id,
      title: 'checkpointed child',
      prompt,
      depth: 1,
      maxDepth: 1,
      generation: 0,
      provider: {
        ...DEFAULT_PROVIDER_CONFIG,
        baseURL: model.url,
        model: 'cohort-scripted',
        maxRetries: 0,
      },
      maxSteps: 10,
      replyCap: 10_000,
      logDir: path.join(logRoot, id),
      toolModules: [TEST_TOOLS],
      streamText: false,
      liveEvents: false,
      ...more,
    };
  }

  /** The transcript the journal holds for `result`'s agent, one JSON line per message. */
  function journaled(result: AgentResult): string {
    return readTranscript(result)
      .map((message) => `${JSON.stringify(message)}\n`)
      .join('');
  }

  /** Runs `spec` on the pool; its result, the writes delivered, and the requests it made. */
  async function run(spec: ChildSpec) {
    const writes: Write[] = [];
    const before = requests;
    const capabilities = { checkpoint: (write: Write) => writes.push(write) };
    const result = await pool.spawn(spec, { capabilities }).result;
    return { result, writes, requests: requests - before };
  }

  it('the writes of a checkpointed child, applied in order, are its journaled transcript byte for byte', async () => {
    const {
      result,
      writes,
      requests: made,
    } = await run(specFor(THREE_STEPS, { checkpoint: true }));
    expect(result).toMatchObject({ outcome: 'complete', text: 'done after three steps' });
    expect(result.usage.steps).toBe(3);
    expect(made).toBe(3);
    const onDisk = journaled(result);
    expect(applyWrites(writes)).toBe(onDisk);
    // The prompt, then each step's response (before its tools run) and its results: whole JSON
    // lines, appended, never replaced.
    expect(writes.map((write) => write.replace)).toEqual(Array(7).fill(false));
    expect(writes.map((write) => parseLines(write.lines).length)).toEqual(Array(7).fill(1));
    for (const write of writes) {
      expect(write.lines.endsWith('\n')).toBe(true);
      for (const line of write.lines.slice(0, -1).split('\n')) {
        expect(() => JSON.parse(line)).not.toThrow();
      }
    }
  });

  it('a child without `checkpoint` sends no write', async () => {
    const { result, writes } = await run(specFor(THREE_STEPS));
    expect(result.outcome).toBe('complete');
    expect(result.usage.steps).toBe(3);
    expect(writes).toEqual([]);
  });

  it('a child resumed in a fresh run from the writes of its first two steps takes only the third', async () => {
    const first = await run(specFor(THREE_STEPS, { checkpoint: true }));
    expect(first.result.outcome).toBe('complete');
    // The prompt's write and the two tool steps' (two each): the copy after the 2nd step.
    const held = applyWrites(first.writes.slice(0, 5));
    expect(parseLines(held).filter((message) => message.role === 'assistant')).toHaveLength(2);

    const resumed = await run(specFor(THREE_STEPS, { checkpoint: true, resume: { lines: held } }));

    expect(resumed.result).toMatchObject({ outcome: 'complete', text: 'done after three steps' });
    expect(resumed.result.usage.steps).toBe(3);
    // Only the third step went to the model.
    expect(resumed.requests).toBe(1);
    // Its first write replaces the copy with what it restored; then the third step is appended.
    expect(resumed.writes[0]).toEqual({ replace: true, lines: held });
    expect(resumed.writes.slice(1).map((write) => write.replace)).toEqual([false, false]);
    const onDisk = journaled(resumed.result);
    expect(applyWrites(resumed.writes)).toBe(onDisk);
    // The same conversation as the run that was never interrupted.
    expect(onDisk).toBe(journaled(first.result));
  });
});
