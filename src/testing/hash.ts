/**
 * Small deterministic primitives: a string hash and a seeded PRNG. The scripted model
 * derives all of its randomness from these, so a run with the same seed replays.
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** 32-bit FNV-1a over the UTF-8 bytes of `text`. */
export function fnv1a(text: string): number {
  let hash = FNV_OFFSET;
  const bytes = Buffer.from(text, 'utf8');
  for (const byte of bytes) {
    hash ^= byte;
    hash = Math.imul(hash, FNV_PRIME);
  }
  return hash >>> 0;
}

/** The FNV-1a hash of `text` as 8 lowercase hex digits. */
export function fingerprint(text: string): string {
  return fnv1a(text).toString(16).padStart(8, '0');
}

/**
 * mulberry32: a tiny PRNG with a 32-bit state. Returns a function that yields numbers in
 * [0, 1). Good enough for jitter and fault rolls; not for anything secret.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}
