/**
 * The scripted model's server capacity (`maxStreams`): overload that depends on load. A request
 * that arrives while the server is already answering its most responses is refused at once
 * with `529 overloaded_error`, as the real API refuses when it is overloaded.
 */
import type { ServerResponse } from 'node:http';
import type { Refusal } from './requests.js';

export class StreamCapacity {
  readonly #limit: number;
  /** Responses decided and not yet closed, ended or cut. */
  #answering = 0;

  /** `limit` is at least 1; the server makes no StreamCapacity for 0 (no limit). */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** The 529 for a request that arrives while the server is full, else undefined. */
  refusal(): Refusal | undefined {
    if (this.#answering < this.#limit) return undefined;
    return {
      status: 529,
      type: 'overloaded_error',
      message: `Overloaded (maxStreams: already answering ${this.#limit} responses)`,
    };
  }

  /** Counts `response` as being answered until it closes, whether it ended or was cut. */
  hold(response: ServerResponse): void {
    this.#answering++;
    response.once('close', () => {
      this.#answering--;
    });
  }
}
