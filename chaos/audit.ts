import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import type { AgentRecord } from './census.js';

/** What the agents' log folders say, checked against the census. */
export interface FolderAudit {
  /** Folders under the engine's logDir. */
  folders: number;
  /** Spawned agents whose folder has a `result.json`. */
  resultFiles: number;
  /** Spawned agents with no `result.json` (no folder at all, or one without it). */
  missingResultFiles: number;
  /** Folders of no spawned agent. */
  strayFolders: number;
  /** `result.json` files whose outcome differs from the result the handle delivered. */
  mismatchedResultFiles: number;
  /** Transcripts with a tool_use not answered by a tool_result in the next message. */
  invalidTranscripts: number;
  /** Results delivered into a parent's transcript, by id (a parent at depth ≥ 1). */
  deliveries: Map<string, number>;
  /** Deliveries into a transcript whose owner is not the delivered agent's parent. */
  misdelivered: number;
  /** Deliveries of a result whose generation is not its parent's, by the delivered agent's depth. */
  staleByDepth: Map<number, number>;
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

function readTranscript(dir: string): MessageParam[] | undefined {
  const file = path.join(dir, 'transcript.jsonl');
  if (!existsSync(file)) return undefined;
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as MessageParam);
}

export function transcriptValid(messages: readonly MessageParam[]): boolean {
  return messages.every((message, index) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return true;
    const uses = message.content.flatMap((block) => (block.type === 'tool_use' ? [block.id] : []));
    if (uses.length === 0) return true;
    const next = messages[index + 1];
    if (!next || typeof next.content === 'string') return false;
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
 * Reads every agent's folder: its `result.json` (the pool writes one for the results it makes on
 * main, the worker for the others), its transcript (valid, and which results were delivered into
 * it, to whom, of which generation).
 */
export function auditFolders(
  logDir: string,
  agents: ReadonlyMap<string, AgentRecord>,
  /** Whether an agent's parent is known for sure (its title names one agent only). */
  parentKnown: (record: AgentRecord) => boolean,
): FolderAudit {
  const folders = existsSync(logDir) ? readdirSync(logDir) : [];
  const audit: FolderAudit = {
    folders: folders.length,
    resultFiles: 0,
    missingResultFiles: 0,
    strayFolders: folders.filter((name) => !agents.has(name)).length,
    mismatchedResultFiles: 0,
    invalidTranscripts: 0,
    deliveries: new Map(),
    misdelivered: 0,
    staleByDepth: new Map(),
  };
  for (const record of agents.values()) {
    const dir = path.join(logDir, record.id);
    const written = readJson<AgentResult>(path.join(dir, 'result.json'));
    if (!written) audit.missingResultFiles++;
    else {
      audit.resultFiles++;
      if (record.result && written.outcome !== record.result.outcome) {
        audit.mismatchedResultFiles++;
      }
    }
    const transcript = readTranscript(dir);
    if (!transcript) continue;
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
