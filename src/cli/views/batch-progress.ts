import cliProgress from 'cli-progress';
import { clockText } from '../../shared/duration.js';
import type { AgentEvent } from '../../shared/events.js';
import type { GovernorState } from '../../shared/governor/types.js';
import { BATCH_PRICE_FACTOR } from '../../shared/lane/lane.js';
import { type AgentOutcome, type AgentResult, emptyOutcomeCounts } from '../../shared/result.js';
import { note, safeLabel, stderr } from '../output.js';
import { describeGovernor, describeGovernorShort } from './governor-view.js';
import { LineCadence } from './line-cadence.js';
import { stderrBar } from './terminal-bar.js';
import { cacheHitPercent, cacheNote, describeSaving } from './usage-text.js';

/** Failed tasks named one by one on stderr; past this, only counted. */
const FAILED_LINES_SHOWN = 20;
/** How long connection failures go on before a retry line says so (the breaker speaks first). */
const UNANSWERED_GRACE_MS = 1000;
/** Off a terminal: the least time between two progress lines, when something changed. */
const LINE_MIN_MS = 2000;
/** Off a terminal: the most time between two progress lines, when nothing changed. */
const LINE_MAX_MS = 30_000;
/** How often the bar is redrawn, and a line checked for, with or without a settled task. */
const TICK_MS = 1000;

/** What a batch's settled tasks spent, added up (the `spent` of `cohort batch --json`'s summary). */
export interface BatchSpent {
  /** Uncached input, as in `AgentUsage`. */
  inputTokens: number;
  outputTokens: number;
  /** Input read from the prompt cache. */
  cacheReadTokens: number;
  /** Input written to the prompt cache. */
  cacheWriteTokens: number;
  steps: number;
  /** Dollars, only over the tasks whose model has a price. */
  costUsd: number;
  /** Tasks whose result had a `costUsd` (their model has a price). */
  priced: number;
  /** Tasks a budget stopped. */
  budgetExceeded: number;
  /**
   * Cache reads over all input (uncached, read and written), in percent, two decimals; only when
   * something was read from or written to the cache.
   */
  cacheHitPercent?: number;
  /** The sum of the results' `usage.cacheSavedUsd`; only when one of them had it. */
  cacheSavedUsd?: number;
  /**
   * What the steps Message Batches answered would have cost more in real time: the sum of the
   * results' `usage.batchSavedUsd` (the batches and `auto` lanes). Only when one of them had it.
   */
  batchSavedUsd?: number;
}

/** What a batch has seen: outcomes, failures by code, and which agents are waiting on a retry. */
export class BatchTally {
  readonly counts: Record<AgentOutcome, number> = emptyOutcomeCounts();
  readonly failureCodes: Record<string, number> = {};
  readonly #spent: BatchSpent = {
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    steps: 0,
    costUsd: 0,
    priced: 0,
    budgetExceeded: 0,
  };
  readonly #retrying = new Set<string>();
  /** Results per queue worker (`HOST/PID`), with when each worker's first one arrived. */
  readonly workers = new Map<string, { results: number; since: number }>();
  retries = 0;
  settled = 0;
  /** Called at each provider retry, with what the provider answered. */
  onRetry: ((event: Extract<AgentEvent, { type: 'provider-retry' }>) => void) | undefined;

  /**
   * What the settled tasks spent, added up (a copy), with the cache's hit rate and saving when
   * any input was read from or written to the cache.
   */
  get spent(): BatchSpent {
    const { cacheSavedUsd, ...spent }: BatchSpent = { ...this.#spent };
    const hit = cacheHitPercent(spent);
    if (hit !== undefined) spent.cacheHitPercent = Math.round(hit * 100) / 100;
    return cacheSavedUsd === undefined ? spent : { ...spent, cacheSavedUsd };
  }

  /** Agents between a provider retry and their next step's end. */
  get retrying(): number {
    return this.#retrying.size;
  }

  /** An agent's live events: only retries and step ends matter here. */
  readonly watch = (event: AgentEvent): void => {
    if (event.type === 'provider-retry') {
      this.retries++;
      this.#retrying.add(event.agentId);
      this.onRetry?.(event);
    } else if (event.type === 'step-end') this.#retrying.delete(event.agentId);
  };

  settle(result: AgentResult): void {
    this.settled++;
    if (result.worker !== undefined) {
      const seen = this.workers.get(result.worker);
      if (seen) seen.results++;
      else this.workers.set(result.worker, { results: 1, since: Date.now() });
    }
    this.counts[result.outcome]++;
    const spent = this.#spent;
    const usage = result.usage;
    spent.inputTokens += usage.inputTokens;
    spent.outputTokens += usage.outputTokens;
    // A result line written before the cache counts existed has none.
    spent.cacheReadTokens += usage.cacheReadTokens ?? 0;
    spent.cacheWriteTokens += usage.cacheWriteTokens ?? 0;
    spent.steps += usage.steps;
    if (usage.costUsd !== undefined) {
      spent.costUsd += usage.costUsd;
      spent.priced++;
      if (usage.batchSavedUsd !== undefined) {
        spent.batchSavedUsd = (spent.batchSavedUsd ?? 0) + usage.batchSavedUsd;
      } else if (result.lane === 'batches') {
        // A line written before results said what the lane saved: all its steps were batched.
        spent.batchSavedUsd =
          (spent.batchSavedUsd ?? 0) + usage.costUsd * (1 / BATCH_PRICE_FACTOR - 1);
      }
    }
    if (usage.cacheSavedUsd !== undefined) {
      spent.cacheSavedUsd = (spent.cacheSavedUsd ?? 0) + usage.cacheSavedUsd;
    }
    if (result.budgetExceeded !== undefined) spent.budgetExceeded++;
    this.#retrying.delete(result.id);
    if (result.outcome === 'failed') {
      const code = result.code ?? 'internal';
      this.failureCodes[code] = (this.failureCodes[code] ?? 0) + 1;
    }
  }

  /**
   * `3 workers: vm/41 38.2/s, vm/42 40.1/s`: the queue workers that answered and each one's
   * results per second since its first; `3 workers` when `short`. Empty off a queue.
   */
  describeWorkers(short: boolean): string {
    if (this.workers.size === 0) return '';
    const count = `${this.workers.size} worker${this.workers.size === 1 ? '' : 's'}`;
    if (short) return count;
    const now = Date.now();
    const each = [...this.workers].map(([name, { results, since }]) => {
      const seconds = Math.max((now - since) / 1000, 1);
      return `${name} ${(results / seconds).toFixed(1)}/s`;
    });
    return `${count}: ${each.join(', ')}`;
  }

  /** `12 complete, 3 failed (2 rate_limited, 1 auth)`: outcomes, with failures by code. */
  describe(): string {
    return Object.entries(this.counts)
      .filter(([, count]) => count > 0)
      .map(([outcome, count]) => {
        if (outcome !== 'failed') return `${count} ${outcome}`;
        const codes = Object.entries(this.failureCodes)
          .sort((a, b) => b[1] - a[1])
          .map(([code, n]) => `${n} ${code}`)
          .join(', ');
        return `${count} failed (${codes})`;
      })
      .join(', ');
  }
}

/**
 * Progress on stderr: a bar on a terminal; otherwise a plain line when something changed (at
 * most one per 2 s) and at least one every 30 s, so a log shows a batch alive while nothing
 * settles; nothing with --quiet. The ETA comes from the average rate since the batch started,
 * which holds steady where a short window jumps with every burst. When stderr closes, progress
 * stops and the batch goes on.
 */
export class BatchProgress {
  readonly #bar: cliProgress.SingleBar | undefined;
  #total: number;
  readonly #quiet: boolean;
  readonly #tally: BatchTally;
  readonly #started = Date.now();
  readonly #cadence: LineCadence;
  /**
   * What the batch waits for while nothing runs (`waiting for a worker`), shown in the progress
   * until it is cleared or a task settles, with the settled count when it was set.
   */
  #waiting: { state: string; settled: number } | undefined;
  readonly #ticker: NodeJS.Timeout | undefined;
  #failedShown = 0;
  #lastRetryLine = 0;
  /** When the first retry with no answer from the provider came (a connection failure). */
  #unansweredSince: number | undefined;
  readonly #governor: (() => GovernorState[]) | undefined;

  constructor(options: {
    total: number;
    quiet: boolean;
    tally: BatchTally;
    /** The engine's governor states, shown while it holds requests back. */
    governor?: (() => GovernorState[]) | undefined;
  }) {
    this.#governor = options.governor;
    this.#total = options.total;
    this.#quiet = options.quiet;
    this.#tally = options.tally;
    this.#tally.onRetry = (event) => this.#retry(event);
    this.#cadence = new LineCadence({
      minMs: LINE_MIN_MS,
      maxMs: LINE_MAX_MS,
      start: this.#started,
      state: this.#lineState(),
    });
    if (!options.quiet && stderr().isTTY) {
      this.#bar = stderrBar(
        {
          format:
            'batch [{bar}] {value}/{total} | {outcomes}{waiting}{retrying}{governor}{workers}{cache} | {rate}/s | ETA {steady_eta}',
        },
        cliProgress.Presets.shades_classic,
      );
      this.#bar.start(options.total, 0, this.#payload());
    }
    // Not only at each settle: a batch where nothing settles for a while must still show it.
    if (!options.quiet) {
      this.#ticker = setInterval(() => this.update(), TICK_MS);
      this.#ticker.unref();
    }
  }

  update(): void {
    if (this.#quiet || stderr().closed) return;
    if (this.#bar) {
      this.#bar.update(this.#tally.settled, this.#payload());
      return;
    }
    const now = Date.now();
    const state = this.#lineState();
    // The last settle gets its line at once, and once.
    const last = this.#tally.settled === this.#total && this.#cadence.changed(state);
    if (last || this.#cadence.due(now, state)) {
      this.#cadence.wrote(now, state);
      const payload = this.#payload();
      note(
        `cohort batch: ${this.#tally.settled}/${this.#total} done (${payload.outcomes}${payload.waiting}${payload.retrying}), ${payload.rate}/s, ETA ${payload.steady_eta}${payload.governor}${payload.workers}${payload.cache}`,
      );
    }
  }

  /**
   * What the batch waits for while nothing runs (`waiting for a worker`), shown in place of
   * `starting` or beside the counts until it is cleared with `undefined`.
   */
  waitingFor(state: string | undefined): void {
    this.#waiting = state === undefined ? undefined : { state, settled: this.#tally.settled };
    this.update();
  }

  /** The waiting state, while no task has settled since it was set. */
  #waitingState(): string | undefined {
    const waiting = this.#waiting;
    return waiting !== undefined && waiting.settled === this.#tally.settled
      ? waiting.state
      : undefined;
  }

  /** What a plain line says that counts as a change: the settled count and the waiting state. */
  #lineState(): string {
    return `${this.#tally.settled}|${this.#waitingState() ?? ''}`;
  }

  /**
   * Without a bar, a retry gets its own line (at most one per 2 s), so a batch that is being
   * pushed back by its provider says so instead of looking stuck.
   */
  #retry(event: Extract<AgentEvent, { type: 'provider-retry' }>): void {
    if (this.#bar || this.#quiet || stderr().closed) return;
    const now = Date.now();
    if (event.status === undefined) {
      // No answer at all. A dead provider trips the governor's breaker within a second, and its
      // one message says what to check; only trouble that outlasts that gets a line here.
      this.#unansweredSince ??= now;
      if (now - this.#unansweredSince < UNANSWERED_GRACE_MS) return;
    }
    if (now - this.#lastRetryLine < 2000) return;
    this.#lastRetryLine = now;
    const why =
      event.status === undefined
        ? `could not reach the provider (${event.code})`
        : `provider answered ${event.status} ${event.code}`;
    const how = event.paced
      ? 'the governor paces their retries'
      : `attempt ${event.attempt} of ${event.maxAttempts}`;
    note(`cohort batch: ${why}; ${this.#tally.retrying} task(s) waiting to retry (${how})`);
  }

  /** Names a failed task and why, for the first few; the summary counts the rest. */
  failed(taskId: string, result: AgentResult): void {
    if (this.#quiet) return;
    this.#failedShown++;
    if (this.#failedShown > FAILED_LINES_SHOWN) return;
    const more =
      this.#failedShown === FAILED_LINES_SHOWN ? ' (further failures are only counted)' : '';
    this.note(
      `cohort batch: task ${safeLabel(taskId)} failed [${result.code ?? 'internal'}]: ${safeLabel(result.reason ?? '')}${more}`,
    );
  }

  /** Tasks that will not run (their model's quota is spent): the total and the ETA leave them out. */
  passOver(count: number): void {
    this.#total -= count;
    this.#bar?.setTotal(this.#total);
  }

  /** A line above the bar; nothing with --quiet. */
  note(line: string): void {
    if (this.#quiet) return;
    if (this.#bar) {
      this.#bar.stop();
      note(line);
      if (this.#tally.settled < this.#total)
        this.#bar.start(this.#total, this.#tally.settled, this.#payload());
    } else note(line);
  }

  stop(): void {
    clearInterval(this.#ticker);
    this.#bar?.stop();
  }

  /** The closing lines; `logDir` is the run's folder, when it kept anything. */
  summary(out: string, skipped: number, badLines: number, logDir?: string): void {
    if (this.#quiet) return;
    const outcomes = this.#tally.describe();
    note(
      `cohort batch: done — ${this.#tally.settled} ran${outcomes ? ` (${outcomes})` : ''}, ${skipped} skipped, ${badLines} bad line(s); results in ${safeLabel(out)}`,
    );
    note(`cohort batch: spent ${describeSpend(this.#tally.spent, this.#tally.settled)}`);
    const workers = this.#tally.describeWorkers(false);
    if (workers !== '') note(`cohort batch: ${safeLabel(workers)}`);
    if (logDir !== undefined) note(`cohort batch: logs: ${safeLabel(logDir)}`);
  }

  #payload(): {
    outcomes: string;
    waiting: string;
    retrying: string;
    rate: string;
    steady_eta: string;
    governor: string;
    workers: string;
    cache: string;
  } {
    const seconds = (Date.now() - this.#started) / 1000;
    const done = this.#tally.settled;
    const retrying = this.#tally.retrying;
    const outcomes = this.#tally.describe();
    const waiting = this.#waitingState();
    return {
      outcomes: outcomes || (waiting ?? 'starting'),
      waiting: outcomes !== '' && waiting !== undefined ? ` | ${waiting}` : '',
      retrying: retrying > 0 ? ` | ${retrying} retrying (${this.#tally.retries} retries)` : '',
      rate: seconds > 0 ? (done / seconds).toFixed(1) : '0.0',
      steady_eta: this.#eta(),
      governor: this.#governorText(this.#bar !== undefined),
      workers: this.#workersText(),
      cache: this.#cacheText(),
    };
  }

  /**
   * The governor's keys that hold requests back now (queued, paused or shut), else ''. The bar
   * gets the short form: a terminal line is not wrapped, so what passes its width is lost.
   */
  #governorText(short: boolean): string {
    const states = this.#governor?.() ?? [];
    const now = Date.now();
    const busy = states.filter(
      (state) =>
        state.queued > 0 || (state.pausedUntil ?? 0) > now || state.exhausted !== undefined,
    );
    const describe = short ? describeGovernorShort : describeGovernor;
    return busy.map((state) => ` | ${safeLabel(describe(state, now))}`).join('');
  }

  /** The prompt cache's hit rate over the settled tasks; '' while nothing was read or written. */
  #cacheText(): string {
    const hit = cacheHitPercent(this.#tally.spent);
    return hit === undefined ? '' : ` | cache hit ${hit.toFixed(1)}%`;
  }

  /** The queue's workers: the bar gets their count, a line each one's rate. */
  #workersText(): string {
    const text = this.#tally.describeWorkers(this.#bar !== undefined);
    return text === '' ? '' : ` | ${safeLabel(text)}`;
  }

  #eta(): string {
    const done = this.#tally.settled;
    if (done < 2) return '…';
    const perTask = (Date.now() - this.#started) / done;
    return clockText((perTask * (this.#total - done)) / 1000);
  }
}

/**
 * `12,345 input + 678 output tokens, 40 steps, $0.0461; 2 stopped by their budget`. Dollars only
 * over the tasks whose model has a price, and said so when that is not all of them. When input
 * was read from or written to the prompt cache, those counts follow the uncached input, and the
 * hit rate and what caching saved follow the dollars:
 * `1,200 input (+18,000 cached, 300 written) + 80 output tokens, 3 steps, $0.0113; cache hit
 * 92.3%, cache saved $0.0484`.
 */
export function describeSpend(spent: BatchSpent, settled: number): string {
  const budget =
    spent.budgetExceeded > 0 ? `; ${spent.budgetExceeded} stopped by their budget` : '';
  const dollars =
    spent.priced === 0
      ? 'no price for the model (see --prices)'
      : `$${spent.costUsd.toFixed(4)}${spent.priced < settled ? ` for the ${spent.priced} priced task(s)` : ''}`;
  const count = (tokens: number) => tokens.toLocaleString('en-US');
  const input = `${count(spent.inputTokens)} input${cacheNote(spent, count)}`;
  const hit = cacheHitPercent(spent);
  const saved = spent.cacheSavedUsd === undefined ? '' : `, ${describeSaving(spent.cacheSavedUsd)}`;
  const cache = hit === undefined ? '' : `; cache hit ${hit.toFixed(1)}%${saved}`;
  const batches =
    spent.batchSavedUsd === undefined
      ? ''
      : `; the batches lane saved $${spent.batchSavedUsd.toFixed(4)}`;
  return `${input} + ${count(spent.outputTokens)} output tokens, ${spent.steps} steps, ${dollars}${cache}${batches}${budget}`;
}
