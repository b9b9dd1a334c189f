/**
 * Messages-API content as short text for a terminal: what `cohort logs show` and `tail` print of
 * a transcript. Only shapes are read here; neutralising control characters is the caller's.
 */
import type { ContentBlockParam, MessageParam } from '../../shared/provider/types.js';

/** A tool call of an assistant message. */
export interface CallOf {
  id: string;
  name: string;
  input: unknown;
}

function blocksOf(message: MessageParam): ContentBlockParam[] {
  return typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : message.content;
}

/** The tool calls of a message, in order. */
export function toolCalls(message: MessageParam): CallOf[] {
  return blocksOf(message).flatMap((block) =>
    block.type === 'tool_use' ? [{ id: block.id, name: block.name, input: block.input }] : [],
  );
}

/** The text of a message's text blocks, joined by blank lines. */
export function messageText(message: MessageParam): string {
  return blocksOf(message)
    .flatMap((block) => (block.type === 'text' ? [block.text] : []))
    .join('\n\n');
}

/** One piece of a message as `show` prints it. */
export type Piece =
  | { kind: 'text'; text: string }
  | { kind: 'thinking'; text: string }
  | { kind: 'call'; call: CallOf }
  | { kind: 'result'; toolUseId: string; text: string; error: boolean }
  | { kind: 'other'; type: string };

/** A message's blocks as pieces, in order. */
export function pieces(message: MessageParam): Piece[] {
  return blocksOf(message).map((block): Piece => {
    switch (block.type) {
      case 'text':
        return { kind: 'text', text: block.text };
      case 'thinking':
        return { kind: 'thinking', text: block.thinking };
      case 'tool_use':
        return { kind: 'call', call: { id: block.id, name: block.name, input: block.input } };
      case 'tool_result':
        return {
          kind: 'result',
          toolUseId: block.tool_use_id,
          text: resultText(block.content),
          error: block.is_error === true,
        };
      default:
        return { kind: 'other', type: block.type };
    }
  });
}

/** A tool result's content as text; an image or a document is named, not shown. */
function resultText(content: unknown): string {
  if (content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return JSON.stringify(content) ?? '';
  return content
    .map((block: { type?: unknown; text?: unknown }) =>
      block.type === 'text' && typeof block.text === 'string' ? block.text : `[${block.type}]`,
    )
    .join('\n');
}

/** A value as compact JSON of at most `max` characters (`…` where it was cut). */
export function compactJson(value: unknown, max: number): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * The head of a long text: at most `lines` lines and `chars` characters, with how much was left
 * out, so a tool's 5,000-line file does not bury the transcript around it.
 */
export function clipText(text: string, lines: number, chars: number): string {
  let head = text.split('\n').slice(0, lines).join('\n');
  if (head.length > chars) head = head.slice(0, chars);
  const left = text.length - head.length;
  return left === 0 ? text : `${head}… (${left} more characters)`;
}

/** A one-line label of at most `max` characters. */
export function clipLabel(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
