import type { ChildSpec } from '../../../shared/child-spec.js';
import type { AgentResult, CancelReason } from '../../../shared/result.js';

export type ChildStatus = 'queued' | 'running' | 'settled';

/** A spawned child as main sees it. */
export interface ChildHandle {
  readonly id: string;
  readonly title: string;
  readonly status: ChildStatus;
  /** When it was spawned (performance.now()). */
  readonly spawnedAt: number;
  /** Settles exactly once, never rejects. */
  readonly result: Promise<AgentResult>;
  /** Cancels it; false when it had settled already. */
  cancel(reason?: CancelReason): boolean;
}

/** The pool's own handle: `settle` is the one place a child's result is delivered. */
export class PoolHandle implements ChildHandle {
  readonly id: string;
  readonly title: string;
  readonly spawnedAt = performance.now();
  readonly result: Promise<AgentResult>;
  status: ChildStatus = 'queued';
  #resolve!: (result: AgentResult) => void;
  readonly #cancel: (reason: CancelReason) => boolean;

  constructor(spec: ChildSpec, cancel: (reason: CancelReason) => boolean) {
    this.id = spec.id;
    this.title = spec.title;
    this.#cancel = cancel;
    this.result = new Promise((resolve) => {
      this.#resolve = resolve;
    });
  }

  cancel(reason: CancelReason = 'user'): boolean {
    return this.#cancel(reason);
  }

  /** The one place a child's result is delivered; a second call is ignored. */
  settle(result: AgentResult): boolean {
    if (this.status === 'settled') return false;
    this.status = 'settled';
    this.#resolve(result);
    return true;
  }
}
