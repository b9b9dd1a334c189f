import type Anthropic from '@anthropic-ai/sdk';
import { TurnAssembler } from './turn-assembler.js';
import type { AssistantTurn } from './types.js';

type StreamEvent = Anthropic.RawMessageStreamEvent;

/**
 * The turn of a whole message (a Message Batch's `succeeded` result), built the way a streamed
 * one is: the message is replayed as the events that would have streamed it, so a batch's turn
 * and a stream's are the same for the same message (blank text dropped, `(no output)` for none).
 * Undefined when it is not a message (no `content` array).
 */
export function turnFromMessage(message: unknown): AssistantTurn | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const { content, usage, stop_reason: stopReason } = message as Partial<Anthropic.Message>;
  if (!Array.isArray(content)) return undefined;
  const assembler = new TurnAssembler();
  const push = (event: unknown) => assembler.push(event as StreamEvent);
  push({ type: 'message_start', message: { usage: usage ?? {} } });
  content.forEach((block, index) => {
    if (block.type === 'text') {
      push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } });
    } else if (block.type === 'tool_use') {
      push({
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
      });
      const json = JSON.stringify(block.input ?? {});
      push({
        type: 'content_block_delta',
        index,
        delta: { type: 'input_json_delta', partial_json: json },
      });
    }
  });
  push({ type: 'message_delta', delta: { stop_reason: stopReason ?? null }, usage: usage ?? {} });
  push({ type: 'message_stop' });
  return assembler.finish();
}
