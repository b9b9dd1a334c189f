import { formatDuration } from '../duration.js';
import { expected, UsageError } from '../errors.js';
import {
  boolean,
  checkOptions,
  custom,
  durationMs,
  type Fields,
  type OptionsOf,
  oneOf,
  wholeNumber,
} from '../option-schema.js';
import { CONCURRENCY_CONTROLS } from './concurrency.js';

/** The limits have no upper bound: the provider's headers take over from them. */
const NO_BOUND = Number.POSITIVE_INFINITY;

/** How long one request may keep being refused before its agent fails, unless told otherwise. */
export const DEFAULT_PATIENCE_MS = 15 * 60_000;

/**
 * How long one provider request may keep being answered 429 or 529 before its agent fails, in
 * ms, counted from its first refusal, its waits in the governor's queue and its pauses included.
 * The same field everywhere it is set: the governor's default for every agent
 * (`governor.patienceMs`, `--patience`), and one agent's own (`patienceMs` on a spawn, a task
 * line or an agent file), which wins. 0 fails an agent at its first paced refusal.
 */
export const PATIENCE_MS = durationMs(0, {
  default: DEFAULT_PATIENCE_MS,
  flag: '--patience',
  arg: 'DURATION',
  help: `how long one request may be refused (429/529) before its agent\nfails (default ${formatDuration(DEFAULT_PATIENCE_MS)}); a task line's or agent file's patienceMs wins`,
});

/** The governor's options, in the order they are checked. */
export const GOVERNOR_FIELDS = {
  /**
   * How the per-key window adapts: `aimd` (default: grows on success, cut on 429/529),
   * `gradient` (by latency), or `fixed` (at `maxConcurrency`; the rate buckets alone pace). The
   * alternatives are for benchmarks: docs/GOVERNOR.md compares them.
   */
  concurrencyControl: oneOf(CONCURRENCY_CONTROLS, `one of ${CONCURRENCY_CONTROLS.join(', ')}`),
  /** `false` turns the governor off: every request goes out at once, as before (default true). */
  enabled: boolean({ expected: 'true or false', flag: '--governor' }),
  /** Requests per minute: a starting value until the headers say. */
  rpm: wholeNumber(1, NO_BOUND, { flag: '--rpm', arg: 'N' }),
  /** Input tokens per minute: a starting value until the headers say. */
  itpm: wholeNumber(1, NO_BOUND, { flag: '--itpm', arg: 'N' }),
  /** Output tokens per minute: a starting value until the headers say. */
  otpm: wholeNumber(1, NO_BOUND, { flag: '--otpm', arg: 'N' }),
  /** Most requests in flight per key, however far concurrency grows (default: no ceiling). */
  maxConcurrency: wholeNumber(1, NO_BOUND, {
    flag: '--max-concurrency',
    arg: 'N',
    help: 'most requests in flight per model and key (default: adaptive)',
  }),
  /**
   * Requests in flight per key before the first response head says what the limits allow (then
   * the window opens to that), and with no state file entry to start from (default 4).
   */
  initialConcurrency: wholeNumber(1, NO_BOUND),
  /**
   * How long one request may keep being answered 429 or 529 before its agent fails, in ms
   * (default 15 minutes), counted from its first refusal, its waits in the queue and the
   * pauses included. A `retry-after` longer than this is cut to it. An agent's own `patienceMs`
   * (its spawn's, its task line's, its agent file's, or its parent's) wins over it.
   */
  patienceMs: PATIENCE_MS,
  /**
   * Where what each key learned (its window and limits) is kept for the next process to start
   * from: a file path, or `false` for nowhere (default: `cohort/governor-state.json` under the
   * user's cache folder). It holds hashes of the keys, never a key; entries expire after a day.
   */
  state: custom<string | false>(
    'a file path, or false',
    (value) => value === false || (typeof value === 'string' && /\S/.test(value)),
    {
      flag: '--governor-state',
      arg: 'PATH|off',
      help: "where the governor keeps what it learned, for the next run to\nstart from (default: cohort/governor-state.json in the user's\ncache folder); off keeps nothing",
    },
  ),
} as const satisfies Fields;

/** What the rate-limit governor is started with (`Engine.start({ governor })`, docs/GOVERNOR.md). */
export type GovernorOptions = OptionsOf<typeof GOVERNOR_FIELDS>;

/**
 * The option names as the unknown-option message has always listed them: `enabled` first, though
 * `concurrencyControl` is checked first. Both orders are kept, so every message reads as before.
 */
const LISTED = ['enabled', ...Object.keys(GOVERNOR_FIELDS).filter((name) => name !== 'enabled')];

/** Checks governor options up front; the message names the option and what arrived. */
export function checkGovernorOptions(options: unknown): GovernorOptions {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw expected('governor', 'an object', options);
  }
  const record = options as Record<string, unknown>;
  const unknown = Object.keys(record).find((name) => !Object.hasOwn(GOVERNOR_FIELDS, name));
  if (unknown !== undefined) {
    const names = LISTED.map((name) => `\`${name}\``).join(', ');
    throw new UsageError(`Expected only the governor options ${names}, got \`${unknown}\``);
  }
  return checkOptions(GOVERNOR_FIELDS, record, 'governor.');
}
