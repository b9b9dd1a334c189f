import { wholeNumber } from '../../shared/option-schema.js';
import type { CliFlag } from '../flags.js';

// The flags and help of `cohort batch --estimate`, apart from the estimate itself: a batch that
// estimates nothing never loads the provider and its HTTP client (estimate.ts).

/** Output tokens a task is assumed to write when `--assume-output` does not say. */
export const DEFAULT_ASSUMED_OUTPUT = 500;

export const ESTIMATE_FLAG: CliFlag = {
  flag: '--estimate',
  help: 'check every task and print what the batch would take (tasks,\ntokens, dollars, time) without sending a message (no --out needed)',
};
export const ASSUME_OUTPUT_FLAG = wholeNumber(0, 10_000_000, {
  flag: '--assume-output',
  arg: 'TOKENS',
  help: `with --estimate: output tokens per task (default ${DEFAULT_ASSUMED_OUTPUT})`,
});

/** The estimate's flags, in the order the batch help lists them. */
export const ESTIMATE_FLAGS: readonly CliFlag[] = [ESTIMATE_FLAG, ASSUME_OUTPUT_FLAG];

/** The batch help's paragraph on `--estimate`. */
export const ESTIMATE_USAGE = `--estimate checks every task the same way and prints, without sending a message: the number of
tasks; the input tokens of each task's first request, built as its agent would send it and counted
by the provider's POST /v1/messages/count_tokens (8 at a time), or as characters / 4 when the
provider has none (it says so); the output tokens assumed by --assume-output (default ${DEFAULT_ASSUMED_OUTPUT} a task);
the dollars at the price table (--prices), without and with the prompt cache as cohort uses it;
and the least time the rate limits allow: those the governor learned for this key (its state
file) over --rpm, --itpm and --otpm. --json prints it as one object.`;
