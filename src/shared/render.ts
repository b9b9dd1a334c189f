/**
 * The one render rule for every tool value, the reply included (README, "The contracts"):
 * a string passes through raw (real newlines kept); an object or array is pretty-printed JSON with
 * a 2-space indent; null, undefined and "" render to nothing; other scalars print as JSON.
 */
export function renderValue(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'object') return JSON.stringify(value, null, 2) ?? '';
  return JSON.stringify(value) ?? String(value);
}

/** Default reply cap, in characters. */
export const DEFAULT_REPLY_CAP = 32_000;

export interface Clipped {
  text: string;
  truncated: boolean;
}

/**
 * Keeps the head and the tail of `text` and puts a marker in the middle that says how much was
 * elided, so the result is at most `cap` characters long (the marker included) whenever `cap` is
 * large enough to hold the marker. Clipping is by UTF-16 code unit, but never splits a surrogate
 * pair.
 */
export function clip(text: string, cap: number = DEFAULT_REPLY_CAP): Clipped {
  if (text.length <= cap) return { text, truncated: false };
  // The marker's own length depends on the number it shows; two passes settle it.
  let elided = text.length - cap;
  let marker = elisionMarker(elided);
  elided = text.length - Math.max(0, cap - marker.length);
  marker = elisionMarker(elided);
  const keep = Math.max(0, cap - marker.length);
  let headEnd = Math.ceil(keep / 2);
  let tailStart = text.length - (keep - headEnd);
  headEnd = avoidSplitPair(text, headEnd);
  tailStart = avoidSplitPair(text, tailStart);
  const shownElided = tailStart - headEnd;
  return {
    text: `${text.slice(0, headEnd)}${elisionMarker(shownElided)}${text.slice(tailStart)}`,
    truncated: true,
  };
}

export function elisionMarker(count: number): string {
  return `\n[… ${count.toLocaleString('en-US')} characters elided …]\n`;
}

function avoidSplitPair(text: string, index: number): number {
  if (index <= 0 || index >= text.length) return index;
  const before = text.charCodeAt(index - 1);
  // A high surrogate right before the cut would be orphaned: move the cut back by one.
  if (before >= 0xd800 && before <= 0xdbff) return index - 1;
  return index;
}
