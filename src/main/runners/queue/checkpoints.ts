import type { Redis } from 'ioredis';
import type { QueueKeys } from './job.js';

/** A checkpoint outlives its job's last write by a week at most (a producer that never returns). */
const CHECKPOINT_TTL_MS = 7 * 24 * 3600 * 1000;

/**
 * One checkpoint write, done only while the run's token holds the job's lock: a run that lost
 * the job (its lock lapsed, Redis forgot it) never writes over the run that has it now.
 * KEYS: the checkpoint list, the job's lock. ARGV: token, replace ('1'), lines, TTL in ms.
 */
const CHECKPOINT_SCRIPT = `
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
if ARGV[2] == '1' then redis.call('DEL', KEYS[1]) end
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`;

type CheckpointCommand = (
  list: string,
  lock: string,
  token: string,
  replace: string,
  lines: string,
  ttlMs: number,
) => Promise<number>;

/** What one job's run keeps of its checkpoint writes. */
export interface CheckpointRun {
  /** The run's lock token. */
  token?: string | undefined;
  /** A write failed: appends stop until a replace. */
  checkpointBroken?: boolean;
}

/** How a write ended: written, refused (the lock is another run's), or failed. */
export type CheckpointOutcome = 'written' | 'lost' | 'failed';

/**
 * Copies a child's transcript writes to its job's checkpoint list in Redis, from which a worker
 * that takes the job after this one died resumes it.
 */
export class Checkpoints {
  readonly #command: CheckpointCommand;
  readonly #keys: QueueKeys;

  constructor(redis: Redis, keys: QueueKeys) {
    redis.defineCommand('cohortCheckpoint', { numberOfKeys: 2, lua: CHECKPOINT_SCRIPT });
    this.#command = (
      redis as unknown as { cohortCheckpoint: CheckpointCommand }
    ).cohortCheckpoint.bind(redis);
    this.#keys = keys;
  }

  /**
   * One write. After a write that failed, appends stop until the next replace: the list must
   * stay a prefix of the transcript (a resume from it redoes the steps after), never a
   * transcript with a hole.
   */
  async save(
    run: CheckpointRun,
    jobId: string,
    write: { replace: boolean; lines: string },
  ): Promise<CheckpointOutcome> {
    if (run.checkpointBroken && !write.replace) return 'failed';
    try {
      const written = await this.#command(
        this.#keys.checkpoint(jobId),
        this.#keys.lock(jobId),
        run.token ?? '',
        write.replace ? '1' : '0',
        write.lines,
        CHECKPOINT_TTL_MS,
      );
      run.checkpointBroken = false;
      return written === 0 ? 'lost' : 'written';
    } catch {
      // Redis away: the step is still committed here; a resume elsewhere redoes it.
      run.checkpointBroken = true;
      return 'failed';
    }
  }
}
