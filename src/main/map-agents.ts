import { checkOption, wholeNumber } from '../shared/option-schema.js';
import { type AgentResult, type CancelReason, cancelReasonOf } from '../shared/result.js';
import type { StandardOutput, StandardSchema } from '../shared/standard-schema.js';
import type { AgentOptions, SpawnContext } from './engine.js';
import type { ChildHandle } from './runners/spawned-child.js';

export interface MapOptions {
  /** Children in flight at once (default 50). */
  concurrency?: number;
  /** Stops admitting, cancels the running children (with the signal's reason when it is a cancel reason such as `shutdown`, else `user`); their results still come. */
  signal?: AbortSignal;
}

/** What `mapAgents` may pass with each spec (a batch gives each task its queue job id). */
export interface MapContext<Spec> {
  contextOf?: (spec: Spec) => SpawnContext;
}

/** What `mapAgents` spawns with: an engine, or anything with its `spawn`. */
export interface Spawner {
  spawn(options: AgentOptions, context?: SpawnContext): ChildHandle;
}

/**
 * The type of a spec's result `value`: its Standard Schema's output type, else `unknown`.
 */
export type SpecValue<Spec> = Spec extends { outputSchema?: infer Schema }
  ? Schema extends StandardSchema
    ? StandardOutput<Schema>
    : unknown
  : unknown;

/** A child that settled and has not been yielded yet. */
type Settled<Spec> =
  | { ok: true; spec: Spec; result: AgentResult<SpecValue<Spec>> }
  | { ok: false; error: unknown };

/**
 * Runs many children with a concurrency bound and yields each AgentResult as it settles.
 * Yields exactly one result per spec that was admitted, in the order they settled; when the
 * signal aborts, specs not yet admitted are not run and not yielded. A child counts against
 * `concurrency` until its result has been yielded.
 */
export async function* mapAgents<Spec extends AgentOptions>(
  engine: Spawner,
  specs: Iterable<Spec> | AsyncIterable<Spec>,
  options: MapOptions & MapContext<Spec> = {},
): AsyncGenerator<{ spec: Spec; result: AgentResult<SpecValue<Spec>> }> {
  const concurrency = checkOption('concurrency', wholeNumber(1), options.concurrency) ?? 50;
  const signal = options.signal;
  // Each child's result is watched once, when it is admitted, and lands here as it settles.
  // Racing every running result again after each settle would cost O(concurrency) promise
  // reactions per result: O(n²) in all, which at a concurrency of 2,000 held ~1 GB of heap.
  const settled: Settled<Spec>[] = [];
  let wake: (() => void) | undefined;
  /** Admitted and not yet yielded. */
  let inFlight = 0;
  /** Admitted and not yet settled: the ones a cancel can still reach. */
  const running = new Map<string, { cancel(reason: CancelReason): boolean }>();
  const onAbort = () => {
    const reason = cancelReasonOf(signal!);
    for (const handle of running.values()) handle.cancel(reason);
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
      while (!exhausted && inFlight < concurrency && !signal?.aborted) {
        const next = await iterator.next();
        if (next.done) {
          exhausted = true;
          break;
        }
        // The source may have taken a while: a signal that aborted meanwhile admits nothing more.
        if (signal?.aborted) break;
        const spec = next.value;
        const handle = engine.spawn(spec, options.contextOf?.(spec));
        running.set(handle.id, handle);
        inFlight++;
        const land = (item: Settled<Spec>) => {
          running.delete(handle.id);
          settled.push(item);
          const resume = wake;
          wake = undefined;
          resume?.();
        };
        // A result never rejects by contract; if one did, the consumer hears of it in turn.
        // The engine parsed a Standard Schema's value into its output type (`Engine.spawn`).
        (handle.result as Promise<AgentResult<SpecValue<Spec>>>).then(
          (result) => land({ ok: true, spec, result }),
          (error: unknown) => land({ ok: false, error }),
        );
      }
      if (inFlight === 0) return;
      if (settled.length === 0) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
      // At most `concurrency` items wait here, so shifting the array stays cheap.
      const item = settled.shift()!;
      inFlight--;
      if (!item.ok) throw item.error;
      yield { spec: item.spec, result: item.result };
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // A consumer that stops early must not leave children running unseen.
    for (const handle of running.values()) handle.cancel('user');
    // A source not read to its end is told so (an async generator runs its own `finally`).
    if (!exhausted) await iterator.return?.();
  }
}
