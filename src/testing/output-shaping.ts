import type { OutputBlock, StopReason } from './messages-api.js';
import { signThinking } from './thinking-signature.js';

/** What the request allows the output to be: `max_tokens` and `stop_sequences`. */
export interface OutputLimits {
  maxTokens: number;
  stopSequences: readonly string[];
}

/** The content that survives the limits, why it stopped, and how many characters it has. */
export interface ShapedOutput {
  blocks: OutputBlock[];
  stopReason: StopReason;
  /** The stop sequence that ended the text, else null. */
  stopSequence: string | null;
  /** Characters of thinking + text + tool input JSON (partial where cut). */
  outputChars: number;
  /** Whether max_tokens ran out: usage then reports exactly max_tokens. */
  truncated: boolean;
}

/** Output characters one token stands for, in every estimate of the scripted model. */
export const CHARS_PER_TOKEN = 4;

/**
 * The first `length` UTF-16 units of `text`, one fewer when that would split a
 * surrogate pair, so the prefix is valid Unicode on its own.
 */
export function cutPrefix(text: string, length: number): string {
  if (length >= text.length) return text;
  if (length <= 0) return '';
  const last = text.charCodeAt(length - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? length - 1 : length);
}

/** Where a stop sequence matched in a text. */
export interface StopMatch {
  sequence: string;
  index: number;
}

/**
 * The stop sequence a model writing `text` left to right would meet first: the match
 * that ends earliest; of two ending at the same place, the longer (it began first).
 * Empty sequences never match.
 */
export function findStopSequence(
  text: string,
  sequences: readonly string[],
): StopMatch | undefined {
  let best: StopMatch | undefined;
  let bestEnd = Number.POSITIVE_INFINITY;
  for (const sequence of sequences) {
    if (sequence === '') continue;
    const index = text.indexOf(sequence);
    if (index === -1) continue;
    const end = index + sequence.length;
    if (end < bestEnd || (end === bestEnd && best !== undefined && index < best.index)) {
      best = { sequence, index };
      bestEnd = end;
    }
  }
  return best;
}

/** The characters a block generates: its thinking, its text, or its input's JSON. */
function contentOf(block: OutputBlock): string {
  if (block.type === 'text') return block.text;
  if (block.type === 'thinking') return block.thinking;
  return block.partialJson ?? JSON.stringify(block.input);
}

/** `block` cut to `content`, a prefix of what it would generate; undefined if nothing is left. */
function cutBlock(block: OutputBlock, content: string): OutputBlock | undefined {
  if (content === '') return undefined;
  if (block.type === 'text') return { type: 'text', text: content };
  // Signed as cut, so the client can echo the block back and have it verify.
  if (block.type === 'thinking') {
    return { type: 'thinking', thinking: content, signature: signThinking(content) };
  }
  return { type: 'tool_use', id: block.id, name: block.name, input: {}, partialJson: content };
}

/**
 * Applies `stop_sequences` and `max_tokens` to the planned blocks, in the order they
 * would be generated. A stop sequence ends its text block just before the match and
 * drops every later block, provided the match is complete within the token budget;
 * otherwise the budget (max_tokens × 4 characters) cuts the block where it runs out
 * and drops the rest. Only text is searched for stop sequences.
 */
export function shapeOutput(planned: readonly OutputBlock[], limits: OutputLimits): ShapedOutput {
  const budget = limits.maxTokens * CHARS_PER_TOKEN;
  const blocks: OutputBlock[] = [];
  let used = 0;
  for (const block of planned) {
    const content = contentOf(block);
    if (block.type === 'text' && limits.stopSequences.length > 0) {
      const match = findStopSequence(content, limits.stopSequences);
      if (match !== undefined && used + match.index + match.sequence.length <= budget) {
        const kept = cutBlock(block, content.slice(0, match.index));
        if (kept !== undefined) blocks.push(kept);
        const outputChars = used + match.index;
        return {
          blocks,
          stopReason: 'stop_sequence',
          stopSequence: match.sequence,
          outputChars,
          truncated: false,
        };
      }
    }
    if (used + content.length > budget) {
      const kept = cutBlock(block, cutPrefix(content, budget - used));
      if (kept !== undefined) blocks.push(kept);
      const outputChars = used + (kept === undefined ? 0 : contentOf(kept).length);
      return { blocks, stopReason: 'max_tokens', stopSequence: null, outputChars, truncated: true };
    }
    blocks.push(block);
    used += content.length;
  }
  const calls = blocks.some((block) => block.type === 'tool_use');
  return {
    blocks,
    stopReason: calls ? 'tool_use' : 'end_turn',
    stopSequence: null,
    outputChars: used,
    truncated: false,
  };
}
