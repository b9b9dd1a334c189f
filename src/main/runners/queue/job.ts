import { createHash } from 'node:crypto';
import os from 'node:os';
import type { ChildSpec } from '../../../shared/child-spec.js';
import { FAILURE_CODES, type Failure } from '../../../shared/failure.js';
import { redactSecrets } from '../../../shared/redact.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';
import { emptyUsage, toCancelReason } from '../../../shared/result.js';

/**
 * The one job name cohort uses. A queue is cohort's alone: a cohort worker fails a job of any
 * other name, saying so, rather than leave it waiting forever.
 */
export const JOB_NAME = 'cohort-agent';

/** Bumped when the job's shape changes: a worker refuses a job it cannot read, plainly. */
export const JOB_VERSION = 1;

/** What a job carries: the child's spec, as the producer made it. */
export interface AgentJobData {
  v: typeof JOB_VERSION;
  spec: ChildSpec;
}

/** A cancel as it is broadcast to every worker, and kept for a worker that takes the job later. */
export interface CancelNotice {
  jobId: string;
  reason: CancelReason;
}

/**
 * Redis keys cohort keeps beside BullMQ's own, under the queue's prefix and name, so a second
 * queue (or a second cohort on the same Redis) never sees them.
 */
export class QueueKeys {
  readonly #base: string;
  readonly #queue: string;

  constructor(prefix: string, name: string) {
    this.#queue = `${prefix}:${name}`;
    this.#base = `${prefix}:${name}:cohort`;
  }

  /** BullMQ's lock of a job: the token of the worker run that holds it. */
  lock(jobId: string): string {
    return `${this.#queue}:${jobId}:lock`;
  }

  /** BullMQ's events stream of the queue (what `QueueEvents` reads). */
  get events(): string {
    return `${this.#queue}:events`;
  }

  /** A list of transcript writes: the child's last committed step, for a resume elsewhere. */
  checkpoint(jobId: string): string {
    return `${this.#base}:ckpt:${jobId}`;
  }

  /** A cancel waiting for whichever worker holds (or next takes) the job. */
  cancel(jobId: string): string {
    return `${this.#base}:cancel:${jobId}`;
  }

  /** The pub/sub channel cancels are broadcast on. */
  get cancelChannel(): string {
    return `${this.#base}:cancels`;
  }
}

/** How long a cancel is kept for a worker that takes its job late: longer than any stall. */
export const CANCEL_TTL_S = 24 * 3600;

/** The job's data, checked: a worker refuses what it cannot run with a plain reason. */
export function readJobData(data: unknown): AgentJobData | string {
  if (typeof data !== 'object' || data === null) return 'the job carries no data object';
  const { v, spec } = data as { v?: unknown; spec?: unknown };
  if (v !== JOB_VERSION) {
    return `the job's format is version ${JSON.stringify(v)}; this worker reads version ${JOB_VERSION}`;
  }
  if (typeof spec !== 'object' || spec === null) return 'the job carries no agent spec';
  const { id, prompt, provider } = spec as Partial<ChildSpec>;
  if (typeof id !== 'string' || typeof prompt !== 'string' || typeof provider !== 'object') {
    return "the job's agent spec lacks its id, prompt or provider";
  }
  return { v, spec: spec as ChildSpec };
}

/** A cancel notice from the channel, or undefined for anything else. */
export function readCancelNotice(text: string): CancelNotice | undefined {
  try {
    const notice = JSON.parse(text) as Partial<CancelNotice>;
    if (typeof notice.jobId !== 'string') return undefined;
    return { jobId: notice.jobId, reason: toCancelReason(notice.reason) };
  } catch {
    return undefined;
  }
}

/**
 * A worker's answer, checked before it is delivered: a worker of another version, or a stranger
 * writing to the queue, must not hand the caller something that is not an AgentResult.
 */
export function readJobResult(value: unknown): AgentResult | string {
  if (typeof value !== 'object' || value === null) {
    return `expected an AgentResult object, got ${value === null ? 'null' : typeof value}`;
  }
  const result = value as Partial<AgentResult>;
  const outcomes = ['complete', 'empty', 'cancelled', 'capped', 'failed'];
  if (typeof result.id !== 'string' || !outcomes.includes(result.outcome as string)) {
    return 'expected an AgentResult with an id and an outcome';
  }
  if (typeof result.text !== 'string' || typeof result.usage !== 'object') {
    return 'expected an AgentResult with its text and usage';
  }
  if (result.code !== undefined && !(FAILURE_CODES as readonly string[]).includes(result.code)) {
    return `expected a failure code, got ${JSON.stringify(result.code)}`;
  }
  // It stops a batch's model: only a failure may say so, and only as `true`.
  if (
    result.breakerOpen !== undefined &&
    (result.breakerOpen !== true || result.outcome !== 'failed')
  ) {
    return `expected breakerOpen to be true on a failed result or absent, got ${JSON.stringify(result.breakerOpen)} on a ${result.outcome} result`;
  }
  return result as AgentResult;
}

/** Longest task id kept readable in a job id; a longer one is hashed. */
const MAX_READABLE_TASK_ID = 80;

/**
 * A batch task's job id: the same results file, task id and version give the same id on every
 * run, so a rerun's add of a job still in Redis is that job, never a second one. `version` (the
 * short hash of the task as it runs) makes a changed task a new job: it never takes over the
 * old one's result or its checkpoints. BullMQ refuses `:` in an id (its key separator) and ids
 * that are all digits; the `b` prefix and the encoding avoid both, and `@` (which the encoding
 * never leaves in a task id) sets the version apart: `b<batch>-<task>@<version>`.
 */
export function batchJobId(resultsPath: string, taskId: string, version?: string): string {
  // The machine too: two producers with the same path on two machines are two batches.
  const batch = createHash('sha256')
    .update(`${os.hostname()}\n${resultsPath}`)
    .digest('hex')
    .slice(0, 16);
  const encoded = encodeURIComponent(taskId);
  const task =
    encoded.length <= MAX_READABLE_TASK_ID
      ? encoded
      : `h${createHash('sha256').update(taskId).digest('hex').slice(0, 32)}`;
  return `b${batch}-${task}${version === undefined ? '' : `@${encodeURIComponent(version)}`}`;
}

/**
 * The spec as a worker receives it: what cannot cross machines is left out. Spans are not
 * replayed from another machine, and live events do not cross the queue (only results do).
 */
export function remoteSpec(spec: ChildSpec): ChildSpec {
  const { traced: _traced, inTree: _inTree, ...rest } = spec;
  return { ...rest, liveEvents: false, streamText: false };
}

/**
 * The failure of a job BullMQ failed: one whose workers kept dying under it (stalled past
 * `maxStalledCount`, a poison task), or one a worker refused.
 */
export function failureOfJob(failedReason: string): Failure {
  return /stalled more than/i.test(failedReason)
    ? {
        code: 'worker_crashed',
        message: `every worker that took it died (stalled more often than the queue allows): ${failedReason}`,
      }
    : { code: 'internal', message: `its worker failed the job: ${failedReason}` };
}

/** The result of a job whose cancel was waiting for it: it never ran. */
export function cancelledHere(spec: AgentJobData['spec'], reason: CancelReason): AgentResult {
  return {
    id: spec.id,
    title: redactSecrets(spec.title),
    outcome: 'cancelled',
    reason,
    text: '',
    truncated: false,
    elapsedMs: 0,
    generation: spec.generation,
    usage: emptyUsage(),
  };
}

/** An error's message for people and logs, with any secret taken out. */
export function plainError(error: unknown): string {
  return redactSecrets(error instanceof Error ? error.message : String(error));
}
