import type { Engine } from '../src/main/engine.js';
import type { SessionEvent } from '../src/main/session.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { Census } from './census.js';
import type { Random } from './random.js';
import type { FaultCounts, PlanBook } from './scripts.js';

/** The depth below which agents spawn: root 0, children 1, grandchildren 2, great-grandchildren 3. */
export const CHAOS_MAX_DEPTH = 3;

/**
 * Counts `agent-settle` events per agent id wherever someone listens (direct children, batch
 * tasks, the sessions' streams): a second settle event for one id is a duplicate the ledger sees
 * for itself, beside the port's own count. Agents nobody listens to are the census's.
 */
export class Ledger {
  readonly settles = new Map<string, number>();
  resumed = 0;
  /** Of those, resumes because cohort terminated the worker for a child stuck past its grace. */
  resumedForStuck = 0;

  event(event: AgentEvent | SessionEvent): void {
    if (event.type === 'agent-resume') {
      this.resumed++;
      if (event.reason.startsWith('worker terminated')) this.resumedForStuck++;
    }
    if (event.type !== 'agent-settle') return;
    this.settle(event.agentId);
  }

  settle(id: string): void {
    this.settles.set(id, (this.settles.get(id) ?? 0) + 1);
  }

  /** Ids seen settling more than once. */
  duplicated(): number {
    let count = 0;
    for (const settles of this.settles.values()) if (settles > 1) count++;
    return count;
  }
}

/** What every part of the run shares. */
export interface ChaosContext {
  engine: Engine;
  /**
   * Decides what depends on timing (which live agent to cancel): seeded, but only roughly
   * replayable. Each part has a Random of its own for its scripts, which replay from the seed.
   */
  live: Random;
  book: PlanBook;
  census: Census;
  ledger: Ledger;
  faults: FaultCounts;
  /** How long the run may go without any agent settling, while it waits, before it is a hang. */
  patienceMs: number;
  /** Waits that ran out of patience, by name: each is a hang. */
  hangs: string[];
  log: (line: string) => void;
}

/**
 * Waits for `promise` as long as the engine makes progress: it is a hang when no agent at all
 * settled for `patienceMs` while waiting. A hang is noted under `what`, and the run goes on.
 */
export function withPatience<T>(
  context: Pick<ChaosContext, 'patienceMs' | 'hangs' | 'census'>,
  what: string,
  promise: Promise<T>,
): Promise<T | undefined> {
  const since = performance.now();
  return new Promise((resolve) => {
    const timer = setInterval(
      () => {
        const quiet = performance.now() - Math.max(since, context.census.lastSettleAt);
        if (quiet < context.patienceMs) return;
        clearInterval(timer);
        context.hangs.push(what);
        resolve(undefined);
      },
      Math.min(1000, context.patienceMs),
    );
    void promise.then((value) => {
      clearInterval(timer);
      resolve(value);
    });
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
