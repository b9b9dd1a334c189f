import type { Budget } from '../shared/budget.js';
import { checkBudget } from '../shared/budget-meter.js';
import { expected } from '../shared/errors.js';
import { PATIENCE_MS } from '../shared/governor/options.js';
import { LANE } from '../shared/lane/lane.js';
import {
  checkedBy,
  checkOptions,
  custom,
  durationMs,
  type Fields,
  nested,
  nonEmptyString,
  type OptionsOf,
  wholeNumber,
} from '../shared/option-schema.js';
import { type CarriedRules, carriedOf } from './carried.js';
import { SPAWN_PROVIDER_FIELDS, type SpawnProvider } from './engine-options.js';

// A group's options (docs/GROUPS.md), declared once as the engine's are: the type, the check and
// its messages (`group.maxConcurrency`) come from here.

/** What `engine.group()` and `group.group()` are given; every field is optional. */
export const GROUP_FIELDS = {
  /** Its name, for messages (`group 'tenant-42' is draining`). */
  name: nonEmptyString(),
  /**
   * Cancels the group when it aborts: its reason when that is text, else `user` (as
   * `cancel(reason)`). One listener per group, however many agents it has.
   */
  signal: custom<AbortSignal>('an AbortSignal', (value) => value instanceof AbortSignal),
  /**
   * The limits its agents share, their descendants' spending included, as a tree budget's: when
   * one is reached, each of them gets its one last turn with only `reply`. `tree` changes
   * nothing: a group's budget always covers its whole tree. A nested group's budget adds to its
   * parent's too.
   */
  budget: custom<Budget>('an object of budget limits', checkedBy(checkBudget)),
  /**
   * Its agents running at once (spawned and not settled). A spawn past it is queued, never
   * refused: its handle comes back at once and it starts when a slot frees. Agents its agents
   * spawn do not count (a parent waiting on a child it could not start would wait forever).
   */
  maxConcurrency: wholeNumber(1),
  /**
   * Cancels the group (reason `timeout`) this long after it was made, in ms: its running agents
   * end at once, not at their next step.
   */
  timeout: durationMs(1),
  /** The default `patienceMs` of its spawns (their own, or their agent file's, win). */
  patienceMs: PATIENCE_MS,
  /** The default `lane` of its spawns (their own, or their agent file's, win; docs/LANES.md). */
  lane: LANE,
  /**
   * The default `context` of its spawns (their own wins), which their tools get as
   * `ToolContext.context`. Never journaled.
   */
  context: custom<unknown>('any value', () => true),
  /**
   * The default credentials and server of its spawns (`apiKey`, `baseURL`, `model`), field by
   * field under a spawn's own. Its agents' requests carry the key; the governor learns its
   * limits apart from other keys'. Refused in queue mode.
   */
  provider: nested<SpawnProvider>(SPAWN_PROVIDER_FIELDS),
} as const satisfies Fields;

/** What a group is given. */
export type GroupOptions = OptionsOf<typeof GROUP_FIELDS>;

/** The prefix group options are named with in messages: `group.maxConcurrency`. */
export const GROUP_PREFIX = 'group.';

/**
 * Checks a group's options before anything of it runs: each field's type and bounds (named
 * `group.maxConcurrency`, …), a `usd` limit's price, and what its spawns would carry (`context`
 * clonable for worker tools; neither `context` nor `provider.apiKey` in queue mode).
 */
export function checkGroup(
  engine: {
    rules: CarriedRules;
    checkPricedBudget(budget: Budget | undefined, model: string | undefined): void;
  },
  options: GroupOptions,
  model?: string,
): void {
  if (typeof options !== 'object' || options === null) {
    throw expected('options', 'an object of group options', options);
  }
  checkOptions(GROUP_FIELDS, options, GROUP_PREFIX);
  engine.checkPricedBudget(options.budget, options.provider?.model ?? model);
  carriedOf(options, undefined, engine.rules, GROUP_PREFIX);
}
