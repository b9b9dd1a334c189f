import type { ProviderErrorCode } from './provider/types.js';

/**
 * Every way an agent can fail, as one stable enum. A failure crosses threads (and, later, queues)
 * as `{ code, message }` data; code decides, the message is for people. Nothing in the engine
 * parses a message.
 */
export const FAILURE_CODES = [
  // The provider, after our retries (see provider/types.ts).
  'rate_limited',
  'quota_exhausted',
  'overloaded',
  'server_error',
  'connection',
  'stalled',
  'bad_response',
  'bad_request',
  /** The server refused the API key (401 or 403). */
  'auth',
  /** The batches lane: the Message Batch ended (expired) before it processed the step. */
  'batch_expired',
  /** The batches lane: the Message Batch holding the step was cancelled outside this engine. */
  'batch_canceled',
  // The worker thread the agent ran on.
  /** Its worker died while this agent ran a tool, `maxCrashes` times. */
  'worker_crashed',
  /** It lost its worker more often than the resume backstop allows. */
  'worker_lost',
  /**
   * A tool it ran in its worker thread went on past its time limit and kept the thread from
   * answering (a synchronous loop): the thread was terminated, and the agent is not run again.
   */
  'tool_timeout',
  /** A call into the main thread could not complete: the host bridge closed under it. */
  'bridge_closed',
  /**
   * A typed reply did not match its `outputSchema` after the allowed number of tries, or, for a
   * Standard Schema, its own `validate` refused a value its JSON Schema passed (on main).
   */
  'bad_reply',
  /**
   * A run resumed (`cohort run --resume`) found a record of this agent that does not parse in
   * the middle of its journal: what it did after that is not known, so it is not run again.
   */
  'journal_corrupt',
  /** A fault inside cohort: a bug, or an invariant that broke. */
  'internal',
] as const;

export type FailureCode = (typeof FAILURE_CODES)[number];

/** A failure as plain data: safe to post across threads, to log, and to show. */
export interface Failure {
  code: FailureCode;
  message: string;
  /** The provider's key is shut by the governor's circuit breaker (`ProviderError.breakerOpen`). */
  breakerOpen?: true;
}

export function isFailureCode(value: unknown): value is FailureCode {
  return typeof value === 'string' && (FAILURE_CODES as readonly string[]).includes(value);
}

/** A failure from anything thrown: the message only, never the object (it may not cross threads). */
export function internalFailure(error: unknown): Failure {
  return { code: 'internal', message: error instanceof Error ? error.message : String(error) };
}

// Every provider failure but `aborted` (a cancel, not a failure) is a failure code as it is.
type ProviderFailureCode = Exclude<ProviderErrorCode, 'aborted'>;
const _providerCodesAreFailureCodes: ProviderFailureCode extends FailureCode ? true : never = true;
void _providerCodesAreFailureCodes;
