/**
 * Resuming a session's run after its process stopped (`Session.resume`, `cohort run --resume`):
 * the root's transcript and generation read back from the run journal, and every agent of the
 * run handed back to the scope of its parent, each as it stood: one that settled is delivered if
 * its parent's transcript does not hold it yet; one that was still running goes on from its last
 * committed step, under its own id. No agent is spawned twice, and no committed step is asked
 * of the model again.
 */
import { UsageError } from '../shared/errors.js';
import type { AgentEvent } from '../shared/events.js';
import { keepsLog } from '../shared/journal/policy.js';
import { type AgentHistory, readRun } from '../shared/journal/reader.js';
import { journalFor } from '../shared/journal/writer.js';
import type { ContentBlockParam, MessageParam, ToolCall } from '../shared/provider/types.js';
import type { AgentResult, CancelReason } from '../shared/result.js';
import { emptyUsage } from '../shared/result.js';
import type { Engine } from './engine.js';
import type { AgentOptions } from './engine-options.js';
import { ROOT_ID } from './root-journal.js';
import type { Adoption, AgentScope } from './scope.js';

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

/** What a resume did with the run's agents. */
export interface ResumeCounts {
  /** Agents that go on from their last committed step. */
  resumed: number;
  /** Settled results not yet in their parent's transcript, delivered now. */
  undelivered: number;
  /** Agents failed because a record of theirs does not parse. */
  corrupt: number;
}

/**
 * Hands every agent of `run` back to its parent: the root's children to `root` (the resumed
 * session's scope), deeper ones to their parent's scope when it is made. Agents whose parent
 * settled, and async agents of an older generation, are not run again: they get the result
 * they would have had (cancelled `parent`, or `clear`), journaled on main.
 */
export function resumeAgents(
  engine: Engine,
  root: AgentScope,
  run: StoppedRun,
  emit: (event: AgentEvent) => void,
): ResumeCounts {
  const counts: ResumeCounts = { resumed: 0, undelivered: 0, corrupt: 0 };
  const byParent = new Map<string, AgentHistory[]>();
  for (const agent of run.agents.values()) {
    const parent = parentOf(agent);
    if (parent === undefined) continue;
    const siblings = byParent.get(parent);
    if (siblings) siblings.push(agent);
    else byParent.set(parent, [agent]);
  }
  const journal = journalFor(engine.logDir);
  const settle = (agent: AgentHistory, result: Omit<AgentResult, 'id' | 'title'>): AgentResult => {
    const made: AgentResult = { id: agent.id, title: titleOf(agent), ...result };
    const keep = keepsLog(engine.logPolicy, made.outcome);
    journal.append({ k: 'result', a: agent.id, at: Date.now(), keep, r: made });
    return made;
  };
  const ended = (agent: AgentHistory, reason: CancelReason) =>
    settle(agent, endedBefore(agent, 'cancelled', reason));

  // Parents are resumed after their children, so a resumed parent's scope finds every one of
  // its own waiting for it.
  const visit = (parent: string, transcript: readonly MessageParam[], live: boolean): void => {
    const delivered = deliveredIn(transcript);
    for (const agent of byParent.get(parent) ?? []) {
      const mode = agent.meta?.mode === 'sync' ? 'sync' : 'async';
      const generation = numberOf(agent.meta?.generation);
      const base = {
        id: agent.id,
        title: titleOf(agent),
        mode,
        callId: typeof agent.meta?.call === 'string' ? agent.meta.call : undefined,
        generation,
      } as const;
      const adopt = (adoption: Adoption) =>
        parent === ROOT_ID ? root.adopt(adoption) : engine.adoptLater(parent, adoption);
      const finished = agent.result !== undefined && !interrupted(agent.result);
      if (!live) {
        // Its parent settled: it was cancelled with it, or would have been.
        if (!finished) ended(agent, 'parent');
        visit(agent.id, agent.messages, false);
        continue;
      }
      if (finished) {
        const isDelivered = delivered.has(agent.id);
        if (mode === 'async' && !isDelivered) counts.undelivered++;
        adopt({ ...base, result: agent.result!, delivered: isDelivered });
        visit(agent.id, agent.messages, false);
        continue;
      }
      if (agent.corrupt) {
        counts.corrupt++;
        const result = settle(agent, {
          ...endedBefore(agent, 'failed'),
          code: 'journal_corrupt',
          reason: `a record of ${agent.id} in the journal of ${run.dir} does not parse: what it did after it is not known, so it was not run again`,
        });
        adopt({ ...base, result });
        visit(agent.id, agent.messages, false);
        continue;
      }
      if (parent === ROOT_ID && mode === 'async' && generation < run.root.generation) {
        // Cleared before the stop: its result would never have been delivered.
        ended(agent, 'clear');
        visit(agent.id, agent.messages, false);
        continue;
      }
      visit(agent.id, agent.messages, true);
      let handle: Adoption['handle'];
      try {
        handle = engine.spawn(
          optionsOf(agent, mode === 'sync' && parent === ROOT_ID ? emit : undefined),
          {
            depth: numberOf(agent.meta?.depth, 1),
            generation,
            mode,
            parent,
            ...(base.callId === undefined ? {} : { callId: base.callId }),
            resumeOf: { id: agent.id, inc: agent.inc + 1 },
          },
        );
      } catch (error) {
        // Its agent file went, or a tool it names: it cannot go on as it was.
        const message = error instanceof Error ? error.message : String(error);
        adopt({
          ...base,
          result: settle(agent, {
            ...endedBefore(agent, 'failed'),
            code: 'internal',
            reason: `could not resume: ${message}`,
          }),
        });
        continue;
      }
      counts.resumed++;
      adopt({ ...base, handle });
    }
  };
  visit(ROOT_ID, run.root.messages, true);
  return counts;
}

/** The spawn that makes `agent` again, from its journaled meta and transcript. */
function optionsOf(
  agent: AgentHistory,
  onEvent: ((event: AgentEvent) => void) | undefined,
): AgentOptions {
  const meta = agent.meta ?? {};
  const first = agent.messages[0];
  const prompt = typeof first?.content === 'string' ? first.content : textOf(first);
  const options: AgentOptions = {
    prompt,
    title: titleOf(agent),
    resumeFrom: { messages: agent.messages },
  };
  if (typeof meta.system === 'string') options.system = meta.system;
  if (Array.isArray(meta.select)) options.tools = meta.select as string[];
  if (typeof meta.agent === 'string') options.agent = meta.agent;
  if (typeof meta.model === 'string') options.model = meta.model;
  if (typeof meta.maxSteps === 'number') options.maxSteps = meta.maxSteps;
  if (typeof meta.key === 'string') options.key = meta.key;
  if (meta.outputSchema && typeof meta.outputSchema === 'object') {
    options.outputSchema = meta.outputSchema as Record<string, unknown>;
  }
  if (onEvent) {
    options.onEvent = onEvent;
    options.streamText = true;
  }
  return options;
}

/** Who spawned `agent`: its meta says; a journal without it had only the root spawn. */
function parentOf(agent: AgentHistory): string | undefined {
  if (typeof agent.meta?.parent === 'string') return agent.meta.parent;
  return agent.meta?.depth === 1 ? ROOT_ID : undefined;
}

/** A result cut short by a stop (SIGTERM, a second Ctrl-C): the agent is resumed. */
function interrupted(result: AgentResult): boolean {
  return result.outcome === 'cancelled' && result.reason === 'shutdown';
}

/** A result made on main for an agent that did not run again. */
function endedBefore(
  agent: AgentHistory,
  outcome: 'cancelled' | 'failed',
  reason?: CancelReason,
): Omit<AgentResult, 'id' | 'title'> {
  const usage = emptyUsage();
  usage.steps = agent.steps;
  return {
    outcome,
    text: '',
    truncated: false,
    elapsedMs: 0,
    generation: numberOf(agent.meta?.generation),
    usage,
    ...(reason === undefined ? {} : { reason }),
  };
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

function blocksOf(message: MessageParam): ContentBlockParam[] {
  return typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : message.content;
}

function textOf(message: MessageParam | undefined): string {
  if (!message) return '';
  return blocksOf(message)
    .map((block) => (block.type === 'text' ? block.text : ''))
    .join('');
}

function lastText(messages: readonly MessageParam[]): string {
  const last = messages.at(-1);
  return last?.role === 'assistant' ? textOf(last) : '';
}

function titleOf(agent: AgentHistory): string {
  return typeof agent.meta?.title === 'string' ? agent.meta.title : agent.id;
}

function numberOf(value: unknown, fallback = 0): number {
  return typeof value === 'number' ? value : fallback;
}
