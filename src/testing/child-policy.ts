import {
  firstLine,
  lastUser,
  listingPaths,
  taskText,
  toolResults,
  toolUses,
} from './conversation.js';
import type { PlannedTurn } from './default-policy.js';
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
import { listPattern, type NamedPath, namedPaths } from './path-mentions.js';
import { type ReadFile, readHints } from './read-hints.js';
import { schemaValue } from './schema-value.js';
import type { ExpandedCall } from './script.js';

/** A child reads this many files at most, however many its prompt's folders hold. */
export const MAX_CHILD_READS = 20;

/**
 * A child's turn on the default policy (docs/SCRIPTED-MODEL.md): read the files its prompt names
 * (a folder's through `list_files`), then reply with a digest of each, or, when its `reply` asks
 * for a typed result, with a value made from that schema and what it read.
 */
export function childTurn(request: MessagesRequest, tools: Set<string>): PlannedTurn {
  const { messages } = request;
  const prompt = messages[0] === undefined ? '' : messageText(messages[0]);
  const uses = toolUses(messages);
  const callOf = new Map(uses.map((use) => [use.id, use]));
  const lastResults = toolResults(lastUser(messages));
  const task = taskText(messages[0]);
  const named = namedPaths(task);
  if (uses.some((use) => use.name === 'reply')) {
    // A typed reply the worker refused is made again the same way, so a schema this policy cannot
    // satisfy ends the child `bad_reply` naming the mismatch, rather than `empty`.
    const refused = lastResults.some(
      (result) => result.is_error === true && callOf.get(result.tool_use_id)?.name === 'reply',
    );
    return refused ? replyTurn(request, { prompt, task, named }) : { text: 'Done.', calls: [] };
  }
  const anyToolResult = messages.some((message) => toolResults(message).length > 0);
  if (!anyToolResult) {
    const first = firstReads(named, tools);
    if (first.calls.length > 0) return first;
  } else if (tools.has('read_file')) {
    const listings = lastResults.filter(
      (result) => callOf.get(result.tool_use_id)?.name === 'list_files',
    );
    if (listings.length > 0) {
      const next = listedToRead(messages, uses);
      if (next.paths.length > 0) return readTurn(next.paths, next.listed);
    }
  }
  return replyTurn(request, { prompt, task, named });
}

/** The first turn: read the files named, and list the folders and globs named, at once. */
function firstReads(named: NamedPath[], tools: Set<string>): PlannedTurn {
  if (!tools.has('read_file') || named.length === 0) return { calls: [] };
  const canList = tools.has('list_files');
  // Without list_files a folder cannot be listed: it is read as named, and its read fails.
  const read = named
    .filter((entry) => entry.kind === 'file' || (!canList && entry.kind === 'folder'))
    .slice(0, MAX_CHILD_READS);
  const listed = canList ? named.filter((entry) => entry.kind !== 'file') : [];
  const calls: ExpandedCall[] = read.map((entry) => readCall(entry.path));
  if (listed.length > 0) {
    calls.push({ name: 'list_files', input: { pattern: listPattern(listed) } });
  }
  if (calls.length === 0) return { calls };
  const parts: string[] = [];
  if (read.length > 0) parts.push(`Reading ${quotedList(read.map((entry) => entry.path))}`);
  if (listed.length > 0) parts.push(`listing ${quotedList(listed.map((entry) => entry.path))}`);
  const text = parts.join('; ');
  return { text: `${text.charAt(0).toUpperCase()}${text.slice(1)}.`, calls };
}

function readCall(path: string): ExpandedCall {
  return { name: 'read_file', input: { path } };
}

function quotedList(paths: string[]): string {
  return paths.map((path) => `\`${path}\``).join(', ');
}

/** Each file the listings named, in order, once. */
function listedPaths(messages: RequestMessage[], uses: ToolUseBlock[]): string[] {
  const listings = new Set(uses.filter((use) => use.name === 'list_files').map((use) => use.id));
  const paths: string[] = [];
  for (const message of messages) {
    for (const result of toolResults(message)) {
      if (!listings.has(result.tool_use_id)) continue;
      for (const path of listingPaths(result)) if (!paths.includes(path)) paths.push(path);
    }
  }
  return paths;
}

function readPaths(uses: ToolUseBlock[]): string[] {
  return uses
    .filter((use) => use.name === 'read_file' && typeof use.input.path === 'string')
    .map((use) => use.input.path as string);
}

/** The listed files not read yet, within what is left of MAX_CHILD_READS. */
function listedToRead(
  messages: RequestMessage[],
  uses: ToolUseBlock[],
): { paths: string[]; listed: number } {
  const listed = listedPaths(messages, uses);
  const read = readPaths(uses);
  const room = Math.max(0, MAX_CHILD_READS - read.length);
  return {
    paths: listed.filter((path) => !read.includes(path)).slice(0, room),
    listed: listed.length,
  };
}

function readTurn(paths: string[], listed: number): PlannedTurn {
  const text =
    paths.length === 1
      ? `Reading \`${paths[0]}\`.`
      : listed > paths.length
        ? `Reading ${paths.length} of the ${listed} files listed (at most ${MAX_CHILD_READS} are read).`
        : `Reading the ${paths.length} files listed.`;
  return { text, calls: paths.map(readCall) };
}

interface Read {
  path: string;
  result: ToolResultBlock;
}

/** Every read_file call with its result, in call order. */
function reads(messages: RequestMessage[], uses: ToolUseBlock[]): Read[] {
  const results = new Map<string, ToolResultBlock>();
  for (const message of messages) {
    for (const result of toolResults(message)) results.set(result.tool_use_id, result);
  }
  const found: Read[] = [];
  for (const use of uses) {
    const result = results.get(use.id);
    if (use.name !== 'read_file' || result === undefined) continue;
    const path = typeof use.input.path === 'string' ? use.input.path : '(unknown path)';
    found.push({ path, result });
  }
  return found;
}

/**
 * The reply: a digest line per file read (a failed read is reported, unless its path was only a
 * plain word of the prompt that looked like one), a line when the read cap left listed files
 * out, or else a digest of the prompt; typed when the reply tool asks for a schema.
 */
function replyTurn(
  request: MessagesRequest,
  { prompt, task, named }: { prompt: string; task: string; named: NamedPath[] },
): PlannedTurn {
  const { messages } = request;
  const uses = toolUses(messages);
  const guessed = new Set(named.filter((entry) => !entry.quoted).map((entry) => entry.path));
  const files: ReadFile[] = [];
  const lines: string[] = [];
  for (const { path, result } of reads(messages, uses)) {
    const text = toolResultText(result);
    if (result.is_error !== true) {
      files.push({ path, text });
      lines.push(digestFile(path, text));
    } else if (!guessed.has(path)) {
      lines.push(`${path}: could not be read: ${firstLine(text)}`);
    }
  }
  const listed = listedPaths(messages, uses);
  const readNow = new Set(readPaths(uses));
  const unread = listed.filter((path) => !readNow.has(path)).length;
  if (unread > 0) {
    lines.push(
      `(${listed.length - unread} of the ${listed.length} files listed were read: at most ${MAX_CHILD_READS} are.)`,
    );
  }
  const digest = lines.length > 0 ? lines.join('\n') : digestPrompt(prompt);
  const typed = typedReply(request);
  if (typed === undefined) return { calls: [{ name: 'reply', input: { result: digest } }] };
  const { value } = schemaValue(typed.schema, {
    document: typed.document,
    hints: readHints({ prompt: task, files, digest }),
  });
  return { calls: [{ name: 'reply', input: { result: value } }] };
}

/** Keywords that describe a schema without constraining it: `{description}` is untyped. */
const ANNOTATIONS = new Set(['title', 'description', '$comment', 'examples', 'default', '$schema']);

/**
 * The schema the `reply` tool asks `result` to match, with the tool's input schema as the
 * document its `$ref`s resolve in; undefined for an untyped reply (`result: {}`).
 */
function typedReply(
  request: MessagesRequest,
): { schema: unknown; document: Record<string, unknown> } | undefined {
  const document = request.tools.find((tool) => tool.name === 'reply')?.input_schema;
  if (document === undefined || !isRecord(document.properties)) return undefined;
  const schema = document.properties.result;
  if (schema === false) return { schema, document };
  if (!isRecord(schema)) return undefined;
  if (!Object.keys(schema).some((key) => !ANNOTATIONS.has(key))) return undefined;
  return { schema, document };
}
