import type { Redis } from 'ioredis';
import type { QueueKeys } from './job.js';
import { WriteWindow } from './write-window.js';

/** A checkpoint outlives its job's last write by a week at most (a producer that never returns). */
const CHECKPOINT_TTL_MS = 7 * 24 * 3600 * 1000;

/**
 * How long a committed step may wait before it is copied to Redis, with every other step
 * committed on this worker meanwhile: one round trip per window, not one per step. A worker
 * killed inside a window loses those steps' copies; the job resumes from the step before.
 */
export const CHECKPOINT_WINDOW_MS = 50;

/**
 * One window's checkpoint writes, each done only while its run's token holds the job's lock: a
 * run that lost the job (its lock lapsed, Redis forgot it) never writes over the run that has it
 * now. KEYS: per job, its checkpoint list and its lock. ARGV: the TTL in ms, then per job its
 * token, replace ('1' or '0') and lines. Returns per job 1 (written) or 0 (the lock is another's).
 */
const CHECKPOINT_SCRIPT = `
local written = {}
for i = 1, #KEYS / 2 do
  local list, lock = KEYS[2 * i - 1], KEYS[2 * i]
  if redis.call('GET', lock) ~= ARGV[3 * i - 1] then
    written[i] = 0
  else
    if ARGV[3 * i] == '1' then redis.call('DEL', list) end
    redis.call('RPUSH', list, ARGV[3 * i + 1])
    redis.call('PEXPIRE', list, ARGV[1])
    written[i] = 1
  end
end
return written
`;

type CheckpointCommand = (...keysAndArgs: (string | number)[]) => Promise<number[]>;

/** What one job's run keeps of its checkpoint writes. */
export interface CheckpointRun {
  /** The run's lock token. */
  token?: string | undefined;
  /** A write failed: appends stop until a replace. */
  checkpointBroken?: boolean;
}

/** One run's writes waiting for the window, merged: a replace, or appends, and their lines. */
interface Waiting<Run extends CheckpointRun> {
  run: Run;
  jobId: string;
  replace: boolean;
  lines: string;
}

/**
 * Copies children's transcript writes to their jobs' checkpoint lists in Redis, from which a
 * worker that takes a job after this one died resumes it. The writes of one window, across all
 * the jobs running here, go to Redis as one script call.
 */
export class Checkpoints<Run extends CheckpointRun> {
  readonly #command: CheckpointCommand;
  readonly #keys: QueueKeys;
  readonly #onLost: (run: Run) => void;
  readonly #waiting = new Map<Run, Waiting<Run>>();
  /** Runs with a write sent and not yet answered: their next one waits for that answer. */
  readonly #sending = new Map<Run, Promise<unknown>>();
  readonly #window: WriteWindow<Run>;

  /** `onLost` hears of a run whose write was refused: the job's lock is another run's now. */
  constructor(redis: Redis, keys: QueueKeys, onLost: (run: Run) => void) {
    redis.defineCommand('cohortCheckpoints', { lua: CHECKPOINT_SCRIPT });
    const command = (redis as unknown as Record<string, CheckpointCommand>).cohortCheckpoints!;
    this.#command = command.bind(redis);
    this.#keys = keys;
    this.#onLost = onLost;
    this.#window = new WriteWindow((runs) => this.#send(runs), CHECKPOINT_WINDOW_MS);
  }

  /**
   * One write, sent with its window. After a write that failed, appends stop until the next
   * replace: the list must stay a prefix of the transcript (a resume from it redoes the steps
   * after), never a transcript with a hole.
   */
  save(run: Run, jobId: string, write: { replace: boolean; lines: string }): void {
    if (run.checkpointBroken && !write.replace) return;
    const waiting = this.#waiting.get(run);
    if (!waiting) {
      this.#waiting.set(run, { run, jobId, replace: write.replace, lines: write.lines });
      void this.#window.push(run);
    } else if (write.replace) {
      waiting.replace = true;
      waiting.lines = write.lines;
    } else {
      waiting.lines += write.lines;
    }
  }

  /** Drops a run's waiting writes: its job has its result, and a copy of its steps is no use. */
  forget(run: Run): void {
    if (this.#waiting.delete(run)) this.#window.discard((one) => one === run);
  }

  /** Sends a run's waiting write now and waits for it: a job handed back goes with its copy. */
  async written(run: Run): Promise<void> {
    // At most twice: a write in flight first, then the one that waited behind it.
    while (this.#waiting.has(run) || this.#sending.has(run)) {
      await this.#sending.get(run);
      await this.#window.flush();
    }
  }

  async #send(runs: Run[]): Promise<void> {
    const writes: Waiting<Run>[] = [];
    for (const run of runs) {
      const waiting = this.#waiting.get(run);
      if (!waiting) continue;
      // One write at a time per run, in order: this one goes with the next window.
      if (this.#sending.has(run)) {
        void this.#window.push(run);
        continue;
      }
      this.#waiting.delete(run);
      // An earlier write failed: only a replace makes the list a prefix of the transcript again.
      if (run.checkpointBroken && !waiting.replace) continue;
      writes.push(waiting);
    }
    if (writes.length === 0) return;
    const keys = writes.flatMap(({ jobId }) => [
      this.#keys.checkpoint(jobId),
      this.#keys.lock(jobId),
    ]);
    const args = writes.flatMap(({ run, replace, lines }) => [
      run.token ?? '',
      replace ? '1' : '0',
      lines,
    ]);
    let written: number[];
    const sent = this.#command(keys.length, ...keys, CHECKPOINT_TTL_MS, ...args);
    for (const { run } of writes)
      this.#sending.set(
        run,
        sent.catch(() => {}),
      );
    try {
      written = await sent;
    } catch {
      // Redis refused it: the steps are still committed here; a resume elsewhere redoes them.
      for (const { run } of writes) run.checkpointBroken = true;
      return;
    } finally {
      for (const { run } of writes) this.#sending.delete(run);
    }
    writes.forEach(({ run }, at) => {
      run.checkpointBroken = false;
      if (written[at] === 0) this.#onLost(run);
    });
  }
}
