/**
 * Reading a run journal back: its segments' records, and each agent's history (its meta, its
 * committed transcript, its result). A torn last line (a write cut short by a kill) is no record;
 * a line that does not parse in the middle of a segment marks the agent it names as corrupt.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { MessageParam } from '../provider/types.js';
import type { AgentResult } from '../result.js';
import {
  type AgentRecord,
  type BatchReadRecord,
  type BatchRecord,
  isSegmentName,
  JOURNAL_VERSION,
  type JournalRecord,
  type SegmentRecord,
} from './format.js';

/** What one segment held. */
export interface SegmentContent {
  file: string;
  header: SegmentRecord | undefined;
  records: AgentRecord[];
  /** The Message Batches the batches lane created, in the order they were. */
  batches: BatchRecord[];
  /** The Message Batches whose results were read. */
  batchesRead: BatchReadRecord[];
  /** Agents named by a line that did not parse, in the middle of the segment. */
  corrupt: Set<string>;
  /** A line that did not parse and names no agent. */
  unattributed: number;
}

/** A journal written by another version of cohort. */
export class JournalVersionError extends Error {
  constructor(file: string, found: unknown) {
    super(
      `${file} is a journal of version ${JSON.stringify(found)}; this cohort reads version ${JOURNAL_VERSION}`,
    );
    this.name = 'JournalVersionError';
  }
}

const AGENT_ID = /"a":"(ag_[a-z0-9]+|root)"/;

/** Parses a segment's text. Throws JournalVersionError for another version's segment. */
export function parseSegment(file: string, text: string): SegmentContent {
  const content: SegmentContent = {
    file,
    header: undefined,
    records: [],
    batches: [],
    batchesRead: [],
    corrupt: new Set(),
    unattributed: 0,
  };
  const lines = text.split('\n');
  // The last piece is empty after a whole last line, or a line cut short by a kill: no record.
  const complete = lines.length - 1;
  for (let index = 0; index < complete; index++) {
    const line = lines[index]!;
    if (line === '') continue;
    let record: JournalRecord;
    try {
      record = JSON.parse(line) as JournalRecord;
    } catch {
      const named = AGENT_ID.exec(line)?.[1];
      if (named) content.corrupt.add(named);
      else content.unattributed++;
      continue;
    }
    if (record.k === 'segment') {
      if (record.v !== JOURNAL_VERSION) throw new JournalVersionError(file, record.v);
      content.header ??= record;
    } else if (record.k === 'start' || record.k === 'step' || record.k === 'result') {
      content.records.push(record);
    } else if (record.k === 'batch') {
      // A record of another shape is no batch to follow: its steps are sent again.
      if (isBatchRecord(record)) content.batches.push(record);
    } else if (
      record.k === 'batch-read' &&
      typeof record.b === 'string' &&
      typeof record.url === 'string'
    ) {
      content.batchesRead.push(record);
    }
  }
  return content;
}

function isBatchRecord(record: BatchRecord): boolean {
  const strings = (value: unknown): value is string[] =>
    Array.isArray(value) && value.every((item) => typeof item === 'string');
  return (
    typeof record.b === 'string' &&
    typeof record.url === 'string' &&
    strings(record.c) &&
    strings(record.d) &&
    record.d.length === record.c.length
  );
}

export async function readSegment(file: string): Promise<SegmentContent> {
  return parseSegment(file, await readFile(file, 'utf8'));
}

/** The segment files of the run in `dir`, oldest process first; none when it has none. */
export async function segmentFiles(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  return names
    .filter(isSegmentName)
    .sort()
    .map((name) => path.join(dir, name));
}

/** One agent as the journal tells it. */
export interface AgentHistory {
  id: string;
  /** The run it is on: 0 for its first, more after each resume on a fresh worker. */
  inc: number;
  meta: Record<string, unknown> | undefined;
  /** Its committed transcript: the prompt, then each step's messages. */
  messages: MessageParam[];
  steps: number;
  result: AgentResult | undefined;
  /** The `logs` policy keeps it at close (its result says so; an agent without one is kept). */
  keep: boolean;
  /** A record of it did not parse: what follows that record is not trusted. */
  corrupt: boolean;
  /** Epoch ms of its first start and of its result. */
  startedAt: number | undefined;
  endedAt: number | undefined;
}

/**
 * Every agent's history from the segments' contents, in the order each first started. An agent's
 * transcript is its latest run's: the `start` of the highest `inc` seen and the steps of that run
 * after it (a run lives on one thread, so its records are in one segment, in order).
 */
export function histories(contents: readonly SegmentContent[]): Map<string, AgentHistory> {
  const agents = new Map<string, AgentHistory>();
  const agent = (id: string): AgentHistory => {
    let found = agents.get(id);
    if (!found) {
      found = {
        id,
        inc: -1,
        meta: undefined,
        messages: [],
        steps: 0,
        result: undefined,
        keep: true,
        corrupt: false,
        startedAt: undefined,
        endedAt: undefined,
      };
      agents.set(id, found);
    }
    return found;
  };
  for (const content of contents) {
    for (const id of content.corrupt) agent(id).corrupt = true;
    for (const record of content.records) {
      const history = agent(record.a);
      switch (record.k) {
        case 'start':
          history.startedAt ??= record.at;
          if (record.inc >= history.inc) {
            history.inc = record.inc;
            history.meta = record.meta;
            history.messages = [...record.m];
            history.steps = record.m.filter((message) => message.role === 'assistant').length;
          }
          break;
        case 'step':
          if (record.inc === history.inc) {
            history.messages.push(...record.m);
            history.steps += record.m.filter((message) => message.role === 'assistant').length;
          }
          break;
        case 'result':
          // The latest wins: an agent stopped by a shutdown and resumed has two.
          if (history.endedAt !== undefined && record.at < history.endedAt) break;
          history.result = record.r;
          history.keep = record.keep;
          history.endedAt = record.at;
          break;
      }
    }
  }
  return agents;
}

/** Every agent of the run in `dir`. */
export async function readRun(dir: string): Promise<Map<string, AgentHistory>> {
  const files = await segmentFiles(dir);
  return histories(await Promise.all(files.map(readSegment)));
}

/** A transcript as lines of JSON, one message each (what `restoreTranscript` reads). */
export function transcriptText(messages: readonly MessageParam[]): string {
  let text = '';
  for (const message of messages) text += `${JSON.stringify(message)}\n`;
  return text;
}
