import type { ProviderConfig } from '../../shared/provider/config.js';
import { noUsage } from '../../shared/provider/types.js';
import type { ServedChild, Serving, Uplink } from '../runners/capabilities.js';
import type { BatchCollector } from './batch-collector.js';
import type { LaneTicket } from './lane-entry.js';

/** What a spawn in the batches lane attaches: the engine's collector and its provider. */
export interface LaneAttachment {
  collector: BatchCollector;
  provider: ProviderConfig;
  /** Its key given in code; unset, the environment's. Never journaled. */
  apiKey: string | undefined;
  /** Its spawn's `key`, which names its steps in batches across runs; else its id. */
  name: string;
  /**
   * The `auto` lane: its deadline (epoch ms). A step goes into a batch only while one fits
   * before it, and goes in real time otherwise. Unset: the batches lane.
   */
  deadline?: number;
}

/**
 * One child of the batches lane on main: a member of the lane from its spawn until it settles,
 * and the go-between of its steps (`lane-submit` in, `lane-answer` out) and the collector.
 */
export class LaneChild implements Serving<'lane-submit' | 'lane-withdraw'> {
  readonly #attached: LaneAttachment;
  readonly #child: ServedChild;
  readonly #leave: () => void;
  /** Each step waiting, by the worker's number for it. */
  readonly #waiting = new Map<number, LaneTicket>();
  /** Steps a lost run left waiting: the resumed run may take them over; settled, they go. */
  readonly #orphans: LaneTicket[] = [];
  /** Settled: a step its worker still sends (a message in flight) is answered, never collected. */
  #settled = false;

  constructor(attached: LaneAttachment, child: ServedChild) {
    this.#attached = attached;
    this.#child = child;
    this.#leave = attached.collector.join();
  }

  receive(message: Uplink<'lane-submit' | 'lane-withdraw'>): void {
    if (message.type === 'lane-withdraw') {
      this.#waiting.get(message.id)?.withdraw();
      this.#waiting.delete(message.id);
      return;
    }
    const { id } = message;
    if (this.#settled) {
      const error = { code: 'aborted' as const, message: 'aborted: the agent has settled' };
      this.#child.tell({
        type: 'lane-answer',
        id,
        result: { ok: false, error, calls: 0, usage: noUsage() },
      });
      return;
    }
    const ticket = this.#attached.collector.submit({
      agentId: this.#child.id,
      name: this.#attached.name,
      step: message.step,
      params: message.params,
      provider: this.#attached.provider,
      apiKey: this.#attached.apiKey,
      answer: (result) => {
        this.#waiting.delete(id);
        this.#child.tell({ type: 'lane-answer', id, result });
      },
      ...(this.#attached.deadline === undefined
        ? {}
        : {
            deadline: this.#attached.deadline,
            realtime: () => {
              this.#waiting.delete(id);
              this.#child.tell({ type: 'lane-realtime', id });
            },
          }),
    });
    this.#waiting.set(id, ticket);
  }

  /**
   * Its run is over (its worker was lost, or it ended): what it waited on is no one's now, but
   * stays out, so that a resumed run asking for the same step takes it over rather than paying
   * for it twice.
   */
  runEnds(): void {
    for (const ticket of this.#waiting.values()) {
      ticket.orphan();
      this.#orphans.push(ticket);
    }
    this.#waiting.clear();
  }

  settled(): void {
    if (this.#settled) return;
    this.#settled = true;
    for (const ticket of this.#waiting.values()) ticket.withdraw();
    this.#waiting.clear();
    for (const ticket of this.#orphans.splice(0)) ticket.withdraw();
    this.#leave();
  }
}
