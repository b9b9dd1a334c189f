import type { PlannedTurn } from './default-policy.js';
import { type MessagesRequest, messageText } from './messages-api.js';
import { CHARS_PER_TOKEN, cutPrefix } from './output-shaping.js';

const QUOTE_CHARS = 160;
const TOOL_NAMES = 8;

function subject(request: MessagesRequest): string {
  const last = request.messages.findLast((message) => message.role === 'user');
  const text = last === undefined ? '' : messageText(last).trim();
  if (text !== '') {
    const clipped = text.length > QUOTE_CHARS ? `${cutPrefix(text, QUOTE_CHARS - 3)}...` : text;
    return `about ${JSON.stringify(clipped)}`;
  }
  const results = last?.blocks.filter((block) => block.type === 'tool_result').length ?? 0;
  return `me to go on from ${results} tool result(s)`;
}

function toolsOffered(request: MessagesRequest): string {
  const names = request.tools.map((tool) => tool.name);
  if (names.length === 0) return 'No tools are offered.';
  const shown = names.slice(0, TOOL_NAMES).join(', ');
  const more = names.length > TOOL_NAMES ? ` and ${names.length - TOOL_NAMES} more` : '';
  return `Tools offered: ${shown}${more}.`;
}

function intent(turn: PlannedTurn): string {
  if (turn.calls.length > 0) {
    return `I will call ${[...new Set(turn.calls.map((call) => call.name))].join(', ')}.`;
  }
  if (turn.text !== undefined && turn.text !== '') return 'I will answer in text.';
  return 'I have nothing to add.';
}

/**
 * The text of the thinking block that opens a response when `thinking` is enabled:
 * derived from the request and the planned turn alone, so a conversation replays the
 * same way, and cut to `budget_tokens` × 4 characters.
 */
export function thinkingText(
  request: MessagesRequest,
  turnIndex: number,
  turn: PlannedTurn,
): string {
  const text = `Turn ${turnIndex}: the request asks ${subject(request)}. ${toolsOffered(request)} ${intent(turn)}`;
  return cutPrefix(text, request.thinking.budgetTokens * CHARS_PER_TOKEN);
}
