/**
 * A stopped session's run read back from its journal, for `Session.resume` (`run-resume.ts` hands
 * its agents back): the root's transcript, generation and the turn it was in, and every agent's
 * history.
 */
import { UsageError } from '../shared/errors.js';
import { type AgentHistory, readRun } from '../shared/journal/reader.js';
import type { ContentBlockParam, MessageParam, ToolCall } from '../shared/provider/types.js';
import type { AgentResult } from '../shared/result.js';
import { ROOT_ID } from './root-journal.js';

/** The root of a stopped run, as its journal tells it. */
export interface StoppedRoot {
  /** The root's last run (`inc`): the resumed one is the next. */
  inc: number;
  generation: number;
  system: string | undefined;
  /** Its transcript, a user message after a user message merged as the session does. */
  messages: MessageParam[];
  /** The last committed response's calls, never answered: they run again, the request does not. */
  pending: ToolCall[] | undefined;
  /** A turn was under way: the last message is the user's, and its request goes (again). */
  underWay: boolean;
  /** The session had closed with its work done (not stopped by a signal). */
  ended: boolean;
  /** The root's last text, for a run that ended. */
  lastText: string;
}

/** A stopped run: its root and every other agent. */
export interface StoppedRun {
  dir: string;
  root: StoppedRoot;
  agents: Map<string, AgentHistory>;
}

/**
 * Reads the run in `dir` for a resume. Throws a UsageError when there is none, when it was not a
 * session's (a batch's), or when the root's own records are corrupt; a JournalVersionError for
 * another version's journal.
 */
export async function readStoppedRun(dir: string): Promise<StoppedRun> {
  const agents = await readRun(dir);
  if (agents.size === 0) {
    throw new UsageError(`Expected a run journal in ${dir}, got no journal records there`);
  }
  const root = agents.get(ROOT_ID);
  agents.delete(ROOT_ID);
  if (!root || root.inc < 0) {
    throw new UsageError(
      `Expected the journal of a \`cohort run\` session in ${dir}, got one with no root session (a batch's or an engine's run): rerun a batch with the same command instead`,
    );
  }
  if (root.corrupt) {
    throw new UsageError(
      `Expected the root session's records in ${dir} to be whole, got one that does not parse: the root's conversation cannot be restored`,
    );
  }
  const messages = mergeUsers(root.messages);
  const last = messages.at(-1);
  const calls =
    last?.role === 'assistant'
      ? blocksOf(last).flatMap((block) =>
          block.type === 'tool_use' ? [{ id: block.id, name: block.name, input: block.input }] : [],
        )
      : [];
  return {
    dir,
    agents,
    root: {
      inc: root.inc,
      generation: typeof root.meta?.generation === 'number' ? root.meta.generation : 0,
      system: typeof root.meta?.system === 'string' ? root.meta.system : undefined,
      messages,
      pending: calls.length > 0 ? calls : undefined,
      underWay: last?.role === 'user',
      ended: root.result !== undefined && !interrupted(root.result),
      lastText: lastText(messages),
    },
  };
}

/** A result cut short by a stop (SIGTERM, a second Ctrl-C): the agent is resumed. */
export function interrupted(result: AgentResult): boolean {
  return result.outcome === 'cancelled' && result.reason === 'shutdown';
}

/** Ids whose result is in `messages`: each delivery is a block that opens with our header. */
export function deliveredIn(messages: readonly MessageParam[]): Set<string> {
  const ids = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'user') continue;
    for (const block of blocksOf(message)) {
      if (block.type !== 'text' || !block.text.startsWith('{"kind":"agent_result"')) continue;
      try {
        const header = JSON.parse(block.text.split('\n', 1)[0]!) as { id?: unknown };
        if (typeof header.id === 'string') ids.add(header.id);
      } catch {
        // Not a header of ours after all.
      }
    }
  }
  return ids;
}

/** A user message that follows a user message joins it, as `Session` appends them. */
function mergeUsers(messages: readonly MessageParam[]): MessageParam[] {
  const merged: MessageParam[] = [];
  for (const message of messages) {
    const last = merged.at(-1);
    if (last?.role === 'user' && message.role === 'user') {
      merged[merged.length - 1] = {
        role: 'user',
        content: [...blocksOf(last), ...blocksOf(message)],
      };
    } else merged.push(message);
  }
  return merged;
}

export function blocksOf(message: MessageParam): ContentBlockParam[] {
  return typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : message.content;
}

export function textOf(message: MessageParam | undefined): string {
  if (!message) return '';
  return blocksOf(message)
    .map((block) => (block.type === 'text' ? block.text : ''))
    .join('');
}

function lastText(messages: readonly MessageParam[]): string {
  const last = messages.at(-1);
  return last?.role === 'assistant' ? textOf(last) : '';
}

export function titleOf(agent: AgentHistory): string {
  return typeof agent.meta?.title === 'string' ? agent.meta.title : agent.id;
}

export function numberOf(value: unknown, fallback = 0): number {
  return typeof value === 'number' ? value : fallback;
}
