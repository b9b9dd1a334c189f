import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { safeLabel, safeText, shellQuote } from '../src/cli/output.js';

// What the CLI prints of outside text, and how it quotes the resume command. The quoting is
// checked against a real bash: a quoted word must paste back as exactly the word.
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
