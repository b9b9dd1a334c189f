/**
 * The run journal's records (docs/LOGS.md): one JSON object per line, appended to a segment file
 * per thread of each process that ran part of the run. Version 1.
 */
import type { MessageParam } from '../provider/types.js';
import { redactSecrets } from '../redact.js';
import type { AgentResult } from '../result.js';

/** The version a segment's first record carries; a reader refuses any other. */
export const JOURNAL_VERSION = 1;

/** The first record of every segment. */
export interface SegmentRecord {
  k: 'segment';
  v: number;
  pid: number;
  /** `main`, or `t` and the worker's thread id. */
  thread: string;
  /** Epoch ms when the segment was opened. */
  at: number;
}

/**
 * An agent's run begins: its first (`inc` 0) or one resumed on a fresh worker (`inc` > 0, whose
 * `m` is the whole transcript it resumes from). Later `step` records of the same `inc` follow in
 * the same segment.
 */
export interface StartRecord {
  k: 'start';
  /** The agent's id. */
  a: string;
  inc: number;
  at: number;
  /** id, title, depth, generation, model, base URL, maxSteps, the tools advertised, … */
  meta: Record<string, unknown>;
  m: readonly MessageParam[];
}

/** A committed step: the assistant message and the user message that answers its calls. */
export interface StepRecord {
  k: 'step';
  a: string;
  inc: number;
  m: readonly MessageParam[];
}

/** The agent's one result; `keep: false` when the `logs` policy drops its records at close. */
export interface ResultRecord {
  k: 'result';
  a: string;
  at: number;
  keep: boolean;
  r: AgentResult;
}

/**
 * A Message Batch the batches lane created (docs/LANES.md), written before it is polled: a rerun
 * of a killed run follows the batch for these custom ids instead of sending their steps again,
 * when the request it would send is the one the batch holds (the same digest) on the same server.
 */
export interface BatchRecord {
  k: 'batch';
  /** The batch's id. */
  b: string;
  at: number;
  /** The server it was created on, without credentials: a rerun against another never follows it. */
  url: string;
  /** The custom ids of its requests: each an agent's (or a task's) step. */
  c: string[];
  /** A digest of each request's params, in the order of `c`. */
  d: string[];
}

/**
 * A Message Batch whose results were read: its answers are spent, so no rerun follows it (a step
 * it answered and sent again asks the model afresh).
 */
export interface BatchReadRecord {
  k: 'batch-read';
  /** The batch's id. */
  b: string;
  at: number;
  /** Its server, as its `batch` record names it. */
  url: string;
}

export type AgentRecord = StartRecord | StepRecord | ResultRecord;
export type JournalRecord = SegmentRecord | AgentRecord | BatchRecord | BatchReadRecord;

/** A segment's file name: `journal-<pid>-<thread>.jsonl`. */
export function segmentName(pid: number, thread: string): string {
  return `journal-${pid}-${thread}.jsonl`;
}

const SEGMENT = /^journal-(\d+)-(main|t\d+)\.jsonl$/;

/** Whether `name` is a segment's file name, as `segmentName` makes them. */
export function isSegmentName(name: string): boolean {
  return SEGMENT.test(name);
}

/** The pid a segment's name carries, or undefined for another name. */
export function segmentPid(name: string): number | undefined {
  const match = SEGMENT.exec(name);
  return match ? Number(match[1]) : undefined;
}

/** The folder of a run's reply spills, inside its run folder. */
export const REPLIES_FOLDER = 'replies';

/**
 * One record as a line: JSON, redacted of secrets, ending in a newline. The keys come in the
 * order the interfaces above list them (`k`, then `a`, …): compaction reads a line's kind, agent
 * and `keep` from its start without parsing it.
 */
export function recordLine(record: JournalRecord): string {
  return `${redactSecrets(JSON.stringify(record))}\n`;
}
