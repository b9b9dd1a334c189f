import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { TreeLedger } from '../src/main/tree-budget.js';
import { BUDGET_KINDS, type BudgetKind, type StepSpend } from '../src/shared/budget.js';
import {
  BudgetMeter,
  budgetNotice,
  budgetNoticeKind,
  checkBudget,
  mergeBudgets,
} from '../src/shared/budget-meter.js';
import { UsageError } from '../src/shared/errors.js';
import type { LoopOptions } from '../src/shared/loop/agent-loop.js';
import { spend } from '../src/shared/loop/step-request.js';
import {
  checkPriceTable,
  costUsd,
  DEFAULT_PRICES,
  priceOf,
  priceTable,
} from '../src/shared/prices.js';
import { emptyUsage } from '../src/shared/result.js';

const STEP: StepSpend = { inputTokens: 100, outputTokens: 10, costUsd: 0.01 };

/** A clock the test moves by hand. */
function manualClock(start = 1_000): { now: () => number; advance: (ms: number) => void } {
  let time = start;
  return { now: () => time, advance: (ms) => (time += ms) };
}

describe('prices', () => {
  it('picks the longest matching prefix', () => {
    expect(priceOf('claude-sonnet-4-5-20250929')).toEqual({ inputPerMTok: 3, outputPerMTok: 15 });
    expect(priceOf('claude-opus-4-1-20250805')).toEqual({ inputPerMTok: 15, outputPerMTok: 75 });
    expect(priceOf('claude-opus-4-20250514')).toEqual({ inputPerMTok: 15, outputPerMTok: 75 });
    expect(priceOf('claude-opus-4-5-20251101')).toEqual({ inputPerMTok: 5, outputPerMTok: 25 });
    expect(priceOf('claude-opus-5')).toEqual({ inputPerMTok: 5, outputPerMTok: 25 });
    expect(priceOf('claude-haiku-4-5')).toEqual({ inputPerMTok: 1, outputPerMTok: 5 });
    expect(priceOf('claude-3-5-haiku-20241022')).toEqual({ inputPerMTok: 0.8, outputPerMTok: 4 });
    expect(priceOf('claude-3-haiku-20240307')).toEqual({ inputPerMTok: 0.25, outputPerMTok: 1.25 });
    expect(priceOf('claude-haiku-5')).toEqual({ inputPerMTok: 1, outputPerMTok: 5 });
  });

  it('has no price for an unknown model, nor for Object.prototype names', () => {
    expect(priceOf('gpt-4o')).toBeUndefined();
    expect(priceOf('constructor')).toBeUndefined();
    expect(priceOf('')).toBeUndefined();
  });

  it('matches a brute-force longest prefix for any table and model', () => {
    const price = fc.record({ inputPerMTok: fc.nat(100), outputPerMTok: fc.nat(100) });
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ minLength: 1, maxLength: 4 }), price),
        fc.string({ maxLength: 6 }),
        (table, model) => {
          const keys = Object.keys(table).filter((key) => model.startsWith(key));
          const longest = keys.sort((first, second) => second.length - first.length)[0];
          expect(priceOf(model, table)).toBe(longest === undefined ? undefined : table[longest]);
        },
      ),
    );
  });

  it('costs tokens per million', () => {
    const sonnet = { inputPerMTok: 3, outputPerMTok: 15 };
    expect(costUsd({ inputTokens: 1_000_000, outputTokens: 0 }, sonnet)).toBe(3);
    expect(costUsd({ inputTokens: 2000, outputTokens: 1000 }, sonnet)).toBeCloseTo(0.021, 12);
    expect(costUsd({ inputTokens: 0, outputTokens: 0 }, sonnet)).toBe(0);
  });

  it('overrides one key and keeps the rest', () => {
    const table = priceTable({
      'claude-sonnet': { inputPerMTok: 2, outputPerMTok: 10 },
      'my-model': { inputPerMTok: 0, outputPerMTok: 0 },
    });
    expect(priceOf('claude-sonnet-4-5', table)).toEqual({ inputPerMTok: 2, outputPerMTok: 10 });
    expect(priceOf('claude-haiku-4-5', table)).toEqual({ inputPerMTok: 1, outputPerMTok: 5 });
    expect(priceOf('my-model-large', table)).toEqual({ inputPerMTok: 0, outputPerMTok: 0 });
    // The defaults themselves are untouched, and cannot be changed by accident.
    expect(priceOf('claude-sonnet-4-5')).toEqual({ inputPerMTok: 3, outputPerMTok: 15 });
    expect(Object.isFrozen(DEFAULT_PRICES)).toBe(true);
    expect(priceTable()).toEqual(DEFAULT_PRICES);
  });

  it('checks a price table read from a JSON file', () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'cohort-prices-')), 'prices.json');
    writeFileSync(
      file,
      '{"claude-sonnet": {"inputPerMTok": 2.5, "outputPerMTok": 12}, "__proto__": {"inputPerMTok": 1, "outputPerMTok": 1}}',
    );
    const table = checkPriceTable('prices', JSON.parse(readFileSync(file, 'utf8')));
    expect(table?.['claude-sonnet']).toEqual({ inputPerMTok: 2.5, outputPerMTok: 12 });
    // A `__proto__` key stays a plain entry; it does not become the table's prototype.
    expect(Object.getPrototypeOf(table)).toBe(Object.prototype);
    expect(Object.keys(priceTable(table))).toContain('__proto__');
    expect(priceOf('__proto__x', priceTable(table))).toEqual({ inputPerMTok: 1, outputPerMTok: 1 });
  });

  it.each([
    [[], /Expected `prices` to be an object of model prefixes to prices, got `\[\]` \(array\)/],
    [{ '': { inputPerMTok: 1, outputPerMTok: 1 } }, /non-empty model prefixes.*empty key/],
    [
      { x: 3 },
      /Expected `prices.x` to be an object with `inputPerMTok` and `outputPerMTok`, got `3` \(number\)/,
    ],
    [
      { x: { inputPerMTok: 1 } },
      /Expected `prices.x.outputPerMTok` to be a finite number .*, got nothing/,
    ],
    [{ x: { inputPerMTok: -1, outputPerMTok: 1 } }, /`prices.x.inputPerMTok`.*got `-1` \(number\)/],
    [{ x: { inputPerMTok: '1', outputPerMTok: 1 } }, /`prices.x.inputPerMTok`.*got `1` \(string\)/],
    [
      { x: { inputPerMTok: 1, outputPerMTok: Number.POSITIVE_INFINITY } },
      /`prices.x.outputPerMTok`/,
    ],
    [
      { x: { inputPerMTok: 1, outputPerMTok: 1, cachePerMTok: 1 } },
      /only the keys .*got `cachePerMTok`/,
    ],
  ])('refuses a bad price table %j', (value, message) => {
    expect(() => checkPriceTable('prices', value)).toThrow(UsageError);
    expect(() => checkPriceTable('prices', value)).toThrow(message);
  });

  it('accepts nothing and free models', () => {
    expect(checkPriceTable('prices', undefined)).toBeUndefined();
    expect(checkPriceTable('prices', { local: { inputPerMTok: 0, outputPerMTok: 0 } })).toEqual({
      local: { inputPerMTok: 0, outputPerMTok: 0 },
    });
  });
});

describe('BudgetMeter', () => {
  it.each([
    ['inputTokens', { inputTokens: 300 }],
    ['outputTokens', { outputTokens: 30 }],
    ['usd', { usd: 0.046875 }],
    ['steps', { steps: 3 }],
  ] as const)('reaches %s exactly at its limit', (kind, budget) => {
    // A cost that adds exactly in binary floating point, so the test is about `>=`, not rounding.
    const step = { ...STEP, costUsd: 0.015625 };
    const meter = new BudgetMeter({ budget });
    meter.spend(step);
    meter.spend(step);
    expect(meter.exceeded()).toBeUndefined();
    meter.spend(step);
    expect(meter.exceeded()).toBe(kind);
  });

  it('reaches time exactly at timeMs after the start', () => {
    const clock = manualClock();
    const meter = new BudgetMeter({ budget: { timeMs: 500 }, now: clock.now });
    clock.advance(499);
    expect(meter.exceeded()).toBeUndefined();
    clock.advance(1);
    expect(meter.exceeded()).toBe('time');
  });

  it('counts time from an explicit start', () => {
    const clock = manualClock(10_000);
    const meter = new BudgetMeter({ budget: { timeMs: 500 }, startedAt: 9_600, now: clock.now });
    expect(meter.exceeded()).toBeUndefined();
    clock.advance(100);
    expect(meter.exceeded()).toBe('time');
  });

  it('names the first kind in BUDGET_KINDS order when several are reached', () => {
    const meter = new BudgetMeter({ budget: { steps: 1, outputTokens: 5, usd: 0.001 } });
    meter.spend(STEP);
    expect(meter.exceeded()).toBe('outputTokens');
  });

  it('adds spend, counts steps, and tells onSpend of each step', () => {
    const seen: StepSpend[] = [];
    const meter = new BudgetMeter({ onSpend: (spend) => seen.push(spend) });
    meter.spend(STEP);
    meter.spend({ inputTokens: 1, outputTokens: 2, costUsd: 0 });
    expect(seen).toEqual([STEP, { inputTokens: 1, outputTokens: 2, costUsd: 0 }]);
    expect(meter.spent).toEqual({ inputTokens: 101, outputTokens: 12, costUsd: 0.01, steps: 2 });
    // No budget: spending is tracked, nothing is ever exceeded on its own account.
    expect(meter.exceeded()).toBeUndefined();
    meter.spent.steps = 99;
    expect(meter.spent.steps).toBe(2);
  });

  it('reports a tree budget after its own limits, and keeps the first word', () => {
    const meter = new BudgetMeter({ budget: { steps: 2 } });
    meter.spend(STEP);
    expect(meter.exceeded()).toBeUndefined();
    meter.treeSpent('usd');
    meter.treeSpent('time');
    expect(meter.exceeded()).toBe('usd');
    meter.spend(STEP);
    expect(meter.exceeded()).toBe('steps');
  });
});

describe('checkBudget', () => {
  it('accepts every field and returns only those set', () => {
    const budget = { inputTokens: 1, outputTokens: 2, usd: 0.5, steps: 3, timeMs: 2 ** 31 - 1 };
    expect(checkBudget('budget', { ...budget, tree: true })).toEqual({ ...budget, tree: true });
    expect(checkBudget('budget', { usd: 1, steps: undefined })).toEqual({ usd: 1 });
    expect(checkBudget('budget', {})).toEqual({});
    expect(checkBudget('budget', undefined)).toBeUndefined();
  });

  it.each([
    [null, /Expected `budget` to be an object of budget limits, got `null` \(null\)/],
    [3, /Expected `budget` to be an object of budget limits, got `3` \(number\)/],
    [
      { usd: 1, maxUsd: 2, step: 1 },
      /Expected `budget` to have only the keys `inputTokens`.*`tree`, got `maxUsd`, `step`$/,
    ],
    [
      { inputTokens: 0 },
      /Expected `budget.inputTokens` to be a whole number from 1 and up, got `0` \(number\)/,
    ],
    [
      { outputTokens: 1.5 },
      /Expected `budget.outputTokens` to be a whole number from 1 and up, got `1.5`/,
    ],
    [
      { steps: '3' },
      /Expected `budget.steps` to be a whole number from 1 and up, got `3` \(string\)/,
    ],
    [
      { usd: 0 },
      /Expected `budget.usd` to be a finite number of dollars above 0, got `0` \(number\)/,
    ],
    [{ usd: Number.NaN }, /Expected `budget.usd` to be .*, got `NaN` \(number\)/],
    [
      { timeMs: 2 ** 31 },
      /Expected `budget.timeMs` to be a whole number of milliseconds from 1 to 2147483647/,
    ],
    [{ timeMs: 0 }, /`budget.timeMs`.*got `0` \(number\)/],
    [{ tree: 'yes' }, /Expected `budget.tree` to be true or false, got `yes` \(string\)/],
  ])('refuses %j', (value, message) => {
    expect(() => checkBudget('budget', value)).toThrow(UsageError);
    expect(() => checkBudget('budget', value)).toThrow(message);
  });
});

describe('mergeBudgets', () => {
  it('replaces field by field', () => {
    expect(mergeBudgets({ usd: 1, steps: 10 }, { steps: 5, tree: true })).toEqual({
      usd: 1,
      steps: 5,
      tree: true,
    });
    expect(mergeBudgets(undefined, { steps: 5 })).toEqual({ steps: 5 });
    expect(mergeBudgets({ steps: 5 }, undefined)).toEqual({ steps: 5 });
    expect(mergeBudgets(undefined, undefined)).toBeUndefined();
    // An untyped caller's explicit undefined does not erase the base limit.
    expect(mergeBudgets({ usd: 1 }, JSON.parse('{}') as { usd?: number })).toEqual({ usd: 1 });
    expect(mergeBudgets({ usd: 1 }, { usd: undefined } as unknown as { usd: number })).toEqual({
      usd: 1,
    });
  });

  it('does not change its inputs', () => {
    const base = { usd: 1 };
    mergeBudgets(base, { usd: 2 });
    expect(base).toEqual({ usd: 1 });
  });
});

describe('budget notice', () => {
  it.each(BUDGET_KINDS)('round-trips %s and tells the agent to reply now', (kind) => {
    const notice = budgetNotice(kind);
    expect(budgetNoticeKind(notice)).toBe(kind);
    expect(notice).toMatch(/last turn/);
    expect(notice).toMatch(/only the `reply` tool/);
    expect(notice).toMatch(/Call `reply` now with the best result/);
  });

  it('does not recognise other text', () => {
    expect(budgetNoticeKind('hello')).toBeUndefined();
    expect(budgetNoticeKind(`Note: ${budgetNotice('usd')}`)).toBeUndefined();
    expect(budgetNoticeKind('[budget spent: money] …')).toBeUndefined();
    expect(budgetNoticeKind('[budget spent: usd')).toBeUndefined();
  });
});

describe('TreeLedger', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function recorder(): { heard: string[]; member: (id: string) => (which: BudgetKind) => void } {
    const heard: string[] = [];
    return { heard, member: (id) => (which) => heard.push(`${id}:${which}`) };
  }

  it('adds all members steps and tells each member once', () => {
    const ledger = new TreeLedger({ budget: { steps: 3 } });
    const { heard, member } = recorder();
    ledger.join('a', member('a'));
    ledger.join('b', member('b'));
    ledger.add(STEP);
    ledger.add(STEP);
    expect(heard).toEqual([]);
    expect(ledger.exceeded()).toBeUndefined();
    ledger.add(STEP);
    expect(heard).toEqual(['a:steps', 'b:steps']);
    ledger.add(STEP);
    expect(heard).toEqual(['a:steps', 'b:steps']);
    expect(ledger.exceeded()).toBe('steps');
    expect(ledger.spent).toEqual({ inputTokens: 400, outputTokens: 40, costUsd: 0.04, steps: 4 });
  });

  it('adds to ancestors, and an ancestor spent tells its descendants members', () => {
    const root = new TreeLedger({ budget: { inputTokens: 250 } });
    const middle = new TreeLedger({ budget: { steps: 100 }, parent: root });
    const leaf = new TreeLedger({ budget: {}, parent: middle });
    const { heard, member } = recorder();
    root.join('r', member('r'));
    middle.join('m', member('m'));
    leaf.join('l', member('l'));
    leaf.add(STEP);
    middle.add(STEP);
    expect(root.spent.steps).toBe(2);
    expect(middle.spent.steps).toBe(2);
    expect(leaf.spent.steps).toBe(1);
    expect(heard).toEqual([]);
    leaf.add(STEP);
    expect(heard).toEqual(['r:inputTokens', 'm:inputTokens', 'l:inputTokens']);
    expect(leaf.exceeded()).toBe('inputTokens');
    expect(middle.exceeded()).toBe('inputTokens');
  });

  it('does not tell an ancestor of a spent descendant', () => {
    const root = new TreeLedger({ budget: { steps: 100 } });
    const child = new TreeLedger({ budget: { steps: 1 }, parent: root });
    const { heard, member } = recorder();
    root.join('r', member('r'));
    child.join('c', member('c'));
    child.add(STEP);
    expect(heard).toEqual(['c:steps']);
    expect(root.exceeded()).toBeUndefined();
  });

  it('tells a member that joins a spent ledger, after join returns', async () => {
    const root = new TreeLedger({ budget: { steps: 1 } });
    const child = new TreeLedger({ budget: {}, parent: root });
    const { heard, member } = recorder();
    root.join('a', member('a'));
    root.add(STEP);
    root.join('b', member('b'));
    child.join('c', member('c'));
    child.join('gone', member('gone'));
    child.leave('gone');
    expect(heard).toEqual(['a:steps']);
    await Promise.resolve();
    expect(heard).toEqual(['a:steps', 'b:steps', 'c:steps']);
    child.add(STEP);
    await Promise.resolve();
    expect(heard).toEqual(['a:steps', 'b:steps', 'c:steps']);
  });

  it('tells the other members when one callback throws, then throws', () => {
    const ledger = new TreeLedger({ budget: { steps: 1 } });
    const { heard, member } = recorder();
    ledger.join('bad', () => {
      throw new Error('callback failed');
    });
    ledger.join('good', member('good'));
    expect(() => ledger.add(STEP)).toThrow('callback failed');
    expect(heard).toEqual(['good:steps']);
  });

  it('notices a time limit without a step, through a timer cleared when the last member leaves', () => {
    vi.useFakeTimers();
    // Date is faked with the timers, so it is the clock that moves with them.
    const root = new TreeLedger({ budget: { timeMs: 1_000 }, now: Date.now });
    const child = new TreeLedger({ budget: { timeMs: 60_000 }, parent: root, now: Date.now });
    const { heard, member } = recorder();
    expect(vi.getTimerCount()).toBe(0);
    child.join('c', member('c'));
    // The root's timer too: its time limit must reach the child's member.
    expect(vi.getTimerCount()).toBe(2);
    child.leave('c');
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(400);
    child.join('c', member('c'));
    expect(vi.getTimerCount()).toBe(2);
    vi.advanceTimersByTime(599);
    expect(heard).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(heard).toEqual(['c:time']);
    expect(child.exceeded()).toBe('time');
    // The root is spent for good: its timer is gone, the child's still runs.
    expect(vi.getTimerCount()).toBe(1);
    child.leave('c');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('re-arms the timer for what is left when it fires early', () => {
    vi.useFakeTimers();
    const clock = manualClock();
    const ledger = new TreeLedger({ budget: { timeMs: 100 }, now: clock.now });
    const { heard, member } = recorder();
    ledger.join('a', member('a'));
    // The timer fires, but the ledger's clock says only 60 ms went by.
    clock.advance(60);
    vi.advanceTimersByTime(100);
    expect(heard).toEqual([]);
    expect(vi.getTimerCount()).toBe(1);
    clock.advance(40);
    vi.advanceTimersByTime(40);
    expect(heard).toEqual(['a:time']);
  });

  it('does not keep the process alive with its timer', () => {
    // Real timers, watched as they are made: the ledger makes one, and it is unref'd.
    const made: NodeJS.Timeout[] = [];
    const real = globalThis.setTimeout;
    const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((
      ...args: Parameters<typeof setTimeout>
    ) => {
      const timer = real(...args);
      made.push(timer);
      return timer;
    }) as typeof setTimeout);
    try {
      const ledger = new TreeLedger({ budget: { timeMs: 60_000 } });
      ledger.join('a', () => {});
      expect(made).toHaveLength(1);
      expect(made[0]!.hasRef()).toBe(false);
      ledger.leave('a');
    } finally {
      spy.mockRestore();
    }
  });

  it('refuses a member that joins twice', () => {
    const ledger = new TreeLedger({ budget: {} });
    ledger.join('a', () => {});
    expect(() => ledger.join('a', () => {})).toThrow(/joined twice/);
  });
});

describe('spend (one step into the usage and the budget)', () => {
  const sonnet = { inputPerMTok: 3, outputPerMTok: 15 };
  /** What `spend` reads of the loop's options: the price and the budget. */
  function options(price: typeof sonnet | undefined, budget?: BudgetMeter): LoopOptions {
    return { price, budget } as Partial<LoopOptions> as LoopOptions;
  }
  const cached = {
    inputTokens: 1_000,
    outputTokens: 100,
    cacheReadTokens: 20_000,
    cacheWriteTokens: 2_000,
  };

  it('adds the cache counts, prices them at the cache rates, and keeps what caching saved', () => {
    const meter = new BudgetMeter();
    const usage = emptyUsage();
    spend(options(sonnet, meter), usage, cached);
    spend(options(sonnet, meter), usage, cached);
    expect(usage).toMatchObject({
      inputTokens: 2_000,
      outputTokens: 200,
      cacheReadTokens: 40_000,
      cacheWriteTokens: 4_000,
    });
    // Per step: 1,000 × $3 + 100 × $15 + 20,000 × $0.30 + 2,000 × $3.75, per million.
    expect(usage.costUsd).toBeCloseTo(2 * 0.018, 12);
    // Without the cache the same step is 23,000 × $3 + 100 × $15 per million: $0.0705.
    expect(usage.cacheSavedUsd).toBeCloseTo(2 * (0.0705 - 0.018), 12);
    // A budget counts every input token the model read, and dollars at the cache rates.
    expect(meter.spent).toEqual({
      inputTokens: 46_000,
      outputTokens: 200,
      costUsd: usage.costUsd,
      steps: 2,
    });
  });

  it('keeps a negative saving when a write was never read back', () => {
    const usage = emptyUsage();
    spend(options(sonnet), usage, { ...cached, cacheReadTokens: 0 });
    // The write cost a quarter more than plain input: 2,000 × $0.75 per million.
    expect(usage.cacheSavedUsd).toBeCloseTo(-0.0015, 12);
  });

  it('sets no saving without a price, nor when nothing was read or written', () => {
    const unpriced = emptyUsage();
    spend(options(undefined), unpriced, cached);
    expect(unpriced).not.toHaveProperty('costUsd');
    expect(unpriced).not.toHaveProperty('cacheSavedUsd');
    const uncached = emptyUsage();
    spend(options(sonnet), uncached, { ...cached, cacheReadTokens: 0, cacheWriteTokens: 0 });
    expect(uncached.costUsd).toBeCloseTo(0.0045, 12);
    expect(uncached).not.toHaveProperty('cacheSavedUsd');
  });
});
