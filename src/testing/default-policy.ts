import { digestFile, digestPrompt } from './digest.js';
import { isRecord } from './is-record.js';
import {
  type MessagesRequest,
  messageText,
  type RequestMessage,
  type ToolResultBlock,
  type ToolUseBlock,
  toolResultText,
} from './messages-api.js';
import type { ExpandedCall } from './script.js';

/** What the model says at one turn: optional text, then tool calls. */
export interface PlannedTurn {
  text?: string;
  calls: ExpandedCall[];
}

/** The root fans out at most this many agents, one per listed file. */
export const MAX_FAN_OUT = 64;
const ECHO_CHARS = 200;

/**
 * Deterministic, plausible agent behaviour for a conversation without a script, decided
 * from the advertised tool names and the messages alone (see docs/SCRIPTED-MODEL.md):
 * a root lists files, fans out one async agent per file and composes their results; a
 * child reads its file and replies with a digest.
 */
export function defaultPolicy(request: MessagesRequest): PlannedTurn {
  const tools = new Set(request.tools.map((tool) => tool.name));
  if (tools.has('reply')) return childTurn(request, tools);
  if (tools.has('agent')) return rootTurn(request, tools);
  return { text: `Scripted model, no script: ${echo(request)}`, calls: [] };
}

function echo(request: MessagesRequest): string {
  const last = lastUser(request.messages);
  const text = last === undefined ? '' : messageText(last).trim();
  const clipped = text.length > ECHO_CHARS ? `${text.slice(0, ECHO_CHARS - 3)}...` : text;
  return `I read ${request.messages.length} message(s); the last one says ${JSON.stringify(clipped)}.`;
}

function lastUser(messages: RequestMessage[]): RequestMessage | undefined {
  return messages.findLast((message) => message.role === 'user');
}

function toolUses(messages: RequestMessage[]): ToolUseBlock[] {
  const uses: ToolUseBlock[] = [];
  for (const message of messages) {
    if (message.role !== 'assistant') continue;
    for (const block of message.blocks) if (block.type === 'tool_use') uses.push(block);
  }
  return uses;
}

function toolResults(message: RequestMessage | undefined): ToolResultBlock[] {
  const results: ToolResultBlock[] = [];
  for (const block of message?.blocks ?? []) if (block.type === 'tool_result') results.push(block);
  return results;
}

// ---- root ------------------------------------------------------------------------------

/** The first line of an inbox block: the data of one settled agent. */
interface InboxResult {
  id: string;
  title: string;
  outcome: string;
  reason?: string;
  text: string;
}

function rootTurn(request: MessagesRequest, tools: Set<string>): PlannedTurn {
  const { messages } = request;
  const assistantTurns = messages.filter((message) => message.role === 'assistant').length;
  if (assistantTurns === 0) {
    if (tools.has('list_files')) {
      return {
        text: 'Surveying the workspace.',
        calls: [{ name: 'list_files', input: { pattern: '**/*' } }],
      };
    }
    return { text: `Nothing to survey (no list_files tool). ${echo(request)}`, calls: [] };
  }
  const uses = toolUses(messages);
  const nameOf = new Map(uses.map((use) => [use.id, use]));
  const last = lastUser(messages);
  const lastResults = toolResults(last);
  const listing = lastResults.find(
    (result) => nameOf.get(result.tool_use_id)?.name === 'list_files',
  );
  if (listing !== undefined) return fanOut(listing);

  const agentCalls = uses.filter((use) => use.name === 'agent');
  const delivered = inboxResults(messages);
  const agentResults = lastResults.filter(
    (result) => nameOf.get(result.tool_use_id)?.name === 'agent',
  );
  if (agentResults.length > 0) {
    const receipts = agentResults.filter((result) => receiptOf(result) !== undefined);
    if (receipts.length === 0) return { text: syncReport(agentResults, nameOf), calls: [] };
    if (delivered.size >= agentCalls.length) {
      return { text: report(agentCalls, delivered, receiptIds(messages, nameOf)), calls: [] };
    }
    return {
      text: `Started ${receipts.length} agents; I will compose the report when their results arrive.`,
      calls: [],
    };
  }
  const lastHasInbox = last?.blocks.some((block) => parseInboxBlock(block) !== undefined) === true;
  if (lastHasInbox) {
    if (delivered.size >= agentCalls.length) {
      return { text: report(agentCalls, delivered, receiptIds(messages, nameOf)), calls: [] };
    }
    return {
      text: `Received ${delivered.size} of ${agentCalls.length} results; waiting for the rest.`,
      calls: [],
    };
  }
  return { text: echo(request), calls: [] };
}

function fanOut(listing: ToolResultBlock): PlannedTurn {
  if (listing.is_error === true) {
    return { text: `Listing the files failed: ${firstLine(toolResultText(listing))}`, calls: [] };
  }
  const paths = toolResultText(listing)
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  if (paths.length === 0) return { text: 'The workspace has no files to digest.', calls: [] };
  const chosen = paths.slice(0, MAX_FAN_OUT);
  const text =
    paths.length > MAX_FAN_OUT
      ? `Found ${paths.length} files; starting one agent for each of the first ${MAX_FAN_OUT} (the cap).`
      : `Found ${paths.length} files; starting one agent per file.`;
  return {
    text,
    calls: chosen.map((path) => ({
      name: 'agent',
      input: {
        title: path,
        prompt: `Read the file \`${path}\` with read_file and reply with a short digest of it.`,
        mode: 'async',
      },
    })),
  };
}

function receiptOf(result: ToolResultBlock): { id: string } | undefined {
  try {
    const value: unknown = JSON.parse(toolResultText(result));
    if (isRecord(value) && typeof value.id === 'string' && value.status === 'started') {
      return { id: value.id };
    }
  } catch {
    // A sync agent's result is its reply text, not a receipt.
  }
  return undefined;
}

/** tool_use id of each agent call → the agent id its async receipt named. */
function receiptIds(
  messages: RequestMessage[],
  nameOf: Map<string, ToolUseBlock>,
): Map<string, string> {
  const ids = new Map<string, string>();
  for (const message of messages) {
    for (const result of toolResults(message)) {
      if (nameOf.get(result.tool_use_id)?.name !== 'agent') continue;
      const receipt = receiptOf(result);
      if (receipt !== undefined) ids.set(result.tool_use_id, receipt.id);
    }
  }
  return ids;
}

function parseInboxBlock(block: RequestMessage['blocks'][number]): InboxResult | undefined {
  if (block.type !== 'text' || !block.text.startsWith('{')) return undefined;
  const newline = block.text.indexOf('\n');
  const head = newline === -1 ? block.text : block.text.slice(0, newline);
  let value: unknown;
  try {
    value = JSON.parse(head);
  } catch {
    return undefined;
  }
  if (!isRecord(value) || value.kind !== 'agent_result' || typeof value.id !== 'string') {
    return undefined;
  }
  const rest = newline === -1 ? '' : block.text.slice(newline + 1).replace(/^\r?\n/, '');
  const result: InboxResult = {
    id: value.id,
    title: typeof value.title === 'string' ? value.title : value.id,
    outcome: typeof value.outcome === 'string' ? value.outcome : 'unknown',
    text: rest,
  };
  if (typeof value.reason === 'string') result.reason = value.reason;
  return result;
}

/** Every agent result delivered through the inbox, by agent id, in delivery order. */
function inboxResults(messages: RequestMessage[]): Map<string, InboxResult> {
  const results = new Map<string, InboxResult>();
  for (const message of messages) {
    if (message.role !== 'user') continue;
    for (const block of message.blocks) {
      const result = parseInboxBlock(block);
      if (result !== undefined && !results.has(result.id)) results.set(result.id, result);
    }
  }
  return results;
}

function section(title: string, body: string): string {
  return `## ${title}\n\n${body.trim() === '' ? '_(no output)_' : body.trim()}`;
}

function report(
  agentCalls: ToolUseBlock[],
  delivered: Map<string, InboxResult>,
  receipts: Map<string, string>,
): string {
  const ordered: InboxResult[] = [];
  const used = new Set<string>();
  for (const call of agentCalls) {
    const agentId = receipts.get(call.id);
    const result = agentId === undefined ? undefined : delivered.get(agentId);
    if (result !== undefined && !used.has(result.id)) {
      ordered.push(result);
      used.add(result.id);
    }
  }
  for (const result of delivered.values()) if (!used.has(result.id)) ordered.push(result);
  const counts = new Map<string, number>();
  for (const result of ordered) counts.set(result.outcome, (counts.get(result.outcome) ?? 0) + 1);
  const tally = [...counts].map(([outcome, count]) => `${count} ${outcome}`).join(', ');
  const sections = ordered.map((result) => {
    if (result.outcome === 'complete') return section(result.title, result.text);
    const reason = result.reason === undefined ? '' : `: ${result.reason}`;
    return section(result.title, `_[${result.outcome}${reason}]_`);
  });
  return [`# Report`, `${ordered.length} results: ${tally || 'none'}.`, ...sections].join('\n\n');
}

function syncReport(results: ToolResultBlock[], nameOf: Map<string, ToolUseBlock>): string {
  const sections = results.map((result) => {
    const title = nameOf.get(result.tool_use_id)?.input.title;
    return section(typeof title === 'string' ? title : result.tool_use_id, toolResultText(result));
  });
  return [`# Report`, `${results.length} results.`, ...sections].join('\n\n');
}

// ---- child -----------------------------------------------------------------------------

const BACKTICK_PATH = /`([^`\s]+)`/;

function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? '(empty)'
  );
}

function reply(result: string): PlannedTurn {
  return { calls: [{ name: 'reply', input: { result } }] };
}

function childTurn(request: MessagesRequest, tools: Set<string>): PlannedTurn {
  const { messages } = request;
  const prompt = messages[0] === undefined ? '' : messageText(messages[0]);
  const uses = toolUses(messages);
  if (uses.some((use) => use.name === 'reply')) return { text: 'Done.', calls: [] };
  const nameOf = new Map(uses.map((use) => [use.id, use]));
  const read = toolResults(lastUser(messages)).find(
    (result) => nameOf.get(result.tool_use_id)?.name === 'read_file',
  );
  if (read !== undefined) {
    const requested = nameOf.get(read.tool_use_id)?.input.path;
    const path = typeof requested === 'string' ? requested : '(unknown path)';
    const text = toolResultText(read);
    if (read.is_error === true) return reply(`${path}: could not be read: ${firstLine(text)}`);
    return reply(digestFile(path, text));
  }
  const anyToolResult = messages.some((message) => toolResults(message).length > 0);
  const path = BACKTICK_PATH.exec(prompt)?.[1];
  if (!anyToolResult && path !== undefined && tools.has('read_file')) {
    return { text: `Reading \`${path}\`.`, calls: [{ name: 'read_file', input: { path } }] };
  }
  return reply(digestPrompt(prompt));
}
