import { newAgentId } from '../shared/ids.js';
import { keepsLog, type LogPolicy, withoutLog } from '../shared/journal/policy.js';
import { journalResult } from '../shared/journal/writer.js';
import { type AgentResult, type CancelReason, emptyUsage } from '../shared/result.js';
import type { AgentOptions, SpawnContext } from './engine-options.js';
import type { ChildHandle, ChildStatus } from './runners/spawned-child.js';

/** What a queued spawn is given beside its options. */
export interface QueuedOptions {
  title: string;
  /** The engine's run folder and `logs` policy, for a result made here. */
  logDir: string;
  logs: LogPolicy | undefined;
  /** It settled cancelled without starting. */
  onCancelled: () => void;
}

/**
 * A spawn a group holds until a slot frees, and the handle its caller holds from the start. Once
 * started it follows the child the engine spawned; cancelled before, it settles at once, with a
 * result made here (and journaled, as the pool journals a child cancelled in its line).
 */
export class QueuedSpawn implements ChildHandle {
  readonly id: string;
  readonly title: string;
  readonly spawnedAt = performance.now();
  readonly result: Promise<AgentResult>;
  readonly options: AgentOptions;
  readonly context: SpawnContext;
  readonly #made: QueuedOptions;
  #child: ChildHandle | undefined;
  #settled = false;
  #resolve!: (result: AgentResult) => void;

  constructor(options: AgentOptions, context: SpawnContext, made: QueuedOptions) {
    // A nested group's queued spawn passing through its parent's line keeps the id it was given.
    this.id = context.id ?? newAgentId();
    this.options = options;
    this.context = context;
    this.title = made.title;
    this.#made = made;
    this.result = new Promise((resolve) => {
      this.#resolve = resolve;
    });
  }

  get status(): ChildStatus {
    if (this.#settled) return 'settled';
    return this.#child?.status ?? 'queued';
  }

  /** A slot freed: the engine spawned it as `child`, whose result becomes its own. */
  start(child: ChildHandle): void {
    this.#child = child;
    void child.result.then((result) => {
      this.#settled = true;
      this.#resolve(result);
    });
  }

  cancel(reason: CancelReason = 'user'): boolean {
    if (this.#settled) return false;
    if (this.#child) return this.#child.cancel(reason);
    this.settleCancelled(reason);
    return true;
  }

  /** Settles it cancelled without its having started. */
  settleCancelled(reason: CancelReason): void {
    if (this.#settled || this.#child) return;
    this.#settled = true;
    const { logDir, logs } = this.#made;
    const made: AgentResult = {
      id: this.id,
      title: this.title,
      outcome: 'cancelled',
      text: '',
      reason,
      cancelReason: reason,
      logDir,
      truncated: false,
      elapsedMs: Math.round(performance.now() - this.spawnedAt),
      generation: this.context.generation ?? 0,
      usage: emptyUsage(),
    };
    const keep = keepsLog(logs, 'cancelled');
    const result = keep ? made : withoutLog(made);
    journalResult(logDir, result, keep);
    this.#made.onCancelled();
    this.#resolve(result);
    this.options.onEvent?.({ type: 'agent-settle', agentId: this.id, result });
  }
}
