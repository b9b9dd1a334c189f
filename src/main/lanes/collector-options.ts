/** How long the collector waits for more steps after the first one waits (default). */
export const DEFAULT_BATCH_WINDOW_MS = 10_000;
/** The first wait between two polls of a batch (default); it grows to 8 times that. */
export const DEFAULT_BATCH_POLL_MS = 30_000;

/** A batch submitted: what the run journal keeps, before its polling starts. */
export interface SubmittedBatch {
  batchId: string;
  /** Its server (without credentials): a rerun against another one never follows the batch. */
  endpoint: string;
  customIds: string[];
  /** A digest of each request's params, in the order of `customIds`. */
  digests: string[];
}

/** A batch whose results were read: its answers are spent, no rerun follows it. */
export interface ReadBatch {
  batchId: string;
  endpoint: string;
}

/**
 * A step a killed run sent in a batch it never read: a rerun's step of the same custom id
 * follows that batch, if it goes to the same server with the same request (digest).
 */
export interface JournaledStep {
  batchId: string;
  endpoint: string;
  digest: string;
}

export interface BatchCollectorOptions {
  /** How long to gather after the first step waits, when not every agent of the lane waits. */
  windowMs: number;
  /** The first wait between polls of a batch. */
  pollMs: number;
  /** What a batch is taken to need from create to end until one has ended (the `auto` lane). */
  turnaroundMs?: number;
  /**
   * How long creates of one batch may keep being refused 429 (a full processing queue) before
   * its steps fail `rate_limited`; default 15 minutes, the governor's patience.
   */
  patienceMs?: number;
  /** Something the collector met and went on past (an unknown custom id, a cut results line). */
  warn(message: string): void;
  /** A batch was created: called, and awaited, before it is polled (the run journal). */
  submitted?(batch: SubmittedBatch): Promise<void> | void;
  /** A batch's results were read (the run journal), so no rerun follows it. */
  read?(batch: ReadBatch): void;
  /**
   * Batches a killed run submitted and never read, by custom id: a step whose id is among them,
   * on the same server and with the same request, follows that batch instead of being sent again.
   */
  inFlight?: ReadonlyMap<string, JournaledStep>;
}
