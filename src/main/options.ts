import { MAX_DURATION_MS } from '../shared/duration.js';
import { expected } from '../shared/errors.js';

/** Checks an optional whole number within bounds; the message says what arrived. */
export function checkInteger(
  name: string,
  value: unknown,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `from ${min} and up` : `from ${min} to ${max}`;
    throw expected(name, `a whole number ${range}`, value);
  }
  return value;
}

export function checkString(name: string, value: unknown, allowEmpty = false): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || (!allowEmpty && value.trim() === '')) {
    throw expected(name, allowEmpty ? 'a string' : 'a non-empty string', value);
  }
  return value;
}

export function checkStringArray(name: string, value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
    throw expected(name, 'an array of strings', value);
  }
  return value as string[];
}

/**
 * Checks an optional duration in whole milliseconds. Node fires a timer longer than 2³¹−1 ms
 * after 1 ms, so anything above that (about 24.8 days) is refused rather than silently becoming
 * "now".
 */
export function checkDurationMs(name: string, value: unknown, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < min ||
    value > MAX_DURATION_MS
  ) {
    throw expected(
      name,
      `a whole number of milliseconds from ${min} to ${MAX_DURATION_MS} (about 24.8 days)`,
      value,
    );
  }
  return value;
}

/** Most steps an agent may be given: far above any real need, far below a runaway bill. */
export const MAX_STEPS_LIMIT = 10_000;

/**
 * The CLI flag of each library option, for messages shown to CLI users. Options the CLI cannot
 * set (`replyCap`, `hostTools`, …) are absent, and so are task-line fields: a task's `maxSteps`
 * is a field of its line, so translate only messages about engine options.
 */
export const OPTION_FLAGS: Readonly<Record<string, string>> = {
  ceilingMs: '--ceiling',
  threads: '--threads',
  agentsPerThread: '--agents-per-thread',
  maxDepth: '--max-depth',
  'queue.url': '--queue',
  'queue.name': '--queue-name',
  'queue.rateLimit.max': '--queue-rate',
  'queue.rateLimit.durationMs': '--queue-rate',
  logDir: '--log-dir',
  workspace: '--workspace',
  toolModules: '--tools',
  maxOldGenerationSizeMb: '--worker-heap-mb',
  cancelGraceMs: '--cancel-grace',
  maxSteps: '--max-steps',
  agentsDir: '--agents',
  prices: '--prices',
  'provider.model': '--model',
  'provider.baseURL': '--base-url',
  'provider.requestTimeoutMs': '--request-timeout',
  'provider.idleTimeoutMs': '--idle-timeout',
  'provider.maxTokens': '--max-tokens',
  'provider.transport': '--transport',
  'provider.connections': '--connections',
  'governor.rpm': '--rpm',
  'governor.itpm': '--itpm',
  'governor.otpm': '--otpm',
  'governor.maxConcurrency': '--max-concurrency',
  'governor.enabled': '--governor',
};

/**
 * Rewrites the library option names in a message to CLI flags: `` `ceilingMs` `` becomes
 * `` `--ceiling` ``, and `` `toolModules[1]` `` becomes `` `--tools` `` (the CLI user never saw
 * the index). Names not in `OPTION_FLAGS` are left as they are.
 */
export function flagMessage(message: string): string {
  return message.replace(/`([A-Za-z][\w.]*)(\[\d+\])?`/g, (whole, name: string) =>
    Object.hasOwn(OPTION_FLAGS, name) ? `\`${OPTION_FLAGS[name]}\`` : whole,
  );
}
