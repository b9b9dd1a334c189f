import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isSegmentName } from '../src/shared/journal/format.js';
import { type AgentHistory, histories, parseSegment } from '../src/shared/journal/reader.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AgentRecord } from './census.js';

/** What the run journal says, checked against the census. */
export interface JournalAudit {
  /** Agents the journal holds records of. */
  journaled: number;
  /** Spawned agents whose result the journal holds. */
  results: number;
  /** Spawned agents whose result the journal does not hold. */
  missingResults: number;
  /** Agents in the journal that no one spawned. */
  strayAgents: number;
  /** Journaled results whose outcome differs from the result the handle delivered. */
  mismatchedResults: number;
  /** Transcripts with a tool_use not answered by a tool_result in the next message. */
  invalidTranscripts: number;
  /** Results delivered into a parent's transcript, by id (a parent at depth ≥ 1). */
  deliveries: Map<string, number>;
  /** Deliveries into a transcript whose owner is not the delivered agent's parent. */
  misdelivered: number;
  /** Deliveries of a result whose generation is not its parent's, by the delivered agent's depth. */
  staleByDepth: Map<number, number>;
}

/** Every agent of the run journal in `dir`. */
function readJournal(dir: string): Map<string, AgentHistory> {
  let names: string[];
  try {
    names = readdirSync(dir).filter(isSegmentName).sort();
  } catch {
    return new Map();
  }
  return histories(
    names.map((name) => parseSegment(name, readFileSync(path.join(dir, name), 'utf8'))),
  );
}

/**
 * Every tool_use is answered, in order, by the next message. The last message may be a response
 * whose calls were never answered: it was committed before they ran, and its agent ended there
 * (its worker died for good mid-batch).
 */
export function transcriptValid(messages: readonly MessageParam[]): boolean {
  return messages.every((message, index) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return true;
    const uses = message.content.flatMap((block) => (block.type === 'tool_use' ? [block.id] : []));
    if (uses.length === 0) return true;
    const next = messages[index + 1];
    if (!next) return true;
    if (typeof next.content === 'string') return false;
    const answered = next.content.flatMap((block) =>
      block.type === 'tool_result' ? [block.tool_use_id] : [],
    );
    return JSON.stringify(answered) === JSON.stringify(uses);
  });
}

/** The ids of the inbox results delivered in a transcript: blocks whose first line is our header. */
function deliveredIds(messages: readonly MessageParam[]): string[] {
  const ids: string[] = [];
  for (const message of messages) {
    if (message.role !== 'user' || typeof message.content === 'string') continue;
    for (const block of message.content) {
      if (block.type !== 'text' || !block.text.startsWith('{"kind":"agent_result"')) continue;
      const header = block.text.slice(0, block.text.indexOf('\n'));
      const parsed = (() => {
        try {
          return JSON.parse(header) as { kind?: unknown; id?: unknown };
        } catch {
          return undefined;
        }
      })();
      if (parsed?.kind === 'agent_result' && typeof parsed.id === 'string') ids.push(parsed.id);
    }
  }
  return ids;
}

/**
 * Reads the run journal: each agent's result (the pool journals the results it makes on main,
 * the worker the others), its transcript (valid, and which results were delivered into it, to
 * whom, of which generation).
 */
export function auditJournal(
  logDir: string,
  agents: ReadonlyMap<string, AgentRecord>,
  /** Whether an agent's parent is known for sure (its title names one agent only). */
  parentKnown: (record: AgentRecord) => boolean,
): JournalAudit {
  const journal = readJournal(logDir);
  // The root session's own records (its transcript, its result) are no spawned agent's.
  journal.delete('root');
  const audit: JournalAudit = {
    journaled: journal.size,
    results: 0,
    missingResults: 0,
    strayAgents: [...journal.keys()].filter((id) => !agents.has(id)).length,
    mismatchedResults: 0,
    invalidTranscripts: 0,
    deliveries: new Map(),
    misdelivered: 0,
    staleByDepth: new Map(),
  };
  for (const record of agents.values()) {
    const history = journal.get(record.id);
    const written = history?.result;
    if (!written) audit.missingResults++;
    else {
      audit.results++;
      if (record.result && written.outcome !== record.result.outcome) audit.mismatchedResults++;
    }
    if (!history || history.inc < 0) continue;
    const transcript: MessageParam[] = history.messages;
    if (!transcriptValid(transcript)) audit.invalidTranscripts++;
    for (const id of deliveredIds(transcript)) {
      audit.deliveries.set(id, (audit.deliveries.get(id) ?? 0) + 1);
      const delivered = agents.get(id);
      if (!delivered || (delivered.parent !== record && parentKnown(delivered))) {
        audit.misdelivered++;
      }
      const generation = delivered?.result?.generation;
      if (generation !== undefined && generation !== record.result?.generation) {
        const depth = delivered?.depth ?? 0;
        audit.staleByDepth.set(depth, (audit.staleByDepth.get(depth) ?? 0) + 1);
      }
    }
  }
  return audit;
}
