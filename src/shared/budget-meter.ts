/**
 * The meter an agent's loop spends against (`BudgetGuard`), the checks of a user's `Budget`, and
 * the notice an agent gets for its last turn. A tree budget is held on the main thread
 * (`src/main/tree-budget.ts`); the meter only learns that it is spent, through `treeSpent`.
 */
import {
  BUDGET_KINDS,
  type Budget,
  type BudgetGuard,
  type BudgetKind,
  type StepSpend,
} from './budget.js';
import { expected, UsageError } from './errors.js';
import {
  boolean,
  checkOptions,
  durationMs,
  type Field,
  type Fields,
  wholeNumber,
} from './option-schema.js';

/** What has been spent against a budget so far. */
export interface BudgetSpent {
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  /** Steps taken: one per `spend`. */
  steps: number;
}

/**
 * The first of `budget`'s limits that `spent` and `elapsedMs` reach, in `BUDGET_KINDS` order;
 * undefined while within all. Reaching is `>=`: a budget of 3 steps allows 3, not 4. Shared by the
 * meter and the tree ledger so both read a limit the same way.
 */
export function reachedLimit(
  budget: Budget | undefined,
  spent: Readonly<BudgetSpent>,
  elapsedMs: number,
): BudgetKind | undefined {
  if (budget === undefined) return undefined;
  for (const kind of BUDGET_KINDS) {
    const limit = kind === 'time' ? budget.timeMs : budget[kind];
    if (limit === undefined) continue;
    const used = kind === 'time' ? elapsedMs : kind === 'usd' ? spent.costUsd : spent[kind];
    if (used >= limit) return kind;
  }
  return undefined;
}

/** Options of a `BudgetMeter`. */
export interface BudgetMeterOptions {
  /** Own limits; undefined leaves only spend tracking and a tree budget's word. */
  budget?: Budget | undefined;
  /** When the agent started, on the `now` clock; default: now. */
  startedAt?: number | undefined;
  /** Called after each step's spend is added, e.g. to report it to main for a tree budget. */
  onSpend?: ((spend: StepSpend) => void) | undefined;
  /** The clock, in ms; default `performance.now`. Injected by tests. */
  now?: (() => number) | undefined;
}

/**
 * One agent's budget: adds each step's spend and says which limit, if any, is reached. The agent
 * loop asks at each step's end, so a limit is noticed one step late at most, never mid-request.
 */
export class BudgetMeter implements BudgetGuard {
  readonly #budget: Budget | undefined;
  readonly #startedAt: number;
  readonly #onSpend: ((spend: StepSpend) => void) | undefined;
  readonly #now: () => number;
  readonly #spent: BudgetSpent = { inputTokens: 0, outputTokens: 0, costUsd: 0, steps: 0 };
  #treeKind: BudgetKind | undefined;
  #spentController: AbortController | undefined;
  #timer: NodeJS.Timeout | undefined;
  /**
   * The time limit's timer fired. Node times timers from its loop's cached clock, which lags
   * `performance.now()`: once the signal says time is up, `exceeded()` must say so too.
   */
  #timeUp = false;

  constructor(options: BudgetMeterOptions = {}) {
    this.#budget = options.budget;
    this.#now = options.now ?? (() => performance.now());
    this.#startedAt = options.startedAt ?? this.#now();
    this.#onSpend = options.onSpend;
  }

  /** Adds one step's spend, counts the step, then tells `onSpend`. */
  spend(step: StepSpend): void {
    this.#spent.inputTokens += step.inputTokens;
    this.#spent.outputTokens += step.outputTokens;
    this.#spent.costUsd += step.costUsd;
    this.#spent.steps += 1;
    this.#onSpend?.(step);
  }

  /** The first own limit reached (in `BUDGET_KINDS` order), else a tree budget's; or undefined. */
  exceeded(): BudgetKind | undefined {
    return (
      reachedLimit(this.#budget, this.#spent, this.#now() - this.#startedAt) ??
      (this.#timeUp ? 'time' : undefined) ??
      this.#treeKind
    );
  }

  /**
   * A tree budget above this agent was spent (main said so): `exceeded()` reports it from now on.
   * The first word wins, so the kind the agent is told does not change under it.
   */
  treeSpent(which: BudgetKind): void {
    this.#treeKind ??= which;
    this.#spentController?.abort(which);
  }

  spentSignal(): AbortSignal {
    if (this.#spentController) return this.#spentController.signal;
    const controller = new AbortController();
    this.#spentController = controller;
    const now = this.exceeded();
    if (now !== undefined) controller.abort(now);
    else if (this.#budget?.timeMs !== undefined) {
      const left = this.#budget.timeMs - (this.#now() - this.#startedAt);
      this.#timer = setTimeout(
        () => {
          this.#timeUp = true;
          controller.abort('time');
        },
        Math.max(0, left),
      );
      this.#timer.unref();
    }
    return controller.signal;
  }

  close(): void {
    clearTimeout(this.#timer);
  }

  /**
   * A resumed agent's steps, read back from its transcript: they count against `steps` again.
   * Not told to `onSpend`, since main's tree ledger counted them when they were taken.
   */
  resumeSteps(steps: number): void {
    this.#spent.steps = Math.max(this.#spent.steps, steps);
  }

  /** A copy of what has been spent, so a caller cannot change the meter's counts. */
  get spent(): BudgetSpent {
    return { ...this.#spent };
  }
}

/**
 * A budget's limits, in the order the library checks them. Each bound is written here once: the
 * agent files' and task lines' form (`budgetFromData`) takes the same fields, with `time` as a
 * duration in place of `timeMs`.
 */
export const BUDGET_FIELDS = {
  inputTokens: wholeNumber(1),
  outputTokens: wholeNumber(1),
  steps: wholeNumber(1),
  usd: {
    type: 'number',
    exclusiveMinimum: 0,
    expected: 'a finite number of dollars above 0',
  } satisfies Field<number>,
  // Above 2³¹−1 ms a Node timer fires at once, so the tree ledger's timer could not hold it.
  timeMs: durationMs(1),
  tree: boolean({ expected: 'true or false' }),
} as const satisfies Fields & Record<keyof Budget, Field>;

/**
 * The keys as the unknown-key message has always listed them (`usd` before `steps`, though
 * `steps` is checked first): both orders are kept, so every message reads as before.
 */
const BUDGET_KEYS: readonly (keyof Budget)[] = [
  'inputTokens',
  'outputTokens',
  'usd',
  'steps',
  'timeMs',
  'tree',
];

/**
 * Checks a `Budget` given in library options (`timeMs` in ms). Throws a UsageError naming `name`
 * and the field. Returns a copy holding only the fields that are set.
 */
export function checkBudget(name: string, value: unknown): Budget | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw expected(name, 'an object of budget limits', value);
  }
  const record = value as Record<string, unknown>;
  const unknown = Object.keys(record).filter((key) => !Object.hasOwn(BUDGET_FIELDS, key));
  if (unknown.length > 0) {
    const known = BUDGET_KEYS.map((key) => `\`${key}\``).join(', ');
    const got = unknown.map((key) => `\`${key}\``).join(', ');
    throw new UsageError(`Expected \`${name}\` to have only the keys ${known}, got ${got}`);
  }
  checkOptions(BUDGET_FIELDS, record, `${name}.`);
  const budget: Record<string, unknown> = {};
  for (const key of Object.keys(BUDGET_FIELDS)) {
    if (record[key] !== undefined) budget[key] = record[key];
  }
  return budget as Budget;
}

/**
 * Field-wise merge: each field of `over` replaces `base`'s, so a spawn can tighten one limit of
 * an engine-wide default and keep the rest. Undefined only when both are.
 */
export function mergeBudgets(
  base: Budget | undefined,
  over: Budget | undefined,
): Budget | undefined {
  if (base === undefined && over === undefined) return undefined;
  const merged: Budget = { ...base };
  for (const key of BUDGET_KEYS) {
    const field = over?.[key];
    // An explicit `undefined` (from untyped callers) must not erase the base's limit.
    if (field !== undefined) (merged as Record<string, unknown>)[key] = field;
  }
  return merged;
}

/** The fixed start of every budget notice; `budgetNoticeKind` reads the kind after it. */
const NOTICE_PREFIX = '[budget spent: ';

const KIND_WORDS: Record<BudgetKind, string> = {
  inputTokens: 'input-token',
  outputTokens: 'output-token',
  usd: 'cost (USD)',
  steps: 'step',
  time: 'time',
};

/**
 * The notice the agent gets for its last turn. It says plainly what happened and what to do,
 * because the model sees only this text and a tool list cut down to `reply`.
 */
export function budgetNotice(which: BudgetKind): string {
  return (
    `${NOTICE_PREFIX}${which}] Your ${KIND_WORDS[which]} budget is spent. ` +
    'This is your last turn, and only the `reply` tool is available. ' +
    'Call `reply` now with the best result you have so far.'
  );
}

/** The kind a budget notice names, or undefined when `text` is not one (restore uses it). */
export function budgetNoticeKind(text: string): BudgetKind | undefined {
  if (!text.startsWith(NOTICE_PREFIX)) return undefined;
  const end = text.indexOf(']', NOTICE_PREFIX.length);
  if (end < 0) return undefined;
  const kind = text.slice(NOTICE_PREFIX.length, end);
  return (BUDGET_KINDS as readonly string[]).includes(kind) ? (kind as BudgetKind) : undefined;
}
