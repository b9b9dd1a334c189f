import type { BudgetKind } from './budget.js';
import { budgetNoticeKind } from './budget-meter.js';
import { defined } from './option-schema.js';
import type { ContentBlockParam, MessageParam, ToolCall } from './provider/types.js';
import { BAD_REPLY_PREFIX, NUDGE_TEXT } from './tools/reply.js';
import { REPLY_TOOL } from './tools/types.js';

/** A child's state read back from its transcript, to resume it on a fresh worker. */
export interface RestoredState {
  /** The committed messages, ending with a user message. */
  messages: MessageParam[];
  nudged: boolean;
  /** Assistant messages so far: the steps taken. */
  steps: number;
  /** Steps that count against maxSteps (the one after the nudge does not). */
  counted: number;
  /** The nudge was the last thing committed: the next step is the free one. */
  nextStepFree: boolean;
  /** Typed replies refused so far. */
  badReplies: number;
  /** A budget's notice was committed and its last turn not yet taken: the next step is it. */
  finalTurn?: BudgetKind;
  /**
   * The last step's response was committed and its tool calls were not answered: they run again
   * (tools are at-least-once), its provider request does not. A spawn among them finds the child
   * it already started.
   */
  pending?: ToolCall[];
  /** The child had already finished when its worker died. */
  ended?:
    | { kind: 'replied'; replies: unknown[]; budgetExceeded?: BudgetKind }
    | { kind: 'empty'; budgetExceeded?: BudgetKind };
}

/** The budget kind whose notice `message` carries, if it is a user message that carries one. */
function noticeIn(message: MessageParam): BudgetKind | undefined {
  if (message.role !== 'user') return undefined;
  for (const block of blocks(message)) {
    const kind = block.type === 'text' ? budgetNoticeKind(block.text) : undefined;
    if (kind !== undefined) return kind;
  }
  return undefined;
}

function isBadReply(block: ContentBlockParam): boolean {
  return (
    block.type === 'tool_result' &&
    block.is_error === true &&
    typeof block.content === 'string' &&
    block.content.startsWith(BAD_REPLY_PREFIX)
  );
}

function blocks(message: MessageParam): ContentBlockParam[] {
  return typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : message.content;
}

function isNudge(message: MessageParam): boolean {
  return message.role === 'user' && message.content === NUDGE_TEXT;
}

/**
 * Reads a transcript.jsonl back. A torn or unparsable line ends it (nothing after it is
 * trusted); an assistant message whose tool calls were never answered is dropped, so that step
 * runs again (tools are at-least-once across a crash). Returns undefined when nothing usable is
 * there (the child then starts over from its prompt).
 */
export function restoreTranscript(text: string): RestoredState | undefined {
  const messages: MessageParam[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const message = JSON.parse(line) as MessageParam;
      if (message.role !== 'user' && message.role !== 'assistant') break;
      messages.push(message);
    } catch {
      break;
    }
  }
  if (messages.length === 0 || messages[0]!.role !== 'user') return undefined;
  // Roles alternate in anything we wrote; trust nothing past the first place they do not.
  const broken = messages.findIndex(
    (message, index) => index > 0 && message.role === messages[index - 1]!.role,
  );
  if (broken > 0) messages.length = broken;
  const nudgeAt = messages.findIndex(isNudge);
  const nudged = nudgeAt >= 0;
  // The prompt (message 0) is the user's: a notice is only ever committed after a step.
  const noticeAt = messages.findIndex(
    (message, index) => index > 0 && noticeIn(message) !== undefined,
  );
  const notice = noticeAt >= 0 ? noticeIn(messages[noticeAt]!) : undefined;
  const over = defined({ budgetExceeded: notice });
  let ended: RestoredState['ended'];
  let pending: ToolCall[] | undefined;
  const last = messages.at(-1)!;
  if (last.role === 'assistant') {
    const calls = blocks(last).flatMap((block) =>
      block.type === 'tool_use' ? [{ id: block.id, name: block.name, input: block.input }] : [],
    );
    // A lone assistant message without calls is a terminal commit: after the nudge, or in the
    // last turn a budget gave, `empty`. One with calls was committed before they ran.
    if (calls.length > 0) pending = calls;
    else if (nudged || notice !== undefined) ended = { kind: 'empty', ...over };
    else messages.pop();
  } else if (messages.length >= 2) {
    const answered = messages.at(-2)!;
    const replies = blocks(answered).flatMap((block) =>
      block.type === 'tool_use' && block.name === REPLY_TOOL ? [block] : [],
    );
    const results = new Map(
      blocks(last).flatMap((block) =>
        block.type === 'tool_result' ? [[block.tool_use_id, block] as const] : [],
      ),
    );
    const accepted = replies.filter((call) => {
      const result = results.get(call.id);
      return result !== undefined && result.is_error !== true;
    });
    if (accepted.length > 0) {
      ended = {
        kind: 'replied',
        replies: accepted.map((call) => (call.input as { result?: unknown }).result),
        ...over,
      };
    } else if (notice !== undefined && noticeAt < messages.length - 1) {
      // The last turn was taken, and it did not reply.
      ended = { kind: 'empty', ...over };
    }
  }
  const badReplies = messages
    .filter((message) => message.role === 'user')
    .reduce((count, message) => count + blocks(message).filter(isBadReply).length, 0);
  const steps = messages.filter((message) => message.role === 'assistant').length;
  const afterNudge = nudged
    ? messages.slice(nudgeAt + 1).some((message) => message.role === 'assistant')
    : false;
  return {
    messages,
    nudged,
    steps,
    counted: steps - (afterNudge ? 1 : 0),
    nextStepFree:
      nudged && !afterNudge && messages.at(-1) !== undefined && isNudge(messages.at(-1)!),
    badReplies,
    // The notice is the last user message: the turn it gave is next, or is the pending step.
    ...(notice !== undefined && noticeAt === messages.length - (pending ? 2 : 1)
      ? { finalTurn: notice }
      : {}),
    ...(ended ? { ended } : {}),
    ...(pending ? { pending } : {}),
  };
}
