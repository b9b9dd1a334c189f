import { createHmac, timingSafeEqual } from 'node:crypto';

// A fixed key, not a secret: signatures only need to survive a server restart and to tell
// an edited or invented thinking block from one this scripted model wrote.
const KEY = 'cohort scripted model thinking v1';

/** The `signature` of a thinking block the scripted model emits: an HMAC of its text. */
export function signThinking(thinking: string): string {
  return createHmac('sha256', KEY).update(thinking, 'utf8').digest('base64');
}

/** Whether `signature` is the one `signThinking` gives for `thinking`. */
export function verifyThinking(thinking: string, signature: string): boolean {
  const expected = Buffer.from(signThinking(thinking), 'utf8');
  const given = Buffer.from(signature, 'utf8');
  return expected.length === given.length && timingSafeEqual(expected, given);
}
