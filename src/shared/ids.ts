import { randomFillSync } from 'node:crypto';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const ID_LENGTH = 12;
/**
 * Random bytes for this many ids at a time: `randomBytes(12)` per id was a system call and a
 * buffer per spawn, a fifth of main's time in a burst of spawns (docs/BENCHMARKS.md, "Spawn
 * burst"). Each byte is still used once.
 */
const POOLED_IDS = 256;
const pool = Buffer.alloc(ID_LENGTH * POOLED_IDS);
let used = pool.length;

/** An opaque, unique agent id: `ag_` and 12 base32 characters (60 random bits). */
export function newAgentId(): string {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  let out = 'ag_';
  for (let index = 0; index < ID_LENGTH; index++) out += BASE32[pool[used++]! & 31];
  return out;
}

/** Whether `value` has the shape of an agent id; log paths are built only from such ids. */
export function isAgentId(value: unknown): value is string {
  return typeof value === 'string' && /^ag_[a-z2-7]{12}$/.test(value);
}
