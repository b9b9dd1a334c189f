import type { GovernorRequest } from '../protocol.js';
import type { Admission, AdmitRequest, Gate, SettleReport } from './types.js';

const ABORTED: Admission = { ok: false, reason: 'aborted' };

/**
 * A worker's end of the governor: the same `Gate` a provider on the main thread uses, carried
 * over the worker's uplink for one child. The permit it hands out is its own number for the
 * attempt; main maps it to the governor's. When it closes (the child ends), every waiting
 * admission resolves `aborted`: the child is being torn down, and nothing may wait forever.
 */
export class RemoteGate implements Gate {
  readonly patienceMs: number;
  readonly #post: (message: GovernorRequest) => void;
  readonly #waiting = new Map<number, (admission: Admission) => void>();
  #nextId = 1;
  #closed = false;

  constructor(post: (message: GovernorRequest) => void, patienceMs: number) {
    this.#post = post;
    this.patienceMs = patienceMs;
  }

  admit(request: AdmitRequest, signal: AbortSignal): Promise<Admission> {
    if (signal.aborted || this.#closed) return Promise.resolve(ABORTED);
    const id = this.#nextId++;
    return new Promise((resolve) => {
      const onAbort = () => {
        if (!this.#waiting.delete(id)) return;
        // Main takes it out of the queue, or gives back the permit if it was granted meanwhile.
        this.#post({ type: 'gov-withdraw', id });
        resolve(ABORTED);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.set(id, (admission) => {
        signal.removeEventListener('abort', onAbort);
        resolve(admission.ok ? { ok: true, permit: id } : admission);
      });
      this.#post({ type: 'gov-admit', id, request });
    });
  }

  opened(permit: number, headers: Record<string, string>): void {
    if (!this.#closed) this.#post({ type: 'gov-head', id: permit, headers });
  }

  settle(permit: number, report: SettleReport): void {
    if (!this.#closed) this.#post({ type: 'gov-settle', id: permit, report });
  }

  /** Main's answer for attempt `id`; one that was withdrawn meanwhile is dropped here. */
  receive(id: number, admission: Admission): void {
    const resolve = this.#waiting.get(id);
    if (!resolve) return;
    this.#waiting.delete(id);
    resolve(admission);
  }

  close(): void {
    this.#closed = true;
    const waiting = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const resolve of waiting) resolve(ABORTED);
  }
}
