import type {
  MessagesRequest,
  RequestBlock,
  RequestMessage,
  RequestTool,
  ToolChoice,
} from './messages-api.js';
import { fail, RequestProblem } from './request-problem.js';

/** What the conversation checks read of a request besides its messages. */
export type ConversationContext = Pick<MessagesRequest, 'tools' | 'toolChoice' | 'thinking'>;

/**
 * Messages with consecutive same-role runs merged into one, as the real API merges them,
 * and the way back to the messages as given, so an error names what the client sent.
 */
export class MergedMessages {
  readonly messages: RequestMessage[] = [];
  // Merged message m holds given messages #first[m] up to #first[m + 1] - 1.
  readonly #first: number[] = [];
  readonly #given: readonly RequestMessage[];

  constructor(given: readonly RequestMessage[]) {
    this.#given = given;
    let copied = false;
    given.forEach((message, index) => {
      const last = this.messages.at(-1);
      if (last?.role !== message.role) {
        this.messages.push(message);
        this.#first.push(index);
        copied = false;
        return;
      }
      // Copy before the first append, so the caller's message objects never change.
      if (!copied) {
        this.messages[this.messages.length - 1] = { role: last.role, blocks: [...last.blocks] };
        copied = true;
      }
      // A loop, not push(...blocks): spreading a run of 100k+ blocks overflows the call stack.
      const blocks = this.messages[this.messages.length - 1]?.blocks ?? [];
      for (const block of message.blocks) blocks.push(block);
    });
  }

  /** `messages.i` of the given list, or `messages.i-j` for a merged run. */
  messageName(merged: number): string {
    const first = this.#first[merged] ?? merged;
    const last = (this.#first[merged + 1] ?? this.#given.length) - 1;
    return last > first ? `messages.${first}-${last}` : `messages.${first}`;
  }

  /** The path, in the given list, of block `blockIndex` of merged message `merged`. */
  blockPath(merged: number, blockIndex: number): string {
    const first = this.#first[merged] ?? merged;
    const end = this.#first[merged + 1] ?? this.#given.length;
    let rest = blockIndex;
    for (let index = first; index < end; index++) {
      const count = this.#given[index]?.blocks.length ?? 0;
      if (rest < count) return `messages.${index}.content.${rest}`;
      rest -= count;
    }
    return `messages.${first}.content.${blockIndex}`;
  }
}

/**
 * The conversation-level checks, on a whole conversation: merges consecutive same-role
 * messages, then checks that the first is from the user, that tool blocks come with tools,
 * that every tool_use is answered in the next message, that `tool_choice` names an advertised
 * tool, and, with thinking enabled, that a tool loop's assistant message and a final
 * assistant message (a prefill) start with thinking. Throws a RequestProblem.
 */
export function checkMergedConversation(
  given: readonly RequestMessage[],
  context: ConversationContext,
): RequestMessage[] {
  checkChoiceAgainstTools(context.toolChoice, context.tools);
  if (given.length === 0) fail('messages', 'a non-empty array', []);
  const merged = new MergedMessages(given);
  const first = merged.messages[0];
  if (first?.role !== 'user') {
    fail('messages.0.role', '"user" (the first message must be from the user)', first?.role);
  }
  checkToolPairing(merged, context.tools.length > 0);
  if (context.thinking.type === 'enabled') {
    checkThinkingEcho(merged);
    checkThinkingPrefill(merged);
  }
  return merged.messages;
}

function checkChoiceAgainstTools(choice: ToolChoice, tools: readonly RequestTool[]): void {
  if (choice.type !== 'any' && choice.type !== 'tool') return;
  if (tools.length === 0) {
    fail('tool_choice.type', '"auto" or "none" when `tools` is empty', choice.type);
  }
  if (choice.type === 'tool' && !tools.some((tool) => tool.name === choice.name)) {
    const names = tools.map((tool) => `"${tool.name}"`).join(', ');
    fail('tool_choice.name', `the name of a tool in \`tools\` (${names})`, choice.name);
  }
}

/**
 * Checks that every tool_use is answered by the next message, and, as the real API does,
 * that a conversation holding tool_use or tool_result blocks defines tools (a thread's
 * continue brings its stored tools, so this is a check of the whole conversation).
 */
function checkToolPairing(merged: MergedMessages, hasTools: boolean): void {
  const { messages } = merged;
  const seenIds = new Set<string>();
  messages.forEach((message, index) => {
    if (!hasTools) refuseToolBlocks(merged, index);
    if (message.role === 'assistant') {
      message.blocks.forEach((block, blockIndex) => {
        if (block.type !== 'tool_use') return;
        if (seenIds.has(block.id)) {
          fail(
            `${merged.blockPath(index, blockIndex)}.id`,
            'a tool_use id not used before',
            block.id,
          );
        }
        seenIds.add(block.id);
      });
    } else {
      checkAnswers(merged, index);
    }
  });
  const last = messages.at(-1);
  const unanswered = last?.role === 'assistant' ? findToolUse(last.blocks) : undefined;
  if (unanswered !== undefined) {
    throw new RequestProblem(
      `Expected a tool_result for tool_use \`${unanswered.id}\` (${unanswered.name}) of ${merged.messageName(messages.length - 1)} in a following user message, got the end of the conversation`,
    );
  }
}

function refuseToolBlocks(merged: MergedMessages, index: number): void {
  const blocks = merged.messages[index]?.blocks ?? [];
  const at = blocks.findIndex((block) => block.type === 'tool_use' || block.type === 'tool_result');
  if (at === -1) return;
  throw new RequestProblem(
    `Requests which include \`tool_use\` or \`tool_result\` blocks must define tools. Expected \`tools\` to be a non-empty array, got no tools (\`${merged.blockPath(index, at)}\` is a ${blocks[at]?.type})`,
  );
}

/** Checks the tool_results of user message `index` against the tool_uses just before it. */
function checkAnswers(merged: MergedMessages, index: number): void {
  const { messages } = merged;
  const open = new Map<string, string>();
  for (const block of messages[index - 1]?.blocks ?? []) {
    if (block.type === 'tool_use') open.set(block.id, block.name);
  }
  const previousName = index > 0 ? merged.messageName(index - 1) : 'the message before';
  const answered = new Set<string>();
  let sawOther = false;
  messages[index]?.blocks.forEach((block, blockIndex) => {
    if (block.type !== 'tool_result') {
      sawOther = true;
      return;
    }
    const path = merged.blockPath(index, blockIndex);
    if (sawOther) {
      fail(
        path,
        'a block other than tool_result (tool_result blocks must come before any text or other block)',
        'tool_result',
      );
    }
    if (!open.has(block.tool_use_id)) {
      fail(
        `${path}.tool_use_id`,
        `the id of a tool_use in ${previousName} (${listIds(open)})`,
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
        `Expected a tool_result for tool_use \`${id}\` (${name}) of ${previousName} in ${merged.messageName(index)}, got none: every tool_use must be answered in the next message`,
      );
    }
  }
}

function findToolUse(blocks: readonly RequestBlock[]) {
  for (const block of blocks) if (block.type === 'tool_use') return block;
  return undefined;
}

function listIds(open: Map<string, string>): string {
  return open.size === 0 ? 'it has none' : [...open.keys()].map((id) => `\`${id}\``).join(', ');
}

function holdsToolResult(message: RequestMessage | undefined): boolean {
  return message?.blocks.some((block) => block.type === 'tool_result') === true;
}

/**
 * With `thinking: {type: "enabled"}`, a tool loop is one assistant turn that the model opened
 * with a thinking block, and the real API wants that block back: the assistant message that
 * opened the loop the last user message continues must start with thinking.
 */
function checkThinkingEcho(merged: MergedMessages): void {
  const { messages } = merged;
  let lastUser = messages.length - 1;
  while (lastUser >= 0 && messages[lastUser]?.role !== 'user') lastUser--;
  if (!holdsToolResult(messages[lastUser])) return;
  // Walk back over the loop: while the user message before an assistant message answers
  // tools too, the loop began earlier.
  let opener = lastUser - 1;
  while (opener >= 2 && holdsToolResult(messages[opener - 1])) opener -= 2;
  const firstBlock = messages[opener]?.blocks[0];
  if (firstBlock?.type === 'thinking' || firstBlock?.type === 'redacted_thinking') return;
  fail(
    `${merged.blockPath(opener, 0)}.type`,
    `"thinking" or "redacted_thinking" (with thinking enabled, the assistant message that opens a tool loop, ${merged.messageName(opener)}, must start with its thinking block, sent back unchanged; or disable thinking)`,
    firstBlock?.type,
  );
}

/**
 * With `thinking: {type: "enabled"}`, the real API continues a final assistant message (a
 * prefill) only if it starts with a thinking or redacted_thinking block.
 */
function checkThinkingPrefill(merged: MergedMessages): void {
  const last = merged.messages.length - 1;
  const message = merged.messages[last];
  if (message?.role !== 'assistant') return;
  const firstBlock = message.blocks[0];
  if (firstBlock?.type === 'thinking' || firstBlock?.type === 'redacted_thinking') return;
  fail(
    `${merged.blockPath(last, 0)}.type`,
    `"thinking" or "redacted_thinking" (with thinking enabled, a final assistant message, ${merged.messageName(last)}, must start with a thinking block; or drop the prefill, or disable thinking)`,
    firstBlock?.type,
  );
}
