import type Anthropic from '@anthropic-ai/sdk';
import {
  type AssistantTurn,
  type ContentBlockParam,
  noUsage,
  type ProviderUsage,
  type ToolCall,
} from './types.js';

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
  readonly usage: ProviderUsage = noUsage();
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
        this.#takeUsage(event.message.usage);
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
        // Its counts are cumulative: a field it carries replaces what message_start said.
        this.#takeUsage(event.usage);
        return undefined;
      case 'message_stop':
        this.#stopped = true;
        return undefined;
      default:
        return undefined;
    }
  }

  /**
   * Takes the counts a usage object carries. A server that does not cache sends no cache fields,
   * or nulls: they stay 0. A count that is not a finite number from 0 up is ignored.
   */
  #takeUsage(usage: StreamUsage | null | undefined): void {
    if (!usage) return;
    const into = this.usage;
    const input = count(usage.input_tokens);
    if (input !== undefined) into.inputTokens = input;
    const output = count(usage.output_tokens);
    if (output !== undefined) into.outputTokens = output;
    const read = count(usage.cache_read_input_tokens);
    if (read !== undefined) into.cacheReadTokens = read;
    const write = count(usage.cache_creation_input_tokens);
    if (write !== undefined) into.cacheWriteTokens = write;
    const hour = count(usage.cache_creation?.ephemeral_1h_input_tokens);
    if (hour !== undefined && hour > 0) into.cacheWrite1hTokens = hour;
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

/** The usage fields of `message_start` and `message_delta`, as loosely as servers send them. */
interface StreamUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_creation?: { ephemeral_1h_input_tokens?: number | null } | null;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
