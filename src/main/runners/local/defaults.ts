// The pool's defaults, apart from the pool: the option checks read them, and a command that
// checks options without starting a pool (`cohort results`) need not load piscina for them.

export const DEFAULT_MAX_CRASHES = 3;
export const DEFAULT_AGENTS_PER_THREAD = 2048;
export const DEFAULT_CANCEL_GRACE_MS = 5000;
/**
 * How long past its time limit a tool may keep its worker from answering before the worker is
 * terminated: long enough for a worker busy with a burst to answer a ping, short enough that the
 * other children on a blocked thread lose little more than the stuck tool's limit.
 */
export const DEFAULT_TOOL_GRACE_MS = 1000;
