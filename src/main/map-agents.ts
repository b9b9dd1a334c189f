import type { AgentResult } from '../shared/result.js';
import type { AgentOptions, Engine } from './engine.js';
import { checkInteger } from './options.js';

export interface MapOptions {
  /** Children in flight at once (default 50). */
  concurrency?: number;
  /** Stops admitting, cancels the running children (reason `user`); their results still come. */
  signal?: AbortSignal;
}

/**
 * Runs many children with a concurrency bound and yields each AgentResult as it settles.
 * Yields exactly one result per spec that was admitted; when the signal aborts, specs not yet
 * admitted are not run and not yielded.
 */
export async function* mapAgents<Spec extends AgentOptions>(
  engine: Engine,
  specs: Iterable<Spec> | AsyncIterable<Spec>,
  options: MapOptions = {},
): AsyncGenerator<{ spec: Spec; result: AgentResult }> {
  const concurrency = checkInteger('concurrency', options.concurrency, 1) ?? 50;
  const signal = options.signal;
  const running = new Map<string, Promise<{ key: string; spec: Spec; result: AgentResult }>>();
  const handles = new Map<string, { cancel(reason: 'user'): boolean }>();
  const onAbort = () => {
    for (const handle of handles.values()) handle.cancel('user');
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  const iterator = (
    Symbol.asyncIterator in specs
      ? (specs as AsyncIterable<Spec>)[Symbol.asyncIterator]()
      : (specs as Iterable<Spec>)[Symbol.iterator]()
  ) as AsyncIterator<Spec> | Iterator<Spec>;
  let exhausted = false;
  try {
    for (;;) {
      while (!exhausted && running.size < concurrency && !signal?.aborted) {
        const next = await iterator.next();
        if (next.done) {
          exhausted = true;
          break;
        }
        const spec = next.value;
        const handle = engine.spawn(spec);
        handles.set(handle.id, handle);
        running.set(
          handle.id,
          handle.result.then((result) => ({ key: handle.id, spec, result })),
        );
      }
      if (running.size === 0) return;
      const settled = await Promise.race(running.values());
      running.delete(settled.key);
      handles.delete(settled.key);
      yield { spec: settled.spec, result: settled.result };
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // A consumer that stops early must not leave children running unseen.
    for (const handle of handles.values()) handle.cancel('user');
  }
}
