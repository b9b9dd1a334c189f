import { isRecord } from './is-record.js';
import type {
  MediaBlock,
  RedactedThinkingBlock,
  RequestBlock,
  RequestMessage,
  ServerToolBlock,
  TextBlock,
  ThinkingBlock,
  ToolResultBlock,
  ToolUseBlock,
} from './messages-api.js';
import { checkCitationsConfig, checkMedia, type MediaTally } from './request-media.js';
import {
  checkCacheControl,
  checkKeys,
  checkOptionalString,
  fail,
  failRule,
} from './request-problem.js';
import { checkNonBlank, checkTextBlock } from './request-text.js';
import { verifyThinking } from './thinking-signature.js';

export type { MediaTally } from './request-media.js';

const USER_BLOCKS =
  '"text", "image", "document", "search_result" or "tool_result" (the blocks of a user message)';
const ASSISTANT_BLOCKS =
  '"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use" or a server tool\'s "*_tool_result" (the blocks of an assistant message)';
const TOOL_RESULT_PARTS =
  '"text", "image", "document", "search_result", "tool_reference" or "browser_state" (the blocks of a tool_result\'s content)';
// The real API's pattern for tool_use ids; compiled once, not per request.
const TOOL_USE_ID = /^[a-zA-Z0-9_-]+$/;

// MessageParam's keys, then those of each block type, from SDK 1.14's *BlockParam types (image and document keys are
// in request-media.ts, text keys in request-text.ts). Anything else is an extra input.
const MESSAGE_KEYS = new Set(['role', 'content']);
const TOOL_USE_KEYS = new Set([
  'type',
  'id',
  'name',
  'input',
  'cache_control',
  'caller',
  'toolset_name',
]);
const TOOL_RESULT_KEYS = new Set([
  'type',
  'tool_use_id',
  'content',
  'is_error',
  'cache_control',
  'toolset_name',
]);
const THINKING_KEYS = new Set(['type', 'thinking', 'signature']);
const REDACTED_THINKING_KEYS = new Set(['type', 'data']);
const SERVER_TOOL_USE_KEYS = new Set(['type', 'id', 'name', 'input', 'cache_control', 'caller']);
const SERVER_TOOL_RESULT_KEYS = new Set(['type', 'tool_use_id', 'content', 'cache_control']);
// Web search and fetch results also say who called the tool.
const CALLED_SERVER_TOOL_RESULT_KEYS = new Set([...SERVER_TOOL_RESULT_KEYS, 'caller']);
const CALLED_SERVER_TOOL_RESULTS = new Set(['web_search_tool_result', 'web_fetch_tool_result']);
const SEARCH_RESULT_KEYS = new Set([
  'type',
  'content',
  'source',
  'title',
  'cache_control',
  'citations',
]);
const TOOL_REFERENCE_KEYS = new Set(['type', 'tool_name', 'cache_control']);
const BROWSER_STATE_KEYS = new Set(['type', 'tabs', 'state_changes', 'cache_control']);

/**
 * Checks one message of `messages` as sent. A string content becomes one text block; an empty
 * one (`""`) becomes no block, and `checkNonEmptyContent` decides whether that may stand.
 */
export function checkMessage(message: unknown, index: number, tally: MediaTally): RequestMessage {
  const path = `messages.${index}`;
  if (!isRecord(message)) fail(path, 'an object with role and content', message);
  const { role, content } = message;
  if (role !== 'user' && role !== 'assistant') {
    const why =
      role === 'system'
        ? ' (the scripted model does not support `system` messages: put the system prompt in the top-level `system` field)'
        : '';
    fail(`${path}.role`, `"user" or "assistant"${why}`, role);
  }
  checkKeys(message, MESSAGE_KEYS, path);
  if (typeof content === 'string') {
    if (content === '') return { role, blocks: [] };
    checkNonBlank(content, `${path}.content`);
    return { role, blocks: [{ type: 'text', text: content }] };
  }
  if (!Array.isArray(content)) fail(`${path}.content`, 'a string or an array of blocks', content);
  const blocks: RequestBlock[] = [];
  for (let blockIndex = 0; blockIndex < content.length; blockIndex++) {
    const blockPath = `${path}.content.${blockIndex}`;
    const block: unknown = content[blockIndex];
    if (!isRecord(block)) fail(blockPath, 'a content block object', block);
    blocks.push(
      role === 'user'
        ? checkUserBlock(block, blockPath, tally)
        : checkAssistantBlock(block, blockPath),
    );
  }
  return { role, blocks };
}

/**
 * Refuses a message with no content, as the real API does, except the final message when it
 * is the assistant's: an empty prefill. Indexes are those of `given`, as sent.
 */
export function checkNonEmptyContent(given: readonly RequestMessage[], raw: unknown[]): void {
  const last = given.length - 1;
  given.forEach((message, index) => {
    if (message.blocks.length > 0) return;
    if (index === last && message.role === 'assistant') return;
    const content = (raw[index] as { content?: unknown }).content;
    const path = `messages.${index}`;
    if (message.role === 'user') {
      failRule(
        `${path}: user messages must have non-empty content`,
        `${path}.content`,
        'a non-empty string or array',
        content,
      );
    }
    failRule(
      `${path}: all messages must have non-empty content except for the optional final assistant message`,
      `${path}.content`,
      'a non-empty string or array',
      content,
    );
  });
}

function checkUserBlock(
  block: Record<string, unknown>,
  path: string,
  tally: MediaTally,
): RequestBlock {
  switch (block.type) {
    case 'text':
      return checkTextBlock(block, path);
    case 'image':
    case 'document':
      return checkMedia(block, path, tally);
    case 'search_result':
      return checkSearchResult(block, path);
    case 'tool_result':
      return checkToolResult(block, path, tally);
    case 'container_upload':
      return fail(
        `${path}.type`,
        'another block type (the scripted model does not support `container_upload` blocks: it runs no code execution containers)',
        block.type,
      );
    default:
      return fail(`${path}.type`, USER_BLOCKS, block.type);
  }
}

function checkAssistantBlock(block: Record<string, unknown>, path: string): RequestBlock {
  const { type } = block;
  switch (type) {
    case 'text':
      return checkTextBlock(block, path);
    case 'tool_use':
      return checkToolUse(block, path);
    case 'thinking':
      return checkThinkingBlock(block, path);
    case 'redacted_thinking':
      return checkRedactedThinking(block, path);
    case 'server_tool_use':
      return checkServerToolUse(block, path);
    default:
      if (typeof type === 'string' && type.endsWith('_tool_result') && type !== 'tool_result') {
        return checkServerToolResult(block, type, path);
      }
      return fail(`${path}.type`, ASSISTANT_BLOCKS, type);
  }
}

/** Checks the keys of a block that may carry `cache_control`, and its `cache_control`. */
function checkBlockKeys(
  block: Record<string, unknown>,
  allowed: ReadonlySet<string>,
  path: string,
): void {
  checkKeys(block, allowed, path);
  checkCacheControl(block.cache_control, `${path}.cache_control`);
}

function checkToolUse(block: Record<string, unknown>, path: string): ToolUseBlock {
  checkBlockKeys(block, TOOL_USE_KEYS, path);
  const { id, name, input } = block;
  if (typeof id !== 'string' || !TOOL_USE_ID.test(id)) {
    fail(`${path}.id`, 'a non-empty string of letters, digits, "_" and "-"', id);
  }
  if (typeof name !== 'string' || name.length === 0) {
    fail(`${path}.name`, 'a non-empty string', name);
  }
  if (!isRecord(input)) fail(`${path}.input`, 'an object', input);
  checkCaller(block.caller, `${path}.caller`);
  checkOptionalString(block.toolset_name, `${path}.toolset_name`, true);
  return { type: 'tool_use', id, name, input };
}

function checkCaller(caller: unknown, path: string): void {
  if (caller !== undefined && !isRecord(caller)) fail(path, 'a caller object', caller);
}

function checkToolResult(
  block: Record<string, unknown>,
  path: string,
  tally: MediaTally,
): ToolResultBlock {
  checkBlockKeys(block, TOOL_RESULT_KEYS, path);
  const { tool_use_id: toolUseId, content, is_error: isError } = block;
  if (typeof toolUseId !== 'string' || toolUseId.length === 0) {
    fail(`${path}.tool_use_id`, 'a non-empty string', toolUseId);
  }
  if (isError !== undefined && typeof isError !== 'boolean') {
    fail(`${path}.is_error`, 'a boolean', isError);
  }
  checkOptionalString(block.toolset_name, `${path}.toolset_name`, true);
  const result: ToolResultBlock = { type: 'tool_result', tool_use_id: toolUseId };
  if (isError !== undefined) result.is_error = isError;
  // An empty string is a valid result: the real API allows an empty tool result.
  if (typeof content === 'string') result.content = content;
  else if (Array.isArray(content)) result.content = checkResultParts(content, path, tally);
  else if (content !== undefined) {
    fail(`${path}.content`, 'a string or an array of blocks', content);
  }
  return result;
}

/**
 * The blocks of a tool_result's content. A `tool_reference` (which loads a deferred tool: the
 * scripted model treats every tool as loaded) and a `browser_state` (which the real API renders
 * for the model) are checked, then left out: nothing the scripted model decides reads them.
 */
function checkResultParts(
  content: unknown[],
  path: string,
  tally: MediaTally,
): Array<TextBlock | MediaBlock> {
  const parts: Array<TextBlock | MediaBlock> = [];
  content.forEach((part: unknown, partIndex) => {
    const partPath = `${path}.content.${partIndex}`;
    if (!isRecord(part)) fail(partPath, 'a content block object', part);
    switch (part.type) {
      case 'text':
        parts.push(checkTextBlock(part, partPath));
        return;
      case 'image':
      case 'document':
        parts.push(checkMedia(part, partPath, tally));
        return;
      case 'search_result':
        parts.push(checkSearchResult(part, partPath));
        return;
      case 'tool_reference':
        checkBlockKeys(part, TOOL_REFERENCE_KEYS, partPath);
        requireNonEmpty(part.tool_name, `${partPath}.tool_name`);
        return;
      case 'browser_state':
        checkBrowserState(part, partPath);
        return;
      default:
        fail(`${partPath}.type`, TOOL_RESULT_PARTS, part.type);
    }
  });
  return parts;
}

/**
 * A `search_result` block, read as text: the text of its content blocks, one per line. Its
 * `source` and `title` are checked and count toward input tokens with the rest of its JSON.
 */
function checkSearchResult(block: Record<string, unknown>, path: string): TextBlock {
  checkBlockKeys(block, SEARCH_RESULT_KEYS, path);
  requireNonEmpty(block.source, `${path}.source`);
  if (typeof block.title !== 'string') fail(`${path}.title`, 'a string', block.title);
  checkCitationsConfig(block.citations, `${path}.citations`);
  const { content } = block;
  if (!Array.isArray(content) || content.length === 0) {
    fail(`${path}.content`, 'a non-empty array of text blocks', content);
  }
  const texts = content.map(
    (part: unknown, index) => checkTextBlock(part, `${path}.content.${index}`).text,
  );
  return { type: 'text', text: texts.join('\n') };
}

function checkBrowserState(block: Record<string, unknown>, path: string): void {
  checkBlockKeys(block, BROWSER_STATE_KEYS, path);
  if (!Array.isArray(block.tabs)) fail(`${path}.tabs`, 'an array of tabs', block.tabs);
  const changes = block.state_changes;
  if (changes !== undefined && changes !== null && !Array.isArray(changes)) {
    fail(`${path}.state_changes`, 'an array or null', changes);
  }
}

function checkThinkingBlock(block: Record<string, unknown>, path: string): ThinkingBlock {
  checkKeys(block, THINKING_KEYS, path);
  const { thinking, signature } = block;
  if (typeof thinking !== 'string') fail(`${path}.thinking`, 'a string', thinking);
  if (typeof signature !== 'string') fail(`${path}.signature`, 'a string', signature);
  // The real API refuses a thinking block whose text was edited; so does the scripted model,
  // which signed every thinking block it wrote.
  if (!verifyThinking(thinking, signature)) {
    fail(
      `${path}.signature`,
      'the signature this scripted model gave the thinking block (the signature is invalid: the thinking was edited, or was not written by this model)',
      signature,
    );
  }
  return { type: 'thinking', thinking, signature };
}

function checkRedactedThinking(
  block: Record<string, unknown>,
  path: string,
): RedactedThinkingBlock {
  checkKeys(block, REDACTED_THINKING_KEYS, path);
  return { type: 'redacted_thinking', data: requireNonEmpty(block.data, `${path}.data`) };
}

function checkServerToolUse(block: Record<string, unknown>, path: string): ServerToolBlock {
  checkBlockKeys(block, SERVER_TOOL_USE_KEYS, path);
  const { id, name, input } = block;
  requireNonEmpty(id, `${path}.id`);
  requireNonEmpty(name, `${path}.name`);
  if (!isRecord(input)) fail(`${path}.input`, 'an object', input);
  checkCaller(block.caller, `${path}.caller`);
  return { type: 'server_tool_use', wireType: 'server_tool_use' };
}

function checkServerToolResult(
  block: Record<string, unknown>,
  type: string,
  path: string,
): ServerToolBlock {
  const called = CALLED_SERVER_TOOL_RESULTS.has(type);
  checkBlockKeys(block, called ? CALLED_SERVER_TOOL_RESULT_KEYS : SERVER_TOOL_RESULT_KEYS, path);
  requireNonEmpty(block.tool_use_id, `${path}.tool_use_id`);
  if (block.content === undefined) {
    fail(`${path}.content`, 'the result of the server tool', block.content);
  }
  if (called) checkCaller(block.caller, `${path}.caller`);
  return { type: 'server_tool_result', wireType: type };
}

function requireNonEmpty(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.length === 0) fail(path, 'a non-empty string', value);
  return value;
}
