import { keepsLog, type LogPolicy } from '../shared/journal/policy.js';
import { journalFor, type SegmentWriter } from '../shared/journal/writer.js';
import type { MessageParam } from '../shared/provider/types.js';
import { type AgentResult, emptyUsage } from '../shared/result.js';
import type { TurnResult } from './root-turn.js';

/** The id the root's records carry in the journal (and its events). */
export const ROOT_ID = 'root';

/**
 * A session root's part of the run journal, on main's segment (docs/LOGS.md): a `start` when its
 * first turn begins, after `clear()` (an empty transcript, the next generation) and when a stopped
 * run resumes (the whole transcript); a `step` for each user message and each committed step;
 * and a `result` when the session closes. A user message that follows a user message (a failed
 * turn's) is merged into it when read back, as the session does.
 */
export class RootJournal {
  readonly #segment: SegmentWriter;
  #inc: number;
  #started = false;

  /** `inc` is the root's next run: 0 for a new session, one more than the stopped run's. */
  constructor(dir: string, inc: number) {
    this.#segment = journalFor(dir);
    this.#inc = inc;
  }

  get started(): boolean {
    return this.#started;
  }

  /** The root's run begins (again), from `messages`. */
  start(meta: Record<string, unknown>, messages: readonly MessageParam[]): void {
    if (this.#started) this.#inc++;
    this.#started = true;
    this.#segment.append({
      k: 'start',
      a: ROOT_ID,
      inc: this.#inc,
      at: Date.now(),
      meta,
      m: messages,
    });
  }

  /** Messages appended to the root's transcript. */
  step(messages: readonly MessageParam[]): void {
    if (!this.#started || messages.length === 0) return;
    this.#segment.append({ k: 'step', a: ROOT_ID, inc: this.#inc, m: messages });
  }

  /**
   * The session closed: how its last turn ended, kept at close as the `logs` policy says. One
   * closed while a turn or an agent was still going (`stopped`) was cut short (`cancelled`,
   * reason `shutdown`), and a resume takes it up again.
   */
  end(
    last: TurnResult | undefined,
    {
      stopped,
      generation,
      policy,
    }: { stopped: boolean; generation: number; policy: LogPolicy | undefined },
  ): Promise<void> {
    if (!this.#started) return Promise.resolve();
    const result = rootResult(last, stopped, generation);
    const keep = keepsLog(policy, result.outcome);
    this.#segment.append({ k: 'result', a: ROOT_ID, at: Date.now(), keep, r: result });
    return this.#segment.flushed();
  }
}

/** The root's result record, from its last turn. */
function rootResult(
  last: TurnResult | undefined,
  stopped: boolean,
  generation: number,
): AgentResult {
  const base = {
    id: ROOT_ID,
    title: ROOT_ID,
    truncated: false,
    elapsedMs: 0,
    generation,
    usage: last?.usage ?? emptyUsage(),
  };
  if (stopped || last === undefined || last.outcome === 'cancelled') {
    const reason = stopped || last === undefined ? 'shutdown' : (last.reason ?? 'user');
    return { ...base, outcome: 'cancelled', text: '', reason };
  }
  if (last.outcome === 'ready') return { ...base, outcome: 'complete', text: last.text };
  if (last.outcome === 'capped') return { ...base, outcome: 'capped', text: '' };
  return {
    ...base,
    outcome: 'failed',
    text: '',
    ...(last.reason ? { reason: last.reason } : {}),
    code: last.code ?? 'internal',
  };
}
