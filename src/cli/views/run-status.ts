import { ROOT_ID, type SessionEvent } from '../../main/session.js';
import { clockText } from '../../shared/duration.js';
import type { GovernorState } from '../../shared/governor/types.js';
import { addUsage, noUsage, type ProviderUsage } from '../../shared/provider/types.js';
import { type AgentOutcome, emptyOutcomeCounts } from '../../shared/result.js';
import { describeGovernorShort } from './governor-view.js';
import { describeTokenTotals } from './usage-text.js';

/** The order a status line lists outcomes in: the good news first, the bad last. */
const OUTCOME_ORDER: readonly AgentOutcome[] = [
  'complete',
  'empty',
  'capped',
  'failed',
  'cancelled',
];

/**
 * What `cohort run`'s status line says, kept from the session events the live view already
 * receives: agents running and done (by outcome), tokens, dollars, time since the start and the
 * governor's state.
 *
 * Tokens are live where the stream carries steps (the root's, sync children's) and come with the
 * result for an async child, whose steps stay on its own thread; dollars come with results, the
 * only place a step's price is known. Text deltas pass by untouched.
 */
export class RunStatus {
  readonly #started: number;
  readonly #running = new Set<string>();
  readonly #done = new Set<string>();
  readonly #outcomes = emptyOutcomeCounts();
  /** What settled agents spent, from their results. */
  readonly #settled: ProviderUsage = noUsage();
  /** Per agent still running, what its steps so far spent (the root's never settles here). */
  readonly #live = new Map<string, ProviderUsage>();
  #costUsd = 0;
  #priced = false;
  /** The governor's last state per key. */
  readonly #governor = new Map<string, GovernorState>();

  constructor(started = Date.now()) {
    this.#started = started;
  }

  handle(event: SessionEvent): void {
    switch (event.type) {
      case 'agent-start':
        if (event.agentId !== ROOT_ID && !this.#done.has(event.agentId))
          this.#running.add(event.agentId);
        return;
      case 'step-end': {
        const spent = this.#live.get(event.agentId) ?? noUsage();
        addUsage(spent, event.usage);
        this.#live.set(event.agentId, spent);
        return;
      }
      case 'agent-settle': {
        const { agentId, result } = event;
        if (agentId === ROOT_ID || this.#done.has(agentId)) return;
        this.#done.add(agentId);
        this.#running.delete(agentId);
        this.#live.delete(agentId);
        this.#outcomes[result.outcome]++;
        addUsage(this.#settled, result.usage);
        if (result.usage.costUsd !== undefined) {
          this.#costUsd += result.usage.costUsd;
          this.#priced = true;
        }
        return;
      }
      case 'governor-update':
        this.#governor.set(event.state.key, event.state);
        return;
      default:
        return;
    }
  }

  /**
   * `cohort 1m05s | 12 running | 40 done (37 complete, 2 failed, 1 cancelled) | 123.4K in /
   * 7.9K out tokens | $0.0123 | gov 37/40, 120 queued` (one line): the dollars once a result
   * had a price, the governor once it said something.
   */
  text(now = Date.now()): string {
    const parts = [
      `cohort ${describeElapsed(now - this.#started)}`,
      `${this.#running.size} running`,
      `${this.#done.size} done${this.#describeOutcomes()}`,
    ];
    const tokens = { ...this.#settled };
    for (const spent of this.#live.values()) addUsage(tokens, spent);
    if (tokens.inputTokens + tokens.cacheReadTokens + tokens.cacheWriteTokens > 0)
      parts.push(describeTokenTotals(tokens));
    if (this.#priced) parts.push(`$${this.#costUsd.toFixed(4)}`);
    for (const state of this.#governor.values()) parts.push(describeGovernorShort(state, now));
    return parts.join(' | ');
  }

  /** ` (37 complete, 2 failed)`, or '' before anything is done. */
  #describeOutcomes(): string {
    const counts = OUTCOME_ORDER.filter((outcome) => this.#outcomes[outcome] > 0).map(
      (outcome) => `${this.#outcomes[outcome]} ${outcome}`,
    );
    return counts.length === 0 ? '' : ` (${counts.join(', ')})`;
  }
}

/** `42s`, `1m05s`, `2h03m`: a time on a status line, to the second under an hour. */
export function describeElapsed(ms: number): string {
  return clockText(Math.floor(ms / 1000));
}
