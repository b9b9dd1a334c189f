/**
 * When `cohort batch` stops admitting a model's tasks: its quota is spent, or the governor's
 * breaker found its provider unreachable or refusing the key. The batch then passes over that
 * model's tasks and explains once how to go on.
 */
import { defined } from '../shared/option-schema.js';
import type { AgentResult } from '../shared/result.js';
import { note, safeLabel } from './output.js';
import type { BatchTask } from './task-lines.js';

/** Why a batch stops admitting a model's tasks: its quota is spent, or its provider is down. */
export type StopKind = 'quota' | 'unreachable';

/**
 * Whether `result` stops its model: a spent quota, or a failure behind which the governor's
 * circuit breaker stands, open because the provider is unreachable or refuses the API key
 * (`breakerOpen`). The result says it wherever its governor ran: in this process, or in the
 * `cohort worker` that ran it on a queue.
 */
export function stopOf(result: AgentResult): { kind: StopKind; reason: string } | undefined {
  if (result.code === 'quota_exhausted') return { kind: 'quota', reason: result.reason ?? '' };
  if (result.breakerOpen === true) return { kind: 'unreachable', reason: result.reason ?? '' };
  return undefined;
}

/**
 * Models whose tasks the batch stopped admitting, with why (a spent quota, or a provider the
 * circuit breaker found unreachable or refusing the key), and the tasks passed over for them:
 * every task of such a model that was never admitted, however the batch ended.
 */
export class ModelStop {
  readonly models = new Map<string, { kind: StopKind; reason: string }>();
  /** Ids of the tasks handed to the engine. */
  readonly admitted = new Set<string>();
  readonly modelOf: (task: BatchTask) => string;
  readonly #todo: readonly BatchTask[];

  constructor(todo: readonly BatchTask[], modelOf: (task: BatchTask) => string) {
    this.#todo = todo;
    this.modelOf = modelOf;
  }

  stopped(task: BatchTask): boolean {
    return this.models.has(this.modelOf(task));
  }

  /** Stops `task`'s model; returns how many of its tasks will be passed over, or undefined if it was stopped already. */
  stop(task: BatchTask, kind: StopKind, reason: string): number | undefined {
    const model = this.modelOf(task);
    if (this.models.has(model)) return undefined;
    this.models.set(model, { kind, reason });
    return this.#todo.filter(
      (other) => this.modelOf(other) === model && !this.admitted.has(other.id),
    ).length;
  }

  get notStarted(): number {
    return this.#todo.filter((task) => this.stopped(task) && !this.admitted.has(task.id)).length;
  }

  /** For the summary: `quotaExhausted` and `unreachable`, each model with why. */
  byKind(): { quotaExhausted?: Record<string, string>; unreachable?: Record<string, string> } {
    const of = (kind: StopKind) => {
      const models = [...this.models].filter(([, stop]) => stop.kind === kind);
      return models.length === 0
        ? undefined
        : Object.fromEntries(models.map(([model, stop]) => [model, stop.reason]));
    };
    return defined({ quotaExhausted: of('quota'), unreachable: of('unreachable') });
  }

  explain(): void {
    const names = (kind: StopKind) =>
      [...this.models]
        .filter(([, stop]) => stop.kind === kind)
        .map(([model]) => safeLabel(model))
        .join(', ');
    const quota = names('quota');
    const down = names('unreachable');
    const what = [
      quota === '' ? '' : `the provider's quota is spent for ${quota}`,
      down === '' ? '' : `the provider could not be used for ${down}`,
    ]
      .filter((part) => part !== '')
      .join('; ');
    const fix =
      quota === '' ? 'Fix the provider or the key' : down === '' ? 'Raise the limit' : 'Fix that';
    note(
      `cohort batch: ${what}: ${this.notStarted} task(s) not started. ${fix}, then rerun the same command: they run, and so do the tasks that failed for it (their lines are replaced)`,
    );
  }
}
