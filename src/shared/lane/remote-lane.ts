import type { LaneRequest } from '../protocol.js';
import type { Provider } from '../provider/provider.js';
import {
  type CompleteOptions,
  type ModelClient,
  noUsage,
  type ProviderRequest,
  type ProviderResult,
} from '../provider/types.js';

/**
 * A worker's end of the batches lane, for one child: its model calls go over the worker's uplink
 * to main's batch collector, which answers each with its batch's result. The request's body is
 * built here by the child's `Provider` (breakpoints and all), so a step reads the same in either
 * lane. When it closes (the child ends), every waiting call resolves `aborted`. In the `auto`
 * lane, main may send a waiting call back (`realtime`): it then goes to the provider itself.
 */
export class RemoteLane implements ModelClient {
  readonly #provider: Provider;
  readonly #post: (message: LaneRequest) => void;
  readonly #waiting = new Map<number, (result: ProviderResult) => void>();
  /** The `auto` lane: how each waiting call goes in real time, if main sends it back. */
  readonly #inRealtime = new Map<number, () => void>();
  #nextId = 1;
  #closed = false;

  constructor(provider: Provider, post: (message: LaneRequest) => void) {
    this.#provider = provider;
    this.#post = post;
  }

  /** Main sent call `id` back (`auto` lane, its deadline nears): it goes in real time. */
  realtime(id: number): void {
    const go = this.#inRealtime.get(id);
    this.#inRealtime.delete(id);
    go?.();
  }

  complete(request: ProviderRequest, options: CompleteOptions): Promise<ProviderResult> {
    const { signal } = options;
    if (signal.aborted || this.#closed) return Promise.resolve(aborted(signal));
    const id = this.#nextId++;
    const params = this.#provider.batchParams(request);
    return new Promise((resolve) => {
      const onAbort = () => {
        if (!this.#waiting.delete(id)) return;
        // Main drops it from the batch to come; one in flight is answered to no one.
        this.#post({ type: 'lane-withdraw', id });
        resolve(aborted(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.set(id, (result) => {
        signal.removeEventListener('abort', onAbort);
        this.#inRealtime.delete(id);
        resolve(result);
      });
      this.#inRealtime.set(id, () => {
        if (!this.#waiting.delete(id)) return;
        signal.removeEventListener('abort', onAbort);
        // The provider's own request, governed and streamed as in the realtime lane.
        void this.#provider.complete(request, options).then(resolve);
      });
      this.#post({ type: 'lane-submit', id, step: options.step ?? 0, params });
    });
  }

  /** Main's answer for call `id`; one that was withdrawn meanwhile is dropped here. */
  receive(id: number, result: ProviderResult): void {
    const resolve = this.#waiting.get(id);
    if (!resolve) return;
    this.#waiting.delete(id);
    this.#inRealtime.delete(id);
    resolve(result);
  }

  close(): void {
    this.#closed = true;
    this.#inRealtime.clear();
    const waiting = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const resolve of waiting)
      resolve({ ok: false, error: ABORTED, calls: 0, usage: noUsage() });
  }
}

const ABORTED = { code: 'aborted', message: 'aborted' } as const;

function aborted(signal: AbortSignal): ProviderResult {
  const reason = signal.reason;
  const text = typeof reason === 'string' ? reason : reason instanceof Error ? reason.message : '';
  return {
    ok: false,
    error: { code: 'aborted', message: text ? `aborted: ${text}` : 'aborted' },
    calls: 0,
    usage: noUsage(),
  };
}
