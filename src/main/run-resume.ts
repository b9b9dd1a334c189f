/**
 * Resuming a session's run after its process stopped (`Session.resume`, `cohort run --resume`):
 * every agent of the run (read by `stopped-run.ts`) handed back to the scope of its parent, each
 * as it stood: one that settled is delivered if its parent's transcript does not hold it yet; one
 * that was still running goes on from its last committed step, under its own id. No agent is
 * spawned twice, and no committed step is asked of the model again.
 */
import type { AgentEvent } from '../shared/events.js';
import { keepsLog } from '../shared/journal/policy.js';
import type { AgentHistory } from '../shared/journal/reader.js';
import { journalResult } from '../shared/journal/writer.js';
import type { MessageParam } from '../shared/provider/types.js';
import type { AgentResult, CancelReason } from '../shared/result.js';
import { emptyUsage } from '../shared/result.js';
import type { Engine } from './engine.js';
import type { AgentOptions } from './engine-options.js';
import { ROOT_ID } from './root-journal.js';
import type { Adoption, AgentScope } from './scope.js';
import {
  deliveredIn,
  interrupted,
  numberOf,
  type StoppedRun,
  textOf,
  titleOf,
} from './stopped-run.js';

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
  const settle = (agent: AgentHistory, result: Omit<AgentResult, 'id' | 'title'>): AgentResult => {
    const made: AgentResult = { id: agent.id, title: titleOf(agent), ...result };
    journalResult(engine.logDir, made, keepsLog(engine.logPolicy, made.outcome));
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
