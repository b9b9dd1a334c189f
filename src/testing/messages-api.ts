/**
 * The wire shapes of the Anthropic Messages API, as far as the scripted model reads and
 * writes them. Request shapes are what `validateRequest` guarantees after checking.
 */
import type { PromptBlocks } from './prompt-blocks.js';

export interface TextBlock {
  type: 'text';
  text: string;
}

export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
}

/**
 * An image or document block: the scripted model checks it but never reads it, so only its
 * kind and token charge are kept (not its payload, which may be megabytes of base64).
 */
export interface MediaBlock {
  type: 'image' | 'document';
  /** Input tokens this block is charged: an estimate, not its JSON size. */
  tokens: number;
}

export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | Array<TextBlock | MediaBlock>;
  is_error?: boolean;
}

/** Extended thinking, as the model emits it and as a client must echo it back. */
export interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface RedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

/**
 * A block of a server tool's turn (`server_tool_use`, `web_search_tool_result`, ...) echoed
 * back in an assistant message: checked and accepted, never produced. Only its type is kept.
 */
export interface ServerToolBlock {
  type: 'server_tool_use' | 'server_tool_result';
  /** The block's own `type`, e.g. `web_search_tool_result`. */
  wireType: string;
}

export type RequestBlock =
  | TextBlock
  | ToolUseBlock
  | ToolResultBlock
  | MediaBlock
  | ThinkingBlock
  | RedactedThinkingBlock
  | ServerToolBlock;

export interface RequestMessage {
  role: 'user' | 'assistant';
  /**
   * Always an array after validation: a string content becomes one text block, and
   * consecutive messages of one role are merged into one, as the real API does.
   */
  blocks: RequestBlock[];
}

/**
 * A tool the model may call. A custom tool has an `input_schema`; a server or client tool
 * of Anthropic's (`web_search_20250305`, `bash_20250124`, ...) has a versioned `type`
 * and no schema.
 */
export interface RequestTool {
  name: string;
  /** `custom` for a tool with an input_schema, else the versioned type as sent. */
  type: string;
  input_schema?: Record<string, unknown>;
}

/** `tool_choice`, defaulted to `auto`. */
export interface ToolChoice {
  type: 'auto' | 'any' | 'tool' | 'none';
  /** The tool to call, for type `tool`. */
  name?: string;
  /** At most one tool_use per response. */
  disableParallelToolUse: boolean;
}

/** `thinking`: whether to emit a thinking block first, and its budget in tokens. */
export interface ThinkingConfig {
  /** The `thinking.type` as sent, `disabled` when absent: `enabled` alone demands echoed thinking in a tool loop. */
  type: 'enabled' | 'adaptive' | 'between_tools' | 'disabled';
  enabled: boolean;
  /** `budget_tokens` of `{type: "enabled"}`; for `adaptive`, a share of max_tokens. */
  budgetTokens: number;
}

/** The `thread` field of the message-threads beta. */
export type ThreadRequest = { type: 'create' } | { type: 'continue'; previousMessageId: string };

/** A checked request, with content normalised to blocks. */
export interface MessagesRequest {
  model: string;
  /** `max_tokens`; 0 for a count_tokens request, which has none. */
  maxTokens: number;
  stream: boolean;
  /** The system prompt as text (text blocks joined with a newline), or '' when absent. */
  system: string;
  /** The system prompt as sent (string or blocks), or undefined: a thread stores it. */
  rawSystem: unknown;
  messages: RequestMessage[];
  tools: RequestTool[];
  /** The tools as sent, or undefined: a thread stores them. */
  rawTools: unknown;
  toolChoice: ToolChoice;
  stopSequences: string[];
  thinking: ThinkingConfig;
  thread?: ThreadRequest;
  /** Characters of the JSON of system + messages + tools, media excluded, for the token estimate. */
  inputChars: number;
  /** Input tokens charged for image and document blocks (fixed estimates). */
  mediaTokens: number;
  /** The prompt's blocks, breakpoints and prefix hashes, when the prompt cache is on. */
  prompt?: PromptBlocks;
}

/** A tool_use the model emits; `partialJson` marks one cut short by max_tokens. */
export interface OutputToolUse extends ToolUseBlock {
  /** The prefix of the input's JSON that was generated before max_tokens ran out. */
  partialJson?: string;
}

/** A content block the scripted model emits. */
export type OutputBlock = TextBlock | OutputToolUse | ThinkingBlock;

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence';

/** Error types of the Anthropic API error body. */
export type ApiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'overloaded_error'
  | (string & {});

/** Machine-readable detail of an error, as `error.details` (e.g. `{error_code: "thread_not_found"}`). */
export interface ErrorDetails {
  error_code: string;
  [key: string]: unknown;
}

/** `{"type":"error","error":{"type","message","details"?},"request_id"}` */
export function errorBody(
  type: ApiErrorType,
  message: string,
  requestId: string,
  details?: ErrorDetails,
): string {
  const error = details === undefined ? { type, message } : { type, message, details };
  return JSON.stringify({ type: 'error', error, request_id: requestId });
}

/** The text of a tool_result's content: a string, or its text blocks joined. */
export function toolResultText(block: ToolResultBlock): string {
  const content = block.content;
  if (content === undefined) return '';
  if (typeof content === 'string') return content;
  const parts: string[] = [];
  for (const part of content) if (part.type === 'text') parts.push(part.text);
  return parts.join('\n');
}

/** All the text blocks of a message joined by a newline. */
export function messageText(message: RequestMessage): string {
  const parts: string[] = [];
  for (const block of message.blocks) if (block.type === 'text') parts.push(block.text);
  return parts.join('\n');
}
