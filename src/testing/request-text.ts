import { isRecord } from './is-record.js';
import type { TextBlock } from './messages-api.js';
import { checkCacheControl, checkKeys, fail, failRule } from './request-problem.js';

// TextBlockParam's keys (SDK 1.14).
const TEXT_KEYS = new Set(['type', 'text', 'cache_control', 'citations']);
// Compiled once: whether a text holds anything but whitespace.
const NON_WHITESPACE = /\S/;

/**
 * Checks a text block (of a message, a system prompt, a tool_result, a search result or a
 * document's content). Like the real API, it refuses an empty text and a text of whitespace
 * only, naming the rule the way the real API does (`messages: text content blocks must be
 * non-empty`), prefixed by where the block stands (`messages` or `system`).
 */
export function checkTextBlock(block: unknown, path: string): TextBlock {
  if (!isRecord(block) || block.type !== 'text') fail(path, 'a text block', block);
  checkKeys(block, TEXT_KEYS, path);
  checkCacheControl(block.cache_control, `${path}.cache_control`);
  const { text, citations } = block;
  if (typeof text !== 'string') fail(`${path}.text`, 'a string', text);
  checkNonBlank(text, `${path}.text`);
  if (citations !== undefined && citations !== null && !Array.isArray(citations)) {
    fail(`${path}.citations`, 'an array or null', citations);
  }
  return { type: 'text', text };
}

/** Refuses an empty or whitespace-only text at `path` (a block's `text`, or a string content). */
export function checkNonBlank(text: string, path: string): void {
  if (NON_WHITESPACE.test(text)) return;
  const field = path.startsWith('system') ? 'system' : 'messages';
  if (text.length === 0) {
    failRule(`${field}: text content blocks must be non-empty`, path, 'a non-empty string', text);
  }
  failRule(
    `${field}: text content blocks must contain non-whitespace text`,
    path,
    'a string with a non-whitespace character',
    text,
  );
}
