import type Anthropic from '@anthropic-ai/sdk';
import type { AssistantTurn, ContentBlockParam, ProviderUsage, ToolCall } from './types.js';

type StreamEvent = Anthropic.RawMessageStreamEvent;

interface OpenBlock {
  kind: 'text' | 'tool_use';
  text: string;
  id: string;
  name: string;
  json: string;
}

/**
 * Builds the assistant turn from raw stream events. It also tells whether the stream looked like
 * the Messages API at all (`started`) and whether it ended properly (`stopped`).
 */
export class TurnAssembler {
  readonly usage: ProviderUsage = { inputTokens: 0, outputTokens: 0 };
  #blocks: OpenBlock[] = [];
  #stopReason: string | null = null;
  #started = false;
  #stopped = false;

  /** A `message_start` arrived: the server speaks the Messages API. */
  get started(): boolean {
    return this.#started;
  }

  /** A `message_stop` arrived: the turn is whole. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Returns the text delta carried by the event, if any. */
  push(event: StreamEvent): string | undefined {
    switch (event.type) {
      case 'message_start':
        this.#started = true;
        this.usage.inputTokens = event.message.usage.input_tokens;
        this.usage.outputTokens = event.message.usage.output_tokens;
        return undefined;
      case 'content_block_start': {
        const block = event.content_block;
        if (block.type === 'text') {
          this.#blocks[event.index] = {
            kind: 'text',
            text: block.text,
            id: '',
            name: '',
            json: '',
          };
        } else if (block.type === 'tool_use') {
          this.#blocks[event.index] = {
            kind: 'tool_use',
            text: '',
            id: block.id,
            name: block.name,
            json: '',
          };
        }
        return undefined;
      }
      case 'content_block_delta': {
        const open = this.#blocks[event.index];
        if (!open) return undefined;
        if (event.delta.type === 'text_delta') {
          open.text += event.delta.text;
          return event.delta.text;
        }
        if (event.delta.type === 'input_json_delta') open.json += event.delta.partial_json;
        return undefined;
      }
      case 'message_delta':
        this.#stopReason = event.delta.stop_reason ?? null;
        this.usage.outputTokens = event.usage.output_tokens;
        return undefined;
      case 'message_stop':
        this.#stopped = true;
        return undefined;
      default:
        return undefined;
    }
  }

  /** The turn, once the stream has stopped (see `stopped`). */
  finish(): AssistantTurn {
    const content: ContentBlockParam[] = [];
    const calls: ToolCall[] = [];
    let text = '';
    for (const block of this.#blocks) {
      if (!block) continue;
      if (block.kind === 'text') {
        text += block.text;
        // The API refuses empty and whitespace-only text blocks in a request, and a model
        // may stream "\n\n" before a tool call: such blocks never enter the transcript.
        if (block.text.trim() === '') continue;
        content.push({ type: 'text', text: block.text });
        continue;
      }
      const call: ToolCall = { id: block.id, name: block.name, input: {} };
      if (block.json.trim() !== '') {
        try {
          call.input = JSON.parse(block.json);
        } catch {
          call.inputError =
            this.#stopReason === 'max_tokens'
              ? `the response reached max_tokens before its arguments were complete (the limit is set by --max-tokens, provider.maxTokens); they end: ${block.json.slice(-200)}`
              : `its arguments were not valid JSON: ${block.json.slice(0, 200)}`;
        }
      }
      const echoed = isPlainObject(call.input) ? call.input : {};
      content.push({ type: 'tool_use', id: call.id, name: call.name, input: echoed });
      calls.push(call);
    }
    // The API refuses an assistant message with no content; say plainly that there was none.
    if (content.length === 0) content.push({ type: 'text', text: '(no output)' });
    return {
      message: { role: 'assistant', content },
      text,
      calls,
      stopReason: this.#stopReason,
      usage: { ...this.usage },
    };
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
