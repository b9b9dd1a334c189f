import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type {
  BucketName,
  LeaseGrant,
  SharedBucketStore,
} from '../../../shared/governor/shared-leases.js';

/**
 * One shared token bucket, refilled continuously at `limit` per minute up to a minute's worth,
 * read and taken from in one step on Redis's own clock (every worker's clock may differ). A new
 * bucket starts with a second's worth, as the governor's own configured buckets do, so a fleet
 * starting at once does not burst a whole minute's limit. Levels are kept as decimals; grants are
 * whole. The key expires after two idle minutes: by then it would be full anyway.
 */
const LEASE_SCRIPT = `
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'level', 'at')
local level = tonumber(state[1])
local at = tonumber(state[2])
if level == nil or at == nil then
  level = limit / 60
  at = now
end
if now > at then level = math.min(limit, level + (now - at) * limit / 60000) end
local granted = math.floor(math.min(want, math.max(level, 0)))
level = level - granted
redis.call('HSET', KEYS[1], 'level', tostring(level), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], 120000)
local waitMs = 0
if granted < want then waitMs = math.ceil((want - granted - math.max(level, 0)) * 60000 / limit) end
return {granted, waitMs}
`;

/** When Redis cannot be asked, the lease is tried again after this long. */
const AWAY_MS = 500;

type LeaseCommand = (key: string, limit: number, want: number) => Promise<[number, number]>;

/**
 * The fleet's rate-limit buckets in Redis (queue mode): every worker's governor leases from them,
 * so the workers together keep to the account's requests, input and output tokens per minute.
 * Keys are per governor key (base URL, API key hash and model, hashed again here), not per
 * queue: two queues on one account share its limits.
 */
export class RedisBuckets implements SharedBucketStore {
  readonly #lease: LeaseCommand;
  readonly #prefix: string;

  constructor(redis: Redis, prefix: string) {
    redis.defineCommand('cohortLease', { numberOfKeys: 1, lua: LEASE_SCRIPT });
    const command = (redis as unknown as { cohortLease: LeaseCommand }).cohortLease;
    this.#lease = command.bind(redis);
    this.#prefix = `${prefix}:cohort-limits`;
  }

  async lease(key: string, bucket: BucketName, limit: number, want: number): Promise<LeaseGrant> {
    try {
      const [granted, waitMs] = await this.#lease(this.keyOf(key, bucket), limit, want);
      return { granted: Number(granted), waitMs: Number(waitMs) };
    } catch {
      // Redis away: nothing is granted; the worker waits and asks again rather than overrun.
      return { granted: 0, waitMs: AWAY_MS };
    }
  }

  /** The Redis key of one bucket of one governor key. */
  keyOf(key: string, bucket: BucketName): string {
    const hashed = createHash('sha256').update(key).digest('hex').slice(0, 24);
    return `${this.#prefix}:${hashed}:${bucket}`;
  }
}
