import type { Governor } from '../../../shared/governor/governor.js';
import type { GovernorRequest, MainMessage } from '../../../shared/protocol.js';
import type { ServedChild, Serving } from '../capabilities.js';

/**
 * A governed child (the `governor` capability): each run of it has its own `GovernorLink`,
 * closed when the run ends, so a lost worker's permits and queued admissions come back and an
 * answer meant for that run never reaches the next.
 */
export class GovernedChild implements Serving<GovernorRequest['type']> {
  readonly #governor: Governor;
  readonly #child: ServedChild;
  #run: GovernorLink | undefined;

  constructor(governor: Governor, child: ServedChild) {
    this.#governor = governor;
    this.#child = child;
  }

  runStarts(): void {
    const child = this.#child;
    this.#run = new GovernorLink(this.#governor, (message) => child.tell(message));
  }

  receive(message: GovernorRequest): void {
    this.#run?.handle(message);
  }

  runEnds(): void {
    this.#run?.close();
  }
}

/**
 * Main's end of one child's governor traffic. It remembers what the child's attempts hold, so
 * that when the child settles or its worker dies (`close`), every permit goes back and every
 * queued admission leaves the queue: a crashed worker cannot leak what its requests held.
 */
export class GovernorLink {
  readonly #governor: Governor;
  readonly #post: (message: MainMessage) => void;
  /** Attempts queued in the governor, by the worker's id. */
  readonly #waiting = new Map<number, AbortController>();
  /** Attempts admitted and not settled: the worker's id → the governor's permit. */
  readonly #permits = new Map<number, number>();
  /**
   * Withdrawn while their admission was being granted: `readPending()` handles messages with no
   * microtask between them, so a withdrawal can land before the grant is recorded.
   */
  readonly #withdrawn = new Set<number>();
  #closed = false;

  constructor(governor: Governor, post: (message: MainMessage) => void) {
    this.#governor = governor;
    this.#post = post;
  }

  handle(message: GovernorRequest): void {
    if (this.#closed) return;
    switch (message.type) {
      case 'gov-admit':
        this.#admit(message.id, message);
        return;
      case 'gov-withdraw': {
        if (this.#waiting.has(message.id)) this.#withdrawn.add(message.id);
        this.#waiting.get(message.id)?.abort();
        const permit = this.#permits.get(message.id);
        if (permit !== undefined) {
          // Granted while the withdrawal was on its way: it never went out.
          this.#permits.delete(message.id);
          this.#governor.settle(permit, { outcome: 'aborted', usage: NO_USAGE });
        }
        return;
      }
      case 'gov-head': {
        const permit = this.#permits.get(message.id);
        if (permit !== undefined) this.#governor.opened(permit, message.headers);
        return;
      }
      case 'gov-settle': {
        const permit = this.#permits.get(message.id);
        if (permit === undefined) return;
        this.#permits.delete(message.id);
        this.#governor.settle(permit, message.report);
        return;
      }
    }
  }

  #admit(id: number, message: Extract<GovernorRequest, { type: 'gov-admit' }>): void {
    const controller = new AbortController();
    this.#waiting.set(id, controller);
    void this.#governor.admit(message.request, controller.signal).then((admission) => {
      this.#waiting.delete(id);
      const withdrawn = this.#withdrawn.delete(id);
      if (admission.ok) {
        if (this.#closed || withdrawn) {
          this.#governor.settle(admission.permit, { outcome: 'aborted', usage: NO_USAGE });
          return;
        }
        this.#permits.set(id, admission.permit);
      }
      if (!this.#closed) this.#post({ type: 'gov-admission', id, admission });
    });
  }

  /** The child is done or its worker is gone: give back all it held. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const controller of this.#waiting.values()) controller.abort();
    this.#waiting.clear();
    for (const permit of this.#permits.values()) {
      // Its cost is unknown: the estimate stays charged, the slot and the reservation come back.
      this.#governor.settle(permit, { outcome: 'failed', usage: NO_USAGE });
    }
    this.#permits.clear();
  }

  /** Permits and queued admissions still held: zero after `close`. */
  get holding(): number {
    return this.#waiting.size + this.#permits.size;
  }
}

const NO_USAGE = { inputTokens: 0, outputTokens: 0 };
