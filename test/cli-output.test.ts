import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { safeLabel, safeText, shellQuote } from '../src/cli/output.js';
import { BatchTally, describeSpend } from '../src/cli/views/batch-progress.js';
import { formatResult } from '../src/cli/views/render-result.js';
import { type AgentResult, emptyUsage } from '../src/shared/result.js';

// What the CLI prints of outside text, how it quotes the resume command, and how it words usage.
// The quoting is checked against a real bash: a quoted word must paste back as exactly the word.
describe('terminal-safe text', () => {
  it('escapes what a terminal acts on and keeps text, tabs, newlines and Windows line ends', () => {
    expect(safeText('plain ✓ text\twith tab\nand newline')).toBe(
      'plain ✓ text\twith tab\nand newline',
    );
    expect(safeText('a\r\nb')).toBe('a\nb');
    expect(safeText('\u001b]0;title\u0007 \u001b[2J \r over \u009b')).toBe(
      '\\x1b]0;title\\x07 \\x1b[2J \\x0d over \\x9b',
    );
    expect(safeLabel('two\nlines\tand tab')).toBe('two\\nlines\\tand tab');
  });
});

describe('shellQuote', () => {
  const words = [
    'plain.jsonl',
    'with space.jsonl',
    "it's",
    'dollar $HOME and `cmd`',
    't\u001b[31mRED.jsonl',
    "back\\slash and 'quote' \u0007",
    '',
  ];
  it.each(words)('%j pastes back into bash as itself, with no raw control character', (word) => {
    const quoted = shellQuote(word);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for raw controls
    expect(quoted).not.toMatch(/[\u0000-\u001f]/);
    const echoed = execFileSync('bash', ['-c', `printf '%s' ${quoted}`]).toString();
    expect(echoed).toBe(word);
  });
});

describe('usage figures', () => {
  function result(usage: Partial<AgentResult['usage']>, id = 'a1'): AgentResult {
    return {
      id,
      title: 'digest',
      outcome: 'complete',
      text: 'done',
      truncated: false,
      elapsedMs: 40,
      generation: 0,
      usage: { ...emptyUsage(), steps: 2, providerCalls: 2, ...usage },
    };
  }

  it('a result says what its input read from and wrote to the cache, only when it did', () => {
    const line = (usage: Partial<AgentResult['usage']>) =>
      formatResult(result(usage)).split('\n')[2];
    expect(line({ inputTokens: 1200, outputTokens: 80 })).toBe(
      '   40 ms · 2 steps · 2 provider calls · 1200 in / 80 out tokens',
    );
    expect(
      line({ inputTokens: 1200, outputTokens: 80, cacheReadTokens: 18000, cacheWriteTokens: 300 }),
    ).toBe(
      '   40 ms · 2 steps · 2 provider calls · 1200 in (+18000 cached, 300 written) / 80 out tokens',
    );
    expect(line({ inputTokens: 5, outputTokens: 1, cacheReadTokens: 7 })).toContain(
      ' 5 in (+7 cached) / 1 out tokens',
    );
    expect(line({ inputTokens: 5, outputTokens: 1, cacheWriteTokens: 9 })).toContain(
      ' 5 in (+9 written) / 1 out tokens',
    );
  });

  it('a batch adds up the cache counts, its hit rate over all input and what caching saved', () => {
    const tally = new BatchTally();
    tally.settle(
      result(
        {
          inputTokens: 1_000,
          outputTokens: 50,
          cacheWriteTokens: 9_000,
          costUsd: 0.04,
          cacheSavedUsd: -0.00675,
        },
        'a1',
      ),
    );
    tally.settle(
      result(
        {
          inputTokens: 1_000,
          outputTokens: 50,
          cacheReadTokens: 9_000,
          costUsd: 0.01,
          cacheSavedUsd: 0.02431,
        },
        'a2',
      ),
    );
    // A line written before the cache counts existed, read back on a rerun, has none.
    const old = result({ inputTokens: 500, outputTokens: 10 }, 'a3');
    const { cacheReadTokens: _read, cacheWriteTokens: _write, ...before } = old.usage;
    tally.settle({ ...old, usage: before as AgentResult['usage'] });
    const spent = tally.spent;
    expect(spent).toMatchObject({
      inputTokens: 2_500,
      cacheReadTokens: 9_000,
      cacheWriteTokens: 9_000,
      outputTokens: 110,
      priced: 2,
    });
    // 9,000 read of 20,500 input in all.
    expect(spent.cacheHitPercent).toBe(43.9);
    expect(spent.cacheSavedUsd).toBeCloseTo(0.01756, 12);
    expect(describeSpend(spent, 3)).toBe(
      '2,500 input (+9,000 cached, 9,000 written) + 110 output tokens, 6 steps, $0.0500 for the 2 priced task(s); cache hit 43.9%, cache saved $0.0176',
    );
    // The copy is the caller's: the tally goes on adding to its own.
    spent.cacheReadTokens = 0;
    expect(tally.spent.cacheReadTokens).toBe(9_000);
  });

  it('a batch that only wrote says what the cache cost; one that never touched it says nothing of it', () => {
    const writer = new BatchTally();
    writer.settle(
      result({
        inputTokens: 10,
        outputTokens: 5,
        cacheWriteTokens: 4_000,
        costUsd: 0.02,
        cacheSavedUsd: -0.003,
      }),
    );
    expect(describeSpend(writer.spent, 1)).toBe(
      '10 input (+4,000 written) + 5 output tokens, 2 steps, $0.0200; cache hit 0.0%, cache cost $0.0030 more',
    );
    const plain = new BatchTally();
    plain.settle(result({ inputTokens: 12_345, outputTokens: 678, costUsd: 0.0461 }));
    expect(plain.spent).not.toHaveProperty('cacheHitPercent');
    expect(plain.spent).not.toHaveProperty('cacheSavedUsd');
    expect(describeSpend(plain.spent, 1)).toBe(
      '12,345 input + 678 output tokens, 2 steps, $0.0461',
    );
  });
});
