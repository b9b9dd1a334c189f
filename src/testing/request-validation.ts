import { isRecord } from './is-record.js';
import type {
  MessagesRequest,
  RequestMessage,
  ThinkingConfig,
  ThreadRequest,
} from './messages-api.js';
import { measurePrompt, type PromptWork } from './prompt-blocks.js';
import { checkMessage, checkNonEmptyContent, type MediaTally } from './request-blocks.js';
import {
  type ConversationContext,
  checkMergedConversation,
  MergedMessages,
} from './request-conversation.js';
import {
  checkCacheControl,
  checkKeys,
  checkOptionalString,
  fail,
  failExtra,
  RequestProblem,
  type Validation,
  validation,
} from './request-problem.js';
import { checkTextBlock } from './request-text.js';
import { checkToolChoice, checkTools } from './request-tools.js';

export type { ConversationContext } from './request-conversation.js';
export type { Validation } from './request-problem.js';

/** Which endpoint a body was posted to. */
export interface ValidateRequestOptions {
  /**
   * `count_tokens` checks a `POST /v1/messages/count_tokens` body: no `max_tokens`,
   * `stream`, sampling, `stop_sequences`, `metadata`, `service_tier`, `inference_geo` or
   * `thread` (each is an extra input there), and `maxTokens` is 0. Default `messages`.
   */
  endpoint?: 'messages' | 'count_tokens';
  /**
   * With prompt caching on: `check` refuses what the real API refuses about `cache_control`
   * (more than 4 breakpoints, a `1h` one after a `5m` one); `hash` also hashes the prompt's
   * prefixes for the cache (`MessagesRequest.prompt`). Absent, `cache_control` is only checked
   * for its shape, as a server that ignores it would.
   */
  cache?: 'check' | 'hash';
}

// The top-level fields of MessageCountTokensParams (SDK 1.14) ...
const COUNT_TOKENS_FIELDS = [
  'model',
  'messages',
  'system',
  'tools',
  'tool_choice',
  'thinking',
  'output_config',
  'cache_control',
  'speed',
];
const COUNT_TOKENS_KEYS = new Set(COUNT_TOKENS_FIELDS);
// ... and those MessageCreateParams adds (plus the sampling fields older models take).
const MESSAGES_KEYS = new Set([
  ...COUNT_TOKENS_FIELDS,
  'max_tokens',
  'stream',
  'stop_sequences',
  'temperature',
  'top_p',
  'top_k',
  'metadata',
  'service_tier',
  'inference_geo',
  'thread',
]);
/** Fields the real API knows and the scripted model cannot honour: refused, never ignored. */
const UNSUPPORTED_FIELDS = new Map([
  ['mcp_servers', 'MCP servers'],
  ['container', 'code execution containers'],
  ['context_management', 'context management'],
  ['compaction', 'compaction'],
  ['diagnostics', 'cache diagnostics'],
  ['output_format', 'structured output'],
  ['fallbacks', 'model fallbacks'],
  ['fallback_credit_token', 'model fallbacks'],
  ['billing_policy', 'billing policies'],
]);
const METADATA_KEYS = new Set(['user_id']);
const THREAD_CREATE_KEYS = new Set(['type']);
const THREAD_CONTINUE_KEYS = new Set(['type', 'previous_message_id']);
const EFFORTS = new Set(['low', 'medium', 'high', 'xhigh', 'max']);
const THINKING_ENABLED_KEYS = new Set(['type', 'budget_tokens', 'display']);
const THINKING_ADAPTIVE_KEYS = new Set(['type', 'display']);
const THINKING_OFF_KEYS = new Set(['type']);

/**
 * Checks a parsed `POST /v1/messages` (or, with `endpoint: "count_tokens"`,
 * `/v1/messages/count_tokens`) body as the real API does: every top-level field and its
 * type, each message's content blocks, and then the whole conversation (see
 * `checkConversation`). Consecutive same-role messages come back merged into one, and errors
 * name the path the client sent. A `thread: {type: "continue"}` body holds only the new turn,
 * so its conversation checks are left to the server, which runs `checkConversation` on the
 * stored messages plus these. A failure names what was expected and what arrived.
 */
export function validateRequest(
  body: unknown,
  options: ValidateRequestOptions = {},
): Validation<MessagesRequest> {
  return validation(() =>
    checkRequest(body, options.endpoint === 'count_tokens', options.cache ?? 'count'),
  );
}

/**
 * The conversation checks of `validateRequest`, for a conversation the server put together
 * (a thread's stored messages, then the new turn's): merges consecutive same-role messages,
 * then checks that the first is from the user, that a conversation with tool_use or
 * tool_result blocks defines tools, that every tool_use is answered by one tool_result in the
 * next message, that `tool_choice` names a tool of `tools`, and, with
 * `thinking: {type: "enabled"}`, that a tool loop's opening assistant message and a final
 * assistant message start with thinking. Returns the merged messages. Paths in errors index
 * `messages` as given.
 */
export function checkConversation(
  messages: readonly RequestMessage[],
  context: ConversationContext,
): Validation<RequestMessage[]> {
  return validation(() => checkMergedConversation(messages, context));
}

function checkRequest(body: unknown, countTokens: boolean, cache: PromptWork): MessagesRequest {
  if (!isRecord(body)) fail('the request body', 'a JSON object', body);
  checkFieldNames(body, countTokens);
  const { model, messages, system, tools } = body;
  if (typeof model !== 'string' || model.length === 0) fail('model', 'a non-empty string', model);
  const maxTokens = countTokens ? 0 : checkMaxTokens(body.max_tokens);
  const thread = checkThread(body.thread);
  const continuing = thread?.type === 'continue';
  if (!Array.isArray(messages) || (messages.length === 0 && !continuing)) {
    fail('messages', 'a non-empty array', messages);
  }
  const media: MediaTally = { tokens: 0 };
  const given = messages.map((message: unknown, index) => checkMessage(message, index, media));
  checkNonEmptyContent(given, messages);
  const systemText = checkSystem(system);
  const context = checkToolsAndThinking(body, maxTokens, countTokens);
  checkOptionalFields(body, context.thinking);
  const measured = measurePrompt(
    { tools, system, messages, cacheControl: body.cache_control },
    given,
    cache,
  );
  const request: MessagesRequest = {
    model,
    maxTokens,
    stream: body.stream === true,
    system: systemText,
    rawSystem: system,
    messages: continuing
      ? new MergedMessages(given).messages
      : checkMergedConversation(given, context),
    rawTools: tools,
    stopSequences: checkStopSequences(body.stop_sequences),
    ...context,
    inputChars: measured.inputChars,
    mediaTokens: media.tokens,
  };
  if (thread !== undefined) request.thread = thread;
  if (measured.prompt !== undefined) request.prompt = measured.prompt;
  return request;
}

/** Refuses unknown fields as the real API does, and known ones the scripted model cannot honour. */
function checkFieldNames(body: Record<string, unknown>, countTokens: boolean): void {
  const known = countTokens ? COUNT_TOKENS_KEYS : MESSAGES_KEYS;
  for (const key in body) {
    if (known.has(key)) continue;
    const feature = UNSUPPORTED_FIELDS.get(key);
    // null is how a client leaves an optional field unset.
    if (feature === undefined) failExtra(key);
    if (body[key] !== null) {
      fail(key, `absent (the scripted model does not support ${feature})`, body[key]);
    }
  }
}

function checkMaxTokens(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    fail('max_tokens', 'a positive integer', value);
  }
  return value;
}

function checkThread(value: unknown): ThreadRequest | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value)) fail('thread', '{"type": "create"} or {"type": "continue", ...}', value);
  if (value.type === 'create') {
    checkKeys(value, THREAD_CREATE_KEYS, 'thread');
    return { type: 'create' };
  }
  if (value.type !== 'continue') fail('thread.type', '"create" or "continue"', value.type);
  checkKeys(value, THREAD_CONTINUE_KEYS, 'thread');
  const id = value.previous_message_id;
  if (typeof id !== 'string' || id.length === 0) {
    fail('thread.previous_message_id', 'a non-empty string', id);
  }
  return { type: 'continue', previousMessageId: id };
}

function checkSystem(system: unknown): string {
  if (system === undefined) return '';
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) fail('system', 'a string or an array of text blocks', system);
  return system
    .map((block: unknown, index) => checkTextBlock(block, `system.${index}`).text)
    .join('\n');
}

function checkToolsAndThinking(
  body: Record<string, unknown>,
  maxTokens: number,
  countTokens: boolean,
): ConversationContext {
  const tools = checkTools(body.tools);
  const toolChoice = checkToolChoice(body.tool_choice);
  const thinking = checkThinking(body.thinking, maxTokens, countTokens);
  const forced = toolChoice.type === 'any' || toolChoice.type === 'tool';
  if (forced && thinking.type === 'enabled') {
    fail(
      'tool_choice.type',
      '"auto" or "none" with thinking enabled (the real API refuses forced tool use with thinking)',
      toolChoice.type,
    );
  }
  // Adaptive thinking accepts forced tool use by skipping thinking: the answer starts with the call.
  if (forced && thinking.type === 'adaptive') thinking.enabled = false;
  return { tools, toolChoice, thinking };
}

function checkThinking(value: unknown, maxTokens: number, countTokens: boolean): ThinkingConfig {
  if (value === undefined) return { type: 'disabled', enabled: false, budgetTokens: 0 };
  if (!isRecord(value)) fail('thinking', 'an object such as {"type": "enabled", ...}', value);
  switch (value.type) {
    case 'enabled': {
      checkKeys(value, THINKING_ENABLED_KEYS, 'thinking');
      checkDisplay(value.display);
      const budget = value.budget_tokens;
      const fits = countTokens || (typeof budget === 'number' && budget < maxTokens);
      if (typeof budget !== 'number' || !Number.isInteger(budget) || budget < 1024 || !fits) {
        const below = countTokens ? '' : ` and less than max_tokens (${maxTokens})`;
        fail('thinking.budget_tokens', `an integer of at least 1024${below}`, budget);
      }
      return { type: 'enabled', enabled: true, budgetTokens: budget };
    }
    case 'adaptive':
      checkKeys(value, THINKING_ADAPTIVE_KEYS, 'thinking');
      checkDisplay(value.display);
      // The model picks its own budget; the scripted model's is half of max_tokens.
      return { type: 'adaptive', enabled: true, budgetTokens: Math.floor(maxTokens / 2) };
    case 'disabled':
    case 'between_tools':
      // between_tools is thinking off, plus progress notes the scripted model never writes.
      checkKeys(value, THINKING_OFF_KEYS, 'thinking');
      return { type: value.type, enabled: false, budgetTokens: 0 };
    default:
      return fail(
        'thinking.type',
        '"enabled", "adaptive", "disabled" or "between_tools"',
        value.type,
      );
  }
}

function checkDisplay(display: unknown): void {
  if (display === undefined || display === null || display === 'summarized') return;
  const why =
    display === 'omitted' ? ' (the scripted model does not support omitted thinking)' : '';
  fail('thinking.display', `"summarized" or null${why}`, display);
}

function checkStopSequences(value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail('stop_sequences', 'an array of strings', value);
  value.forEach((sequence: unknown, index) => {
    if (typeof sequence !== 'string' || sequence.trim().length === 0) {
      fail(
        `stop_sequences.${index}`,
        'a string with at least one non-whitespace character',
        sequence,
      );
    }
  });
  return value as string[];
}

/** The fields that change nothing the scripted model says, checked for their type. */
function checkOptionalFields(body: Record<string, unknown>, thinking: ThinkingConfig): void {
  const { stream, metadata, service_tier: serviceTier, speed } = body;
  if (stream !== undefined && typeof stream !== 'boolean') fail('stream', 'a boolean', stream);
  checkSampling(body, thinking.type === 'enabled' || thinking.type === 'adaptive');
  if (metadata !== undefined) {
    if (!isRecord(metadata)) fail('metadata', 'an object', metadata);
    checkKeys(metadata, METADATA_KEYS, 'metadata');
    checkOptionalString(metadata.user_id, 'metadata.user_id', true);
  }
  if (serviceTier !== undefined && serviceTier !== 'auto' && serviceTier !== 'standard_only') {
    fail('service_tier', '"auto" or "standard_only"', serviceTier);
  }
  checkOptionalString(body.inference_geo, 'inference_geo', true);
  checkCacheControl(body.cache_control, 'cache_control');
  if (speed !== undefined && speed !== null && speed !== 'standard') {
    const why = speed === 'fast' ? ' (the scripted model has no fast mode)' : '';
    fail('speed', `"standard" or null${why}`, speed);
  }
  checkOutputConfig(body.output_config);
}

/**
 * temperature, top_p and top_k; thinking allows only temperature 1 and top_p from 0.95. As the
 * real API does for current models, temperature and top_p may not be given together.
 */
function checkSampling(body: Record<string, unknown>, thinking: boolean): void {
  const { temperature, top_p: topP, top_k: topK } = body;
  if (temperature !== undefined) {
    if (typeof temperature !== 'number' || temperature < 0 || temperature > 1) {
      fail('temperature', 'a number from 0 to 1', temperature);
    }
    if (thinking && temperature !== 1)
      fail('temperature', '1 or absent with thinking on', temperature);
  }
  if (topP !== undefined) {
    const lowest = thinking ? 0.95 : 0;
    if (typeof topP !== 'number' || topP < lowest || topP > 1) {
      fail('top_p', `a number from ${lowest} to 1${thinking ? ' with thinking on' : ''}`, topP);
    }
  }
  if (temperature !== undefined && topP !== undefined) {
    throw new RequestProblem(
      '`temperature` and `top_p` cannot both be specified for this model. Please use only one.',
    );
  }
  if (topK !== undefined) {
    if (thinking) fail('top_k', 'absent with thinking on', topK);
    if (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 0) {
      fail('top_k', 'an integer from 0 up', topK);
    }
  }
}

function checkOutputConfig(value: unknown): void {
  if (value === undefined) return;
  if (!isRecord(value)) fail('output_config', 'an object', value);
  for (const key in value) {
    const field = value[key];
    if (key === 'effort') {
      if (field !== null && (typeof field !== 'string' || !EFFORTS.has(field))) {
        fail('output_config.effort', '"low", "medium", "high", "xhigh", "max" or null', field);
      }
    } else if (key === 'format' || key === 'task_budget') {
      const feature = key === 'format' ? 'produce structured output' : 'support task budgets';
      if (field !== null) {
        fail(`output_config.${key}`, `absent (the scripted model does not ${feature})`, field);
      }
    } else {
      failExtra(`output_config.${key}`);
    }
  }
}
