import { randomBytes } from 'node:crypto';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** An opaque, unique agent id: `ag_` and 12 base32 characters (60 random bits). */
export function newAgentId(): string {
  const bytes = randomBytes(12);
  let out = 'ag_';
  for (let index = 0; index < 12; index++) out += BASE32[bytes[index]! & 31];
  return out;
}

/** Whether `value` has the shape of an agent id; log paths are built only from such ids. */
export function isAgentId(value: unknown): value is string {
  return typeof value === 'string' && /^ag_[a-z2-7]{12}$/.test(value);
}
