import { childTurn } from './child-policy.js';
import { firstLine, lastUser, listingPaths, toolResults, toolUses } from './conversation.js';
import { isRecord } from './is-record.js';
import {
  type MessagesRequest,
  messageText,
  type RequestMessage,
  type RequestTool,
  type ToolResultBlock,
  type ToolUseBlock,
  toolResultText,
} from './messages-api.js';
import { listPattern, namedPaths } from './path-mentions.js';
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
  const last = lastUser(messages);
  if (assistantTurns === 0) {
    if (!tools.has('list_files')) {
      return { text: `Nothing to survey (no list_files tool). ${echo(request)}`, calls: [] };
    }
    const named = namedPaths(last === undefined ? '' : messageText(last));
    if (named.length > 0) {
      return {
        text: `Listing what the prompt names: ${named.map((entry) => `\`${entry.path}\``).join(', ')}.`,
        calls: [{ name: 'list_files', input: { pattern: listPattern(named) } }],
      };
    }
    return { text: 'Surveying the workspace.', calls: [SURVEY] };
  }
  const uses = toolUses(messages);
  const nameOf = new Map(uses.map((use) => [use.id, use]));
  const lastResults = toolResults(last);
  const listing = lastResults.find(
    (result) => nameOf.get(result.tool_use_id)?.name === 'list_files',
  );
  if (listing !== undefined) {
    const pattern = nameOf.get(listing.tool_use_id)?.input.pattern;
    // Nothing the prompt named is there (its paths were words that looked like paths): survey.
    if (pattern !== SURVEY.input.pattern && listingPaths(listing).length === 0) {
      return {
        text: 'Nothing the prompt names is in the workspace; surveying all of it.',
        calls: [SURVEY],
      };
    }
    return fanOut(listing, namedAgent(request));
  }

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

const SURVEY = { name: 'list_files', input: { pattern: '**/*' } } satisfies ExpandedCall;

/** The paths of a list_files result, or none when the listing failed. */

/**
 * The named agent (an agent file) the first user message names as a word, if the `agent` tool
 * offers any: the first of the tool's names to appear, case aside. None is chosen otherwise.
 */
function namedAgent(request: MessagesRequest): string | undefined {
  const tool: RequestTool | undefined = request.tools.find((entry) => entry.name === 'agent');
  const properties = tool?.input_schema?.properties;
  const names = isRecord(properties) && isRecord(properties.agent) ? properties.agent.enum : [];
  if (!Array.isArray(names) || request.messages[0] === undefined) return undefined;
  const words = messageText(request.messages[0])
    .toLowerCase()
    .split(/[^\p{L}\p{N}_-]+/u);
  let chosen: { name: string; at: number } | undefined;
  for (const name of names) {
    if (typeof name !== 'string') continue;
    const at = words.indexOf(name.toLowerCase());
    if (at !== -1 && (chosen === undefined || at < chosen.at)) chosen = { name, at };
  }
  return chosen?.name;
}

function fanOut(listing: ToolResultBlock, agent: string | undefined): PlannedTurn {
  if (listing.is_error === true) {
    return { text: `Listing the files failed: ${firstLine(toolResultText(listing))}`, calls: [] };
  }
  const paths = listingPaths(listing);
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
        ...(agent === undefined ? {} : { agent }),
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
