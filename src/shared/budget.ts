/**
 * What one agent may spend before it is told to stop: the limits, the kinds a result names, and
 * the guard the agent loop consults. The meter that implements the guard is `budget-meter.ts`;
 * prices are `prices.ts`.
 */

/** A limit an agent can reach; `budgetExceeded` in a result names one of these. */
export type BudgetKind = 'inputTokens' | 'outputTokens' | 'usd' | 'steps' | 'time';

export const BUDGET_KINDS: readonly BudgetKind[] = [
  'inputTokens',
  'outputTokens',
  'usd',
  'steps',
  'time',
];

/**
 * The limits of one agent. Every field is optional; an unset one does not limit. `tree` makes
 * the budget cover the agent's descendants' spending as well as its own (a tree budget).
 */
export interface Budget {
  inputTokens?: number;
  outputTokens?: number;
  /** Dollars, priced by the model's entry in the price table (`prices.ts`). */
  usd?: number;
  /** Provider requests (steps) taken. */
  steps?: number;
  /** Wall time from the agent's start, in ms. */
  timeMs?: number;
  /** The limits cover the agent's descendants too (their spending adds to this agent's). */
  tree?: boolean;
}

/** What one step spent: the provider's usage for it, and its price when the model has one. */
export interface StepSpend {
  /** Every input token the step's request carried: uncached, read from and written to the cache. */
  inputTokens: number;
  outputTokens: number;
  /** Dollars; 0 when the model has no price. */
  costUsd: number;
}

/**
 * What the agent loop asks of a budget. The loop reports each step's spend and, at each step's
 * end, asks whether a limit is reached: then the agent gets one last turn with only `reply`.
 */
export interface BudgetGuard {
  /** Adds one step's spend (the step counts too). */
  spend(step: StepSpend): void;
  /** The first limit reached, its own or a tree budget's above it; undefined while within. */
  exceeded(): BudgetKind | undefined;
  /** A resumed agent's steps so far, read back from its transcript. */
  resumeSteps?(steps: number): void;
  /**
   * Aborts when a limit is reached that needs no step to reach it: the time limit runs out, or
   * main says a tree budget is spent. An agent parked waiting for its own agents' results stops
   * waiting on it.
   */
  spentSignal?(): AbortSignal;
  /** The agent ended: its timer goes. */
  close?(): void;
}

/** Prices of one model, in dollars per million tokens. */
export interface ModelPrice {
  inputPerMTok: number;
  outputPerMTok: number;
  /** Input read from the prompt cache; default a tenth of `inputPerMTok`. */
  cacheReadPerMTok?: number;
  /** Input written to the prompt cache with the 5-minute lifetime; default 1.25× `inputPerMTok`. */
  cacheWritePerMTok?: number;
  /** Input written to the prompt cache with the one-hour lifetime; default 2× `inputPerMTok`. */
  cacheWrite1hPerMTok?: number;
}

/** Prices by model name; a name matches the longest entry it starts with (see `prices.ts`). */
export type PriceTable = Record<string, ModelPrice>;
