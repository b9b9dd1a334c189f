/**
 * The shortest prefix, in tokens, each model caches: a breakpoint on a shorter prefix writes and
 * reads nothing (the API does not say so; it just bills the prefix as plain input). Keyed by
 * model-name prefix, the longest match wins, as prices are. These are the documented values; a
 * model not listed takes `DEFAULT_MINIMUM_CACHEABLE`.
 *
 * Shared by the request builder, which places no breakpoint below the minimum, and the scripted
 * model, which caches nothing below it.
 */
export const MINIMUM_CACHEABLE: Readonly<Record<string, number>> = Object.freeze({
  'claude-opus-4-5': 4096,
  'claude-opus-4-6': 4096,
  'claude-opus-4-7': 4096,
  'claude-haiku-4-5': 4096,
  'claude-sonnet-4-6': 2048,
  'claude-3-5-haiku': 2048,
  'claude-3-haiku': 2048,
  'claude-haiku-3': 2048,
});

/** Every other model: the Sonnet and Opus 4 lines, Sonnet 3.7, and the scripted model. */
export const DEFAULT_MINIMUM_CACHEABLE = 1024;

/** The minimum cacheable prefix of `model`, in tokens. */
export function minimumCacheable(model: string): number {
  let best: string | undefined;
  for (const key of Object.keys(MINIMUM_CACHEABLE)) {
    if (model.startsWith(key) && (best === undefined || key.length > best.length)) best = key;
  }
  return best === undefined ? DEFAULT_MINIMUM_CACHEABLE : (MINIMUM_CACHEABLE[best] as number);
}
