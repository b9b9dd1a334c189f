import { describeValue } from '../shared/errors.js';
import { isRecord } from './is-record.js';
import type {
  MessagesRequest,
  RequestBlock,
  RequestMessage,
  RequestTool,
  TextBlock,
} from './messages-api.js';

export type Validation<T> = { ok: true; value: T } | { ok: false; message: string };

// Thrown only inside this module, to unwind from deep checks; never escapes it.
class RequestProblem extends Error {}

function fail(path: string, expected: string, got: unknown): never {
  throw new RequestProblem(
    `Expected \`${path}\` to be ${expected}, got ${describeValue(got, 80, { quoteStrings: true })}`,
  );
}

/**
 * Checks a parsed `POST /v1/messages` body as strictly as the real API does for the parts
 * an agent loop touches: model, max_tokens, message roles and order, content blocks, the
 * pairing of every tool_use with exactly one tool_result in the next message, and tools.
 * A failure names what was expected and what arrived.
 */
export function validateRequest(body: unknown): Validation<MessagesRequest> {
  try {
    return { ok: true, value: checkRequest(body) };
  } catch (error) {
    if (error instanceof RequestProblem) return { ok: false, message: error.message };
    throw error;
  }
}

function checkRequest(body: unknown): MessagesRequest {
  if (!isRecord(body)) fail('the request body', 'a JSON object', body);
  const { model, max_tokens: maxTokens, messages, system, tools, stream } = body;
  if (typeof model !== 'string' || model.length === 0) fail('model', 'a non-empty string', model);
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) {
    fail('max_tokens', 'a positive integer', maxTokens);
  }
  if (stream !== undefined && typeof stream !== 'boolean') fail('stream', 'a boolean', stream);
  if (!Array.isArray(messages) || messages.length === 0) {
    fail('messages', 'a non-empty array', messages);
  }
  const checkedMessages = messages.map((message, index) => checkMessage(message, index));
  checkOrder(checkedMessages);
  checkToolPairing(checkedMessages);
  const systemText = checkSystem(system);
  const checkedTools = checkTools(tools);
  const inputChars =
    (system === undefined ? 0 : JSON.stringify(system).length) +
    JSON.stringify(messages).length +
    (tools === undefined ? 0 : JSON.stringify(tools).length);
  return {
    model,
    maxTokens,
    stream: stream === true,
    system: systemText,
    messages: checkedMessages,
    tools: checkedTools,
    inputChars,
  };
}

function checkMessage(message: unknown, index: number): RequestMessage {
  const path = `messages.${index}`;
  if (!isRecord(message)) fail(path, 'an object with role and content', message);
  const { role, content } = message;
  if (role !== 'user' && role !== 'assistant') fail(`${path}.role`, '"user" or "assistant"', role);
  if (typeof content === 'string') return { role, blocks: [{ type: 'text', text: content }] };
  if (!Array.isArray(content)) fail(`${path}.content`, 'a string or an array of blocks', content);
  const blocks = content.map((block, blockIndex) =>
    checkBlock(block, `${path}.content.${blockIndex}`, role),
  );
  return { role, blocks };
}

function checkBlock(block: unknown, path: string, role: 'user' | 'assistant'): RequestBlock {
  if (!isRecord(block)) fail(path, 'a content block object', block);
  switch (block.type) {
    case 'text':
      return checkTextBlock(block, path);
    case 'tool_use': {
      if (role !== 'assistant')
        fail(`${path}.type`, 'a block allowed in a user message', 'tool_use');
      const { id, name, input } = block;
      if (typeof id !== 'string' || id.length === 0) fail(`${path}.id`, 'a non-empty string', id);
      if (typeof name !== 'string' || name.length === 0) {
        fail(`${path}.name`, 'a non-empty string', name);
      }
      if (!isRecord(input)) fail(`${path}.input`, 'an object', input);
      return { type: 'tool_use', id, name, input };
    }
    case 'tool_result': {
      if (role !== 'user') {
        fail(`${path}.type`, 'a block allowed in an assistant message', 'tool_result');
      }
      const { tool_use_id: toolUseId, content, is_error: isError } = block;
      if (typeof toolUseId !== 'string' || toolUseId.length === 0) {
        fail(`${path}.tool_use_id`, 'a non-empty string', toolUseId);
      }
      if (isError !== undefined && typeof isError !== 'boolean') {
        fail(`${path}.is_error`, 'a boolean', isError);
      }
      const result: RequestBlock = { type: 'tool_result', tool_use_id: toolUseId };
      if (isError !== undefined) result.is_error = isError;
      if (typeof content === 'string') result.content = content;
      else if (Array.isArray(content)) {
        result.content = content.map((part, partIndex) =>
          checkTextBlock(part, `${path}.content.${partIndex}`),
        );
      } else if (content !== undefined) {
        fail(`${path}.content`, 'a string or an array of text blocks', content);
      }
      return result;
    }
    default:
      return fail(
        `${path}.type`,
        '"text", "tool_use" or "tool_result" (the scripted model accepts no other block)',
        block.type,
      );
  }
}

function checkTextBlock(block: unknown, path: string): TextBlock {
  if (!isRecord(block) || block.type !== 'text') fail(path, 'a text block', block);
  if (typeof block.text !== 'string') fail(`${path}.text`, 'a string', block.text);
  return { type: 'text', text: block.text };
}

function checkOrder(messages: RequestMessage[]): void {
  messages.forEach((message, index) => {
    const expected = index % 2 === 0 ? 'user' : 'assistant';
    if (message.role !== expected) {
      const why = index === 0 ? 'the first message must be from the user' : 'roles must alternate';
      fail(`messages.${index}.role`, `"${expected}" (${why})`, message.role);
    }
  });
}

function checkToolPairing(messages: RequestMessage[]): void {
  const seenIds = new Set<string>();
  messages.forEach((message, index) => {
    if (message.role === 'assistant') {
      message.blocks.forEach((block, blockIndex) => {
        if (block.type !== 'tool_use') return;
        if (seenIds.has(block.id)) {
          fail(
            `messages.${index}.content.${blockIndex}.id`,
            'a tool_use id not used before',
            block.id,
          );
        }
        seenIds.add(block.id);
      });
      return;
    }
    const previous = messages[index - 1];
    const open = new Map<string, string>();
    for (const block of previous?.blocks ?? []) {
      if (block.type === 'tool_use') open.set(block.id, block.name);
    }
    const answered = new Set<string>();
    let sawText = false;
    message.blocks.forEach((block, blockIndex) => {
      const path = `messages.${index}.content.${blockIndex}`;
      if (block.type === 'text') {
        sawText = true;
        return;
      }
      if (block.type !== 'tool_result') return;
      if (sawText) {
        fail(path, 'a text block (tool_result blocks must come before any text)', 'tool_result');
      }
      if (!open.has(block.tool_use_id)) {
        fail(
          `${path}.tool_use_id`,
          `the id of a tool_use in messages.${index - 1} (${listIds(open)})`,
          block.tool_use_id,
        );
      }
      if (answered.has(block.tool_use_id)) {
        fail(`${path}.tool_use_id`, 'an id not answered before in this message', block.tool_use_id);
      }
      answered.add(block.tool_use_id);
    });
    for (const [id, name] of open) {
      if (!answered.has(id)) {
        throw new RequestProblem(
          `Expected a tool_result for tool_use \`${id}\` (${name}) of messages.${index - 1} in messages.${index}, got none: every tool_use must be answered in the next message`,
        );
      }
    }
  });
  const last = messages.at(-1);
  if (last?.role === 'assistant') {
    const unanswered = last.blocks.find((block) => block.type === 'tool_use');
    if (unanswered?.type === 'tool_use') {
      throw new RequestProblem(
        `Expected a tool_result for tool_use \`${unanswered.id}\` (${unanswered.name}) of messages.${messages.length - 1} in a following user message, got the end of the conversation`,
      );
    }
  }
}

function listIds(open: Map<string, string>): string {
  return open.size === 0 ? 'it has none' : [...open.keys()].map((id) => `\`${id}\``).join(', ');
}

function checkSystem(system: unknown): string {
  if (system === undefined) return '';
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) fail('system', 'a string or an array of text blocks', system);
  return system.map((block, index) => checkTextBlock(block, `system.${index}`).text).join('\n');
}

function checkTools(tools: unknown): RequestTool[] {
  if (tools === undefined) return [];
  if (!Array.isArray(tools)) fail('tools', 'an array', tools);
  const names = new Set<string>();
  return tools.map((tool, index) => {
    const path = `tools.${index}`;
    if (!isRecord(tool)) fail(path, 'an object with name and input_schema', tool);
    const { name, input_schema: inputSchema } = tool;
    if (typeof name !== 'string' || name.length === 0)
      fail(`${path}.name`, 'a non-empty string', name);
    if (names.has(name)) fail(`${path}.name`, 'a tool name not used before', name);
    names.add(name);
    if (!isRecord(inputSchema)) fail(`${path}.input_schema`, 'an object', inputSchema);
    return { name, input_schema: inputSchema };
  });
}
