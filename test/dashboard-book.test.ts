import { describe, expect, it } from 'vitest';
import { AgentBook } from '../src/main/dashboard/agent-book.js';
import { FailureBook } from '../src/main/dashboard/failure-book.js';
import { RateSeries } from '../src/main/dashboard/series.js';
import type { ChildHandle, ChildStatus } from '../src/main/runners/spawned-child.js';
import { type AgentResult, emptyUsage } from '../src/shared/result.js';

// The dashboard's book keeping, in-process: the subtree sums, the totals, pruning, failures and
// the rates. The handles here are plain objects with a status and a result to settle by hand,
// the part of a child the book reads; dashboard.test.ts runs the same book on real children.

function child(id: string): {
  handle: ChildHandle;
  settle(result: Partial<AgentResult>): void;
  status: ChildStatus;
} {
  let resolve!: (result: AgentResult) => void;
  const result = new Promise<AgentResult>((done) => {
    resolve = done;
  });
  const made = {
    status: 'queued' as ChildStatus,
    handle: undefined as unknown as ChildHandle,
    settle(partial: Partial<AgentResult>) {
      made.status = 'settled';
      resolve({
        id,
        title: id,
        outcome: 'complete',
        text: '',
        truncated: false,
        elapsedMs: 1,
        generation: 0,
        usage: emptyUsage(),
        ...partial,
      });
    },
  };
  made.handle = {
    id,
    title: id,
    spawnedAt: 0,
    result,
    get status() {
      return made.status;
    },
    cancel: () => false,
  };
  return made;
}

const spawnOf = (id: string, parent: string | undefined, depth: number, handle: ChildHandle) => ({
  id,
  title: `task ${id}`,
  depth,
  parent,
  model: 'claude-sonnet-4-5',
  handle,
});

const usage = (input: number, output: number) => ({
  ...emptyUsage(),
  inputTokens: input,
  outputTokens: output,
  providerCalls: 1,
  steps: 1,
});

describe('the agent book', () => {
  it('adds steps and results to the row, its ancestors’ subtrees and the totals, without counting twice', async () => {
    const book = new AgentBook();
    const parent = child('a');
    const kid = child('b');
    book.spawned(spawnOf('a', undefined, 1, parent.handle));
    book.spawned(spawnOf('b', 'a', 2, kid.handle));
    expect(book.totals).toMatchObject({ agents: 2, queued: 2, running: 0 });
    kid.status = 'running';
    book.refreshStatuses();
    expect(book.totals).toMatchObject({ queued: 1, running: 1 });
    book.stepped('b', {
      inputTokens: 100,
      outputTokens: 10,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    });
    expect(book.row('b')!.usage).toMatchObject({ inputTokens: 100, steps: 1 });
    expect(book.row('a')!.subtree).toMatchObject({ agents: 2, tokens: 110 });
    // The result's usage is the whole: the step already counted is not counted again.
    kid.settle({ usage: { ...usage(250, 30), steps: 2, providerCalls: 3, costUsd: 0.5 } });
    await kid.handle.result;
    await Promise.resolve();
    expect(book.row('b')).toMatchObject({ status: 'settled', outcome: 'complete', costUsd: 0.5 });
    expect(book.row('b')!.usage).toMatchObject({
      inputTokens: 250,
      outputTokens: 30,
      steps: 2,
      providerCalls: 3,
    });
    expect(book.row('a')!.subtree).toMatchObject({ agents: 2, tokens: 280 });
    expect(book.row('a')!.subtree.costUsd).toBeCloseTo(0.5, 10);
    expect(book.totals.usage).toMatchObject({
      inputTokens: 250,
      outputTokens: 30,
      providerCalls: 3,
      steps: 2,
    });
    expect(book.totals.costUsd).toBeCloseTo(0.5, 10);
    expect(book.counters).toEqual({ calls: 3, inputTokens: 250, outputTokens: 30 });
    expect(book.totals).toMatchObject({
      queued: 1,
      running: 0,
      settled: 1,
      outcomes: { complete: 1 },
    });
    const { rows } = book.takeChanged();
    expect(rows.map((row) => row.id).sort()).toEqual(['a', 'b']);
    expect(book.takeChanged()).toEqual({ rows: [], removed: [] });
  });

  it('prices a step at the model’s price while it runs', () => {
    const book = new AgentBook();
    const run = child('a');
    book.spawned(spawnOf('a', undefined, 1, run.handle));
    book.stepped('a', {
      inputTokens: 1_000_000,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    });
    expect(book.row('a')!.costUsd).toBeGreaterThan(0);
    expect(book.totals.costUsd).toBe(book.row('a')!.costUsd);
  });

  it('drops the oldest settled rows past maxAgents, keeps the live ones, and says which it dropped', async () => {
    const book = new AgentBook(undefined, 10);
    const children = Array.from({ length: 10 }, (_, index) => child(`c${index}`));
    for (const [index, made] of children.entries()) {
      book.spawned(spawnOf(`c${index}`, undefined, 1, made.handle));
    }
    // c0 stays live; c1…c9 settle.
    for (const made of children.slice(1)) made.settle({});
    await Promise.all(children.slice(1).map((made) => made.handle.result));
    await Promise.resolve();
    book.takeChanged();
    const late = child('late');
    book.spawned(spawnOf('late', undefined, 1, late.handle));
    expect(book.size).toBe(10);
    expect(book.row('c0')).toBeDefined();
    expect(book.row('c1')).toBeUndefined();
    const { removed } = book.takeChanged();
    expect(removed).toEqual(['c1']);
    expect(book.totals).toMatchObject({ agents: 11, settled: 9 });
  });
});

describe('the agent book, at its edges', () => {
  it('keeps a settled row whose descendants still run, so their spend reaches the rows above it', async () => {
    const book = new AgentBook(undefined, 10);
    const root = child('r');
    const middle = child('m');
    const leaf = child('l');
    book.spawned(spawnOf('r', undefined, 1, root.handle));
    book.spawned(spawnOf('m', 'r', 2, middle.handle));
    book.spawned(spawnOf('l', 'm', 3, leaf.handle));
    middle.settle({});
    await middle.handle.result;
    await Promise.resolve();
    // Past the cap, settled rows go, the oldest first; `m` has a live child and stays.
    const others = Array.from({ length: 12 }, (_, index) => child(`o${index}`));
    for (const [index, made] of others.entries()) {
      book.spawned(spawnOf(`o${index}`, undefined, 1, made.handle));
      made.settle({});
      await made.handle.result;
      await Promise.resolve();
    }
    expect(book.row('m')).toBeDefined();
    book.stepped('l', {
      inputTokens: 5_000,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    });
    expect(book.row('r')!.subtree.tokens).toBe(5_000);
  });

  it('adds a resumed agent’s second run to its first, never taking from the totals', async () => {
    const book = new AgentBook();
    const first = child('a');
    book.spawned(spawnOf('a', undefined, 1, first.handle));
    first.settle({ outcome: 'cancelled', usage: { ...usage(1_000, 10), costUsd: 0.01 } });
    await first.handle.result;
    await Promise.resolve();
    const second = child('a');
    book.spawned(spawnOf('a', undefined, 1, second.handle));
    expect(book.totals).toMatchObject({
      agents: 1,
      settled: 0,
      queued: 1,
      outcomes: { cancelled: 0 },
    });
    second.settle({ usage: { ...usage(300, 5), costUsd: 0.003 } });
    await second.handle.result;
    await Promise.resolve();
    expect(book.row('a')!.usage).toMatchObject({ inputTokens: 1_300, outputTokens: 15, steps: 2 });
    expect(book.row('a')!.costUsd).toBeCloseTo(0.013, 10);
    expect(book.totals.usage.inputTokens).toBe(1_300);
    expect(book.counters.inputTokens).toBe(1_300);
    expect(book.totals).toMatchObject({ settled: 1, outcomes: { cancelled: 0, complete: 1 } });
  });

  it('settles a child that had settled before it was seen', async () => {
    const book = new AgentBook();
    const early = child('e');
    early.settle({ outcome: 'cancelled' });
    book.spawned(spawnOf('e', undefined, 1, early.handle));
    await early.handle.result;
    await Promise.resolve();
    expect(book.row('e')).toMatchObject({ status: 'settled', outcome: 'cancelled' });
    expect(book.totals).toMatchObject({ running: 0, queued: 0, settled: 1 });
  });
});

describe('the failure book', () => {
  it('groups by code then reason, the commonest first, with at most five agents a reason', () => {
    const failures = new FailureBook();
    for (let index = 0; index < 7; index++) failures.add('rate_limit', 'too many', `a${index}`);
    failures.add('auth', 'bad key', 'b0');
    failures.add('rate_limit', 'other', 'c0');
    const groups = failures.groups();
    expect(groups.map((group) => [group.code, group.count])).toEqual([
      ['rate_limit', 8],
      ['auth', 1],
    ]);
    expect(groups[0]!.reasons[0]).toEqual({
      reason: 'too many',
      count: 7,
      agents: ['a0', 'a1', 'a2', 'a3', 'a4'],
    });
    failures.forget('auth', 'bad key', 'b0');
    expect(failures.groups().map((group) => group.code)).toEqual(['rate_limit']);
  });
});

describe('the rate series', () => {
  it('counts each point over the minute before it', () => {
    const series = new RateSeries({ calls: 0, inputTokens: 0, outputTokens: 0 }, 0);
    for (let t = 5_000; t <= 120_000; t += 5_000) {
      // 10 calls and 1,000 input tokens every 5 s: 120 calls and 12,000 tokens a minute.
      series.sample({ calls: t / 500, inputTokens: t / 5, outputTokens: 0 }, t);
    }
    const points = series.points();
    expect(points.at(-1)).toEqual({
      t: 120_000,
      callsPerMinute: 120,
      inputTokensPerMinute: 12_000,
      outputTokensPerMinute: 0,
    });
    expect(points[0]).toMatchObject({ t: 5_000, callsPerMinute: 120 });
  });
});
