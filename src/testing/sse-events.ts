import type { OutputBlock } from './messages-api.js';
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
  /** `usage.service_tier`: `batch` for a message answered in a Message Batch. Default `standard`. */
  serviceTier?: 'standard' | 'batch';
}

/** Encodes one SSE event: an `event:` line, a `data:` line, and a blank line. */
export function sseEvent(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * The usage of a Message (message_start's and the JSON form's), in the SDK's `Usage` shape:
 * the input tokens, the cache's reads and writes with the writes split by ttl, the output.
 */
function messageUsage(
  plan: MessagePlan,
  serviceTier: MessageIdentity['serviceTier'] = 'standard',
): Record<string, unknown> {
  const { input } = plan;
  return {
    input_tokens: input.inputTokens,
    cache_creation_input_tokens: input.cacheCreationInputTokens,
    cache_read_input_tokens: input.cacheReadInputTokens,
    cache_creation: {
      ephemeral_5m_input_tokens: input.ephemeral5mInputTokens,
      ephemeral_1h_input_tokens: input.ephemeral1hInputTokens,
    },
    output_tokens: plan.outputTokens,
    service_tier: serviceTier,
  };
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
    usage: { ...messageUsage(plan), output_tokens: 1 },
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

/** How one block goes on the wire: its start, the delta type and field, and its content. */
interface BlockWire {
  start: Record<string, unknown>;
  deltaType: 'text_delta' | 'thinking_delta' | 'input_json_delta';
  field: 'text' | 'thinking' | 'partial_json';
  content: string;
}

function blockWire(block: OutputBlock): BlockWire {
  switch (block.type) {
    case 'text':
      return {
        start: { type: 'text', text: '' },
        deltaType: 'text_delta',
        field: 'text',
        content: block.text,
      };
    case 'thinking':
      return {
        start: { type: 'thinking', thinking: '', signature: '' },
        deltaType: 'thinking_delta',
        field: 'thinking',
        content: block.thinking,
      };
    default:
      return {
        start: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        deltaType: 'input_json_delta',
        field: 'partial_json',
        // Cut by max_tokens, a tool_use streams only the JSON generated so far.
        content: block.partialJson ?? JSON.stringify(block.input),
      };
  }
}

/**
 * The events after the head, produced lazily so that a paced stream holds only a cursor,
 * not its whole body: per block a start, its deltas (and a thinking block's
 * signature_delta) and a stop; then message_delta and message_stop. Delta events are
 * assembled from a fixed prefix and the JSON of the piece, which is what makes an
 * unpaced stream cheap: this loop is the server's hot path.
 */
export function* streamBody(plan: MessagePlan, chunkChars: number): Generator<SseEvent, void> {
  for (const [index, block] of plan.blocks.entries()) {
    const wire = blockWire(block);
    const start = { type: 'content_block_start', index, content_block: wire.start };
    yield { text: sseEvent('content_block_start', start), chars: 0 };
    const deltaPrefix = `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"${wire.deltaType}","${wire.field}":`;
    // Text with nothing to escape can be quoted as is: one check instead of one
    // JSON.stringify per piece.
    const plain = !NEEDS_ESCAPE.test(wire.content);
    for (const piece of chunkText(wire.content, chunkChars)) {
      const quoted = plain ? `"${piece}"` : JSON.stringify(piece);
      yield { text: `${deltaPrefix}${quoted}}}\n\n`, chars: piece.length };
    }
    if (block.type === 'thinking') {
      const delta = { type: 'signature_delta', signature: block.signature };
      yield {
        text: sseEvent('content_block_delta', { type: 'content_block_delta', index, delta }),
        chars: 0,
      };
    }
    yield { text: sseEvent('content_block_stop', { type: 'content_block_stop', index }), chars: 0 };
  }
  const messageDelta = {
    type: 'message_delta',
    delta: { stop_reason: plan.stopReason, stop_sequence: plan.stopSequence },
    // The real event carries the cumulative input and cache counts too (MessageDeltaUsage,
    // which has no cache_creation split).
    usage: {
      input_tokens: plan.input.inputTokens,
      cache_creation_input_tokens: plan.input.cacheCreationInputTokens,
      cache_read_input_tokens: plan.input.cacheReadInputTokens,
      output_tokens: plan.outputTokens,
    },
  };
  yield { text: sseEvent('message_delta', messageDelta), chars: 0 };
  yield { text: sseEvent('message_stop', { type: 'message_stop' }), chars: 0 };
}

/** A block as the JSON form shows it: a tool_use cut by max_tokens has the input `{}`. */
function jsonBlock(block: OutputBlock): OutputBlock {
  if (block.type !== 'tool_use' || block.partialJson === undefined) return block;
  return { type: 'tool_use', id: block.id, name: block.name, input: {} };
}

/** The non-streaming Message JSON. */
export function messageJson(plan: MessagePlan, identity: MessageIdentity): string {
  return JSON.stringify({
    id: identity.messageId,
    type: 'message',
    role: 'assistant',
    model: identity.model,
    content: plan.blocks.map(jsonBlock),
    stop_reason: plan.stopReason,
    stop_sequence: plan.stopSequence,
    usage: messageUsage(plan, identity.serviceTier),
  });
}
