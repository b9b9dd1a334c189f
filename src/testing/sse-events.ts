import type { MessagePlan } from './plan.js';

/** One SSE event, and how many output characters it carries (0 for all but deltas). */
export interface SseEvent {
  text: string;
  chars: number;
}

/** Identity of a response, shared by its SSE events and its JSON form. */
export interface MessageIdentity {
  messageId: string;
  model: string;
}

/** Encodes one SSE event: an `event:` line, a `data:` line, and a blank line. */
export function sseEvent(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** The events sent with the response headers: message_start and a ping. */
export function streamHead(plan: MessagePlan, identity: MessageIdentity): string {
  const message = {
    id: identity.messageId,
    type: 'message',
    role: 'assistant',
    model: identity.model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: {
      input_tokens: plan.inputTokens,
      output_tokens: 1,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  };
  return (
    sseEvent('message_start', { type: 'message_start', message }) +
    sseEvent('ping', { type: 'ping' })
  );
}

// Characters JSON.stringify would escape, plus surrogates (a lone one gets escaped).
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * Splits `text` into pieces of about `size` UTF-16 units, never between the two halves
 * of a surrogate pair, so every piece is valid Unicode on its own.
 */
export function* chunkText(text: string, size: number): Generator<string> {
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + size, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
    yield text.slice(start, end);
    start = end;
  }
}

/**
 * The events after the head, produced lazily so that a paced stream holds only a cursor,
 * not its whole body: per block a start, its deltas and a stop; then message_delta and
 * message_stop. Delta events are assembled from a fixed prefix and the JSON of the piece,
 * which is what makes an unpaced stream cheap: this loop is the server's hot path.
 */
export function* streamBody(plan: MessagePlan, chunkChars: number): Generator<SseEvent, void> {
  for (const [index, block] of plan.blocks.entries()) {
    const isText = block.type === 'text';
    const contentBlock = isText
      ? { type: 'text', text: '' }
      : { type: 'tool_use', id: block.id, name: block.name, input: {} };
    const start = { type: 'content_block_start', index, content_block: contentBlock };
    yield { text: sseEvent('content_block_start', start), chars: 0 };
    const deltaPrefix = isText
      ? `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":`
      : `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"input_json_delta","partial_json":`;
    const content = isText ? block.text : JSON.stringify(block.input);
    // Text with nothing to escape can be quoted as is: one check instead of one
    // JSON.stringify per piece.
    const plain = !NEEDS_ESCAPE.test(content);
    for (const piece of chunkText(content, chunkChars)) {
      const quoted = plain ? `"${piece}"` : JSON.stringify(piece);
      yield { text: `${deltaPrefix}${quoted}}}\n\n`, chars: piece.length };
    }
    yield { text: sseEvent('content_block_stop', { type: 'content_block_stop', index }), chars: 0 };
  }
  const messageDelta = {
    type: 'message_delta',
    delta: { stop_reason: plan.stopReason, stop_sequence: null },
    usage: { output_tokens: plan.outputTokens },
  };
  yield { text: sseEvent('message_delta', messageDelta), chars: 0 };
  yield { text: sseEvent('message_stop', { type: 'message_stop' }), chars: 0 };
}

/** The non-streaming Message JSON. */
export function messageJson(plan: MessagePlan, identity: MessageIdentity): string {
  return JSON.stringify({
    id: identity.messageId,
    type: 'message',
    role: 'assistant',
    model: identity.model,
    content: plan.blocks,
    stop_reason: plan.stopReason,
    stop_sequence: null,
    usage: {
      input_tokens: plan.inputTokens,
      output_tokens: plan.outputTokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  });
}
