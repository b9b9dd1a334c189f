import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clip, elisionMarker, renderValue } from '../src/shared/render.js';

describe('renderValue', () => {
  it('passes a string through raw, keeping real newlines', () => {
    expect(renderValue('line one\nline two')).toBe('line one\nline two');
  });

  it('pretty-prints objects and arrays with a 2-space indent', () => {
    expect(renderValue({ a: 1, b: [true] })).toBe('{\n  "a": 1,\n  "b": [\n    true\n  ]\n}');
    expect(renderValue([1, 2])).toBe('[\n  1,\n  2\n]');
  });

  it('renders null, undefined and the empty string to nothing', () => {
    expect(renderValue(null)).toBe('');
    expect(renderValue(undefined)).toBe('');
    expect(renderValue('')).toBe('');
  });

  it('prints other scalars as JSON', () => {
    expect(renderValue(42)).toBe('42');
    expect(renderValue(false)).toBe('false');
  });
});

describe('clip', () => {
  it('leaves text at or under the cap alone', () => {
    expect(clip('abc', 3)).toEqual({ text: 'abc', truncated: false });
  });

  it('keeps head and tail with a marker that counts what was elided', () => {
    const text = `HEAD${'x'.repeat(50_000)}TAIL`;
    const clipped = clip(text, 1000);
    expect(clipped.truncated).toBe(true);
    expect(clipped.text.startsWith('HEAD')).toBe(true);
    expect(clipped.text.endsWith('TAIL')).toBe(true);
    expect(clipped.text).toMatch(/\[… [\d,]+ characters elided …\]/);
    expect(clipped.text.length).toBeLessThanOrEqual(1000);
  });

  it('obeys its laws for any text and cap (property)', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 3000 }),
        fc.integer({ min: 60, max: 2000 }),
        (text, cap) => {
          const clipped = clip(text, cap);
          if (text.length <= cap) {
            expect(clipped).toEqual({ text, truncated: false });
            return;
          }
          expect(clipped.truncated).toBe(true);
          expect(clipped.text.length).toBeLessThanOrEqual(cap);
          const match = /\n\[… ([\d,]+) characters elided …\]\n/.exec(clipped.text);
          expect(match).not.toBeNull();
          const elided = Number(match![1]!.replace(/,/g, ''));
          const marker = elisionMarker(elided);
          const at = clipped.text.indexOf(marker);
          const head = clipped.text.slice(0, at);
          const tail = clipped.text.slice(at + marker.length);
          // What is kept is the original's head and tail, and the count is exact.
          expect(text.startsWith(head)).toBe(true);
          expect(text.endsWith(tail)).toBe(true);
          expect(head.length + elided + tail.length).toBe(text.length);
          // No lone surrogate is created at a cut.
          expect(/[\ud800-\udbff]$/.test(head)).toBe(false);
        },
      ),
    );
  });
});
