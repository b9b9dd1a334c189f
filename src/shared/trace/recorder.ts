import type { TraceAttributes, TraceOp, TraceSink, TraceSpanId, TraceSpanKind } from './types.js';

/**
 * The trace sink of an agent in a worker: it makes no span, it records each operation as data
 * (`TraceOp`) and hands it to `post`, which sends it to main to be replayed into the user's
 * tracer (`OtelSpans.apply`). It imports nothing from OpenTelemetry, so a worker never loads it.
 *
 * Each op carries the time it happened here, so a span's start and end are the worker's, however
 * late the uplink delivers them. Spans are numbered 1, 2, … per recorder: a resumed agent gets a
 * fresh recorder, and main forgets the dead worker's numbers (`OtelSpans.abandon`).
 */
export class TraceRecorder implements TraceSink {
  readonly #post: (op: TraceOp) => void;
  #next: TraceSpanId = 1;

  constructor(post: (op: TraceOp) => void) {
    this.#post = post;
  }

  open(
    name: string,
    kind: TraceSpanKind,
    attributes: TraceAttributes,
    parent?: TraceSpanId,
  ): TraceSpanId {
    const id = this.#next++;
    // A copy: the uplink may hold the op until the end of this event-loop turn, and the caller
    // is free to reuse its object meanwhile.
    const op: TraceOp = { op: 'open', id, name, kind, attributes: { ...attributes }, time: now() };
    if (parent !== undefined) op.parent = parent;
    this.#post(op);
    return id;
  }

  close(id: TraceSpanId, attributes?: TraceAttributes, error?: string): void {
    const op: TraceOp = { op: 'close', id, time: now() };
    if (attributes !== undefined) op.attributes = { ...attributes };
    if (error !== undefined) op.error = error;
    this.#post(op);
  }
}

/** Epoch time in ms with sub-ms precision; `Date.now()` alone would round spans to whole ms. */
function now(): number {
  return performance.timeOrigin + performance.now();
}
