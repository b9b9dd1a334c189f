/**
 * The wire shapes of the Anthropic Messages API, as far as the scripted model reads and
 * writes them. Request shapes are what `validateRequest` guarantees after checking.
 */

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

export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | TextBlock[];
  is_error?: boolean;
}

export type RequestBlock = TextBlock | ToolUseBlock | ToolResultBlock;

export interface RequestMessage {
  role: 'user' | 'assistant';
  /** Always an array after validation: a string content becomes one text block. */
  blocks: RequestBlock[];
}

export interface RequestTool {
  name: string;
  input_schema: Record<string, unknown>;
}

/** A checked request, with content normalised to blocks. */
export interface MessagesRequest {
  model: string;
  maxTokens: number;
  stream: boolean;
  /** The system prompt as text (text blocks joined with a newline), or '' when absent. */
  system: string;
  messages: RequestMessage[];
  tools: RequestTool[];
  /** Characters of the JSON of system + messages + tools, for the input token estimate. */
  inputChars: number;
}

/** A content block the scripted model emits. */
export type OutputBlock = TextBlock | ToolUseBlock;

export type StopReason = 'end_turn' | 'tool_use';

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

/** `{"type":"error","error":{"type":...,"message":...}}` */
export function errorBody(type: ApiErrorType, message: string): string {
  return JSON.stringify({ type: 'error', error: { type, message } });
}

/** The text of a tool_result's content: a string, or its text blocks joined. */
export function toolResultText(block: ToolResultBlock): string {
  const content = block.content;
  if (content === undefined) return '';
  if (typeof content === 'string') return content;
  return content.map((part) => part.text).join('\n');
}

/** All the text blocks of a message joined by a newline. */
export function messageText(message: RequestMessage): string {
  const parts: string[] = [];
  for (const block of message.blocks) if (block.type === 'text') parts.push(block.text);
  return parts.join('\n');
}
