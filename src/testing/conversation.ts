import {
  type RequestMessage,
  type ToolResultBlock,
  type ToolUseBlock,
  toolResultText,
} from './messages-api.js';

/** Reading a checked conversation, for the default policy's root and child alike. */

export function lastUser(messages: RequestMessage[]): RequestMessage | undefined {
  return messages.findLast((message) => message.role === 'user');
}

/** Every tool call the assistant made, in order. */
export function toolUses(messages: RequestMessage[]): ToolUseBlock[] {
  const uses: ToolUseBlock[] = [];
  for (const message of messages) {
    if (message.role !== 'assistant') continue;
    for (const block of message.blocks) if (block.type === 'tool_use') uses.push(block);
  }
  return uses;
}

export function toolResults(message: RequestMessage | undefined): ToolResultBlock[] {
  const results: ToolResultBlock[] = [];
  for (const block of message?.blocks ?? []) if (block.type === 'tool_result') results.push(block);
  return results;
}

/** The first line of `text` that is not blank, trimmed, or `(empty)`. */
export function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? '(empty)'
  );
}

/**
 * The task a first user message gives: its last text block. A spawn's `preamble` (a document its
 * siblings share) is a block before it, and the paths a shared document mentions are not ones
 * the task asks to read.
 */
export function taskText(message: RequestMessage | undefined): string {
  const texts = (message?.blocks ?? []).filter((block) => block.type === 'text');
  return texts.at(-1)?.text ?? '';
}

/**
 * The paths a `list_files` result lists, one a line; none from an error. The `[… N more not
 * listed]` line that closes a listing cut at its limit is not a path.
 */
export function listingPaths(result: ToolResultBlock): string[] {
  if (result.is_error === true) return [];
  return toolResultText(result)
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('['));
}
