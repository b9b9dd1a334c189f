import type { AgentEvent } from '../shared/events.js';
import { cancelReasonOf } from '../shared/result.js';
import type { ChildHandle } from './runners/spawned-child.js';

/**
 * The abort signals spawns were given, each with one listener for all the children that share
 * it: a service passing one request's signal to a thousand children adds one listener, not a
 * thousand (Node warns past ten on one signal). A child leaves its signal's set when it settles;
 * the last one out removes the listener.
 */
export class SignalWatch {
  readonly #watched = new Map<AbortSignal, { children: Set<ChildHandle>; onAbort(): void }>();

  /** Cancels `child` when `signal` aborts (at once, when it has), with the signal's reason. */
  watch(signal: AbortSignal, child: ChildHandle): void {
    if (signal.aborted) {
      child.cancel(cancelReasonOf(signal));
      return;
    }
    let entry = this.#watched.get(signal);
    if (!entry) {
      const children = new Set<ChildHandle>();
      const onAbort = () => {
        this.#watched.delete(signal);
        const reason = cancelReasonOf(signal);
        for (const each of children) each.cancel(reason);
      };
      entry = { children, onAbort };
      this.#watched.set(signal, entry);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    const { children } = entry;
    children.add(child);
    void child.result.then(() => {
      children.delete(child);
      if (children.size > 0 || this.#watched.get(signal) !== entry) return;
      this.#watched.delete(signal);
      signal.removeEventListener('abort', entry.onAbort);
    });
  }

  /** How many signals have a listener: one per distinct signal with a live child. */
  get size(): number {
    return this.#watched.size;
  }
}

/**
 * `onEvent` limited to `types` (all, when unset): the worker filters the events it sends, and
 * this filters those main makes itself, so `eventTypes` holds for every type.
 */
export function eventFilter(
  onEvent: ((event: AgentEvent) => void) | undefined,
  types: readonly AgentEvent['type'][] | undefined,
): ((event: AgentEvent) => void) | undefined {
  if (!onEvent || !types) return onEvent;
  const wanted = new Set<string>(types);
  return (event) => {
    if (wanted.has(event.type)) onEvent(event);
  };
}
