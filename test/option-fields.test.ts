import { describe, expect, it } from 'vitest';
import { helpLines, parseOptions, wholeNumberFlag } from '../src/cli/flags.js';
import { flagMessage, OPTION_FLAGS } from '../src/cli/option-flags.js';
import { checkBudget } from '../src/shared/budget-meter.js';
import { UsageError } from '../src/shared/errors.js';
import { checkGovernorOptions, GOVERNOR_FIELDS } from '../src/shared/governor/options.js';
import { wholeNumber } from '../src/shared/option-schema.js';

/** The message `check` throws, as a UsageError; fails the test when it throws nothing else. */
function refusal(check: () => unknown): string {
  try {
    check();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error('expected a refusal, got none');
}

describe('the governor options, declared as fields', () => {
  it('lists every option, enabled first, when one is unknown', () => {
    expect(refusal(() => checkGovernorOptions({ rpm: 5, foo: 1 }))).toBe(
      'Expected only the governor options `enabled`, `concurrencyControl`, `rpm`, `itpm`, `otpm`, `maxConcurrency`, `initialConcurrency`, `patienceMs`, `state`, got `foo`',
    );
  });

  it('checks concurrencyControl before enabled, and each limit in its own words', () => {
    expect(refusal(() => checkGovernorOptions({ enabled: 'x', concurrencyControl: 'y' }))).toBe(
      'Expected `governor.concurrencyControl` to be one of aimd, gradient, fixed, got `y` (string)',
    );
    expect(refusal(() => checkGovernorOptions({ enabled: 'x' }))).toBe(
      'Expected `governor.enabled` to be true or false, got `x` (string)',
    );
    expect(refusal(() => checkGovernorOptions({ rpm: 1.5 }))).toBe(
      'Expected `governor.rpm` to be a whole number from 1 and up, got `1.5` (number)',
    );
    expect(refusal(() => checkGovernorOptions({ patienceMs: -1 }))).toBe(
      'Expected `governor.patienceMs` to be a whole number of milliseconds from 0 to 2147483647 (about 24.8 days), got `-1` (number)',
    );
    expect(refusal(() => checkGovernorOptions({ state: true }))).toBe(
      'Expected `governor.state` to be a file path, or false, got `true` (boolean)',
    );
    expect(refusal(() => checkGovernorOptions({ state: ' ' }))).toBe(
      'Expected `governor.state` to be a file path, or false, got ` ` (string)',
    );
    expect(refusal(() => checkGovernorOptions([]))).toBe(
      'Expected `governor` to be an object, got `[]` (array)',
    );
  });

  it('takes limits with no upper bound, and a valid set as it is', () => {
    const options = { concurrencyControl: 'fixed', enabled: false, maxConcurrency: 2 ** 60 };
    expect(checkGovernorOptions(options)).toBe(options);
    expect(checkGovernorOptions(undefined)).toEqual({});
  });

  it('names the CLI flags of its options in an engine check message', () => {
    expect(
      flagMessage('`governor.rpm`, `governor.patienceMs`, not `governor.initialConcurrency`'),
    ).toBe('`--rpm`, `--patience`, not `governor.initialConcurrency`');
  });
});

describe('the flags named in engine messages', () => {
  it('are exactly the engine options a CLI user sets by a flag the engine checks', () => {
    expect(OPTION_FLAGS).toEqual({
      ceilingMs: '--ceiling',
      threads: '--threads',
      agentsPerThread: '--agents-per-thread',
      maxDepth: '--max-depth',
      'queue.url': '--queue',
      'queue.name': '--queue-name',
      'queue.rateLimit.max': '--queue-rate',
      'queue.rateLimit.durationMs': '--queue-rate',
      logDir: '--log-dir',
      workspace: '--workspace',
      toolModules: '--tools',
      mcpConfig: '--mcp-config',
      maxOldGenerationSizeMb: '--worker-heap-mb',
      cancelGraceMs: '--cancel-grace',
      toolTimeoutMs: '--tool-timeout',
      toolGraceMs: '--tool-grace',
      maxSteps: '--max-steps',
      agentsDir: '--agents',
      prices: '--prices',
      cache: '--cache',
      cacheTtl: '--cache-ttl',
      lane: '--lane',
      batchWindowMs: '--batch-window',
      batchPollMs: '--batch-poll',
      batchTurnaroundMs: '--batch-turnaround',
      'provider.model': '--model',
      'provider.baseURL': '--base-url',
      'provider.requestTimeoutMs': '--request-timeout',
      'provider.idleTimeoutMs': '--idle-timeout',
      'provider.maxTokens': '--max-tokens',
      'provider.transport': '--transport',
      'provider.connections': '--connections',
      'governor.rpm': '--rpm',
      'governor.itpm': '--itpm',
      'governor.otpm': '--otpm',
      'governor.maxConcurrency': '--max-concurrency',
      'governor.patienceMs': '--patience',
      'governor.enabled': '--governor',
      'governor.state': '--governor-state',
    });
  });

  it('leave a value that reads like an option the CLI checks itself as it is', () => {
    expect(flagMessage('got `budget`, which does not exist; `logs` is a tool')).toBe(
      'got `budget`, which does not exist; `logs` is a tool',
    );
  });
});

describe('a budget in library options', () => {
  it('lists the keys, usd before steps, and checks steps first', () => {
    expect(refusal(() => checkBudget('budget', { foo: 1, bar: 2 }))).toBe(
      'Expected `budget` to have only the keys `inputTokens`, `outputTokens`, `usd`, `steps`, `timeMs`, `tree`, got `foo`, `bar`',
    );
    expect(refusal(() => checkBudget('budget', { usd: 0, steps: 0 }))).toBe(
      'Expected `budget.steps` to be a whole number from 1 and up, got `0` (number)',
    );
    expect(refusal(() => checkBudget('budget', { usd: Number.POSITIVE_INFINITY }))).toBe(
      'Expected `budget.usd` to be a finite number of dollars above 0, got `Infinity` (number)',
    );
  });

  it('returns a copy of the set limits only', () => {
    const budget = { tree: true, usd: 0.5, timeMs: undefined };
    const checked = checkBudget('budget', budget);
    expect(checked).toEqual({ usd: 0.5, tree: true });
    expect(checked).not.toBe(budget);
    expect(Object.keys(checked ?? {})).toEqual(['usd', 'tree']);
  });
});

describe('CLI flags from their declarations', () => {
  const count = wholeNumber(1, 9, { flag: '--count', arg: 'N', help: 'how many' });
  const rows = [
    count,
    { flag: '--name', arg: 'NAME', help: 'first line\nsecond line' },
    { flag: '--quiet', short: 'q', help: 'say less' },
    { flag: '--tools', arg: 'MODULE', type: 'array' as const, help: 'repeatable' },
    { flags: [count, { flag: '--a-very-long-flag', arg: 'VALUE' }], help: 'too long to fit' },
  ];

  it('pads each flag to the help column and starts further lines there', () => {
    expect(helpLines(rows, 12).split('\n')).toEqual([
      '  --count N   how many',
      '  --name NAME first line',
      '              second line',
      '  -q, --quiet say less',
      '  --tools MODULE',
      '              repeatable',
      '  --count N, --a-very-long-flag VALUE',
      '              too long to fit',
    ]);
  });

  it('parses a flag with a value as a string, an array field as repeatable, and a switch', () => {
    expect(parseOptions(rows)).toEqual({
      count: { type: 'string' },
      name: { type: 'string' },
      quiet: { type: 'boolean', short: 'q' },
      tools: { type: 'string', multiple: true },
      'a-very-long-flag': { type: 'string' },
    });
  });

  it('refuses a whole number past the safe integers, even where the field has no bound', () => {
    const values = { rpm: '99999999999999999999' };
    expect(refusal(() => wholeNumberFlag(values, GOVERNOR_FIELDS.rpm))).toBe(
      'Expected `--rpm` to be a whole number from 1 and up, got `99999999999999999999`',
    );
    expect(wholeNumberFlag({ rpm: '600' }, GOVERNOR_FIELDS.rpm)).toBe(600);
    expect(refusal(() => wholeNumberFlag({ count: '10' }, count))).toBe(
      'Expected `--count` to be a whole number from 1 to 9, got `10`',
    );
  });
});
