import type { AgentEvent } from '../shared/events.js';
import type { ProviderUsage } from '../shared/provider/types.js';
import { redactSecrets } from '../shared/redact.js';
import type { ChildHandle } from './runners/spawned-child.js';

/** One spawn as an observer sees it: the child's handle and where it sits in the tree. */
export interface ObservedSpawn {
  readonly id: string;
  readonly title: string;
  readonly depth: number;
  /** The id of the agent that spawned it (`root` for a session's root), else undefined. */
  readonly parent: string | undefined;
  /** The model its steps are priced by. */
  readonly model: string;
  readonly handle: ChildHandle;
}

/**
 * Watches an engine's (or a queue worker's) spawns: a live view such as the dashboard. An
 * observer is told of each spawn as it happens, with its handle, and reads the result from it.
 */
export interface SpawnObserver {
  spawned(spawn: ObservedSpawn): void;
  /**
   * Told each step's usage as the step ends, when set: each step then costs one more message
   * from the child's worker to main, so only an observer that wants it asks.
   */
  stepped?(agentId: string, usage: ProviderUsage): void;
}

/**
 * The observers of one engine. With none, a spawn pays one size check; with some, a call each
 * and, for those that want steps, one message per step.
 */
export class SpawnObservers {
  readonly #all = new Set<SpawnObserver>();
  #steps = 0;

  get active(): boolean {
    return this.#all.size > 0;
  }

  /** Some observer wants each step's usage. */
  get steps(): boolean {
    return this.#steps > 0;
  }

  /** Adds `observer`; the function returned removes it (a second call does nothing). */
  add(observer: SpawnObserver): () => void {
    if (this.#all.has(observer)) return () => {};
    this.#all.add(observer);
    if (observer.stepped) this.#steps++;
    return () => {
      if (!this.#all.delete(observer)) return;
      if (observer.stepped) this.#steps--;
    };
  }

  spawned(spawn: ObservedSpawn): void {
    for (const observer of this.#all) {
      try {
        observer.spawned(spawn);
      } catch (error) {
        observerFault(error);
      }
    }
  }

  stepped(agentId: string, usage: ProviderUsage): void {
    for (const observer of this.#all) {
      try {
        observer.stepped?.(agentId, usage);
      } catch (error) {
        observerFault(error);
      }
    }
  }
}

/**
 * An observer that throws is a view's fault, never the spawn's: the child it was told of runs
 * on, its caller gets its handle, and the fault is a process warning.
 */
function observerFault(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  process.emitWarning(`a spawn observer threw: ${redactSecrets(message)}`, 'CohortWarning');
}

/**
 * The event types a child's worker sends: the agent's own, widened by `step-end` when an
 * observer watches steps (its own listener is still filtered to what it asked for on main).
 */
export function stepEvents(
  agent: { onEvent?: unknown; eventTypes?: readonly AgentEvent['type'][] | undefined },
  watchSteps: boolean,
): AgentEvent['type'][] | undefined {
  const own = agent.eventTypes === undefined ? undefined : [...agent.eventTypes];
  if (!watchSteps) return own;
  if (agent.onEvent === undefined) return ['step-end'];
  if (own === undefined || own.includes('step-end')) return own;
  return [...own, 'step-end'];
}

/** The child's listener, with each `step-end` told to the observers too. */
export function withStepTap(
  onEvent: ((event: AgentEvent) => void) | undefined,
  observers: SpawnObservers,
): (event: AgentEvent) => void {
  return (event) => {
    if (event.type === 'step-end') observers.stepped(event.agentId, event.usage);
    onEvent?.(event);
  };
}
