/**
 * A cancelled request's teardown, after its caller has been answered.
 *
 * Aborting an undici request destroys its socket, and undici then opens a fresh connection for
 * the aborted request before dropping it (an undici fault): about 0.2 ms of a thread's time
 * per request. When main cancels thousands of a thread's children at once, doing that inside the
 * abort made every result wait behind every teardown (docs/BENCHMARKS.md, "Spawn burst"). Here
 * the attempt is answered `aborted` at once and its controller is aborted a few turns later, in
 * slices, so the thread's results (and its other children) go first and every socket still
 * closes within a second or so.
 */

/** Requests torn down per turn of the event loop: about 25 ms of a thread's time. */
const SLICE = 128;

const queue: { controller: AbortController; reason: unknown }[] = [];
let next = 0;
let scheduled = false;

/** Aborts `controller` with `reason` soon, after what this turn settles has gone its way. */
export function abortSoon(controller: AbortController, reason: unknown): void {
  queue.push({ controller, reason });
  if (!scheduled) {
    scheduled = true;
    setImmediate(drain);
  }
}

function drain(): void {
  const end = Math.min(queue.length, next + SLICE);
  stackless(() => {
    for (; next < end; next++) {
      const { controller, reason } = queue[next]!;
      controller.abort(reason);
    }
  });
  if (next < queue.length) {
    setImmediate(drain);
    return;
  }
  queue.length = 0;
  next = 0;
  scheduled = false;
}

/**
 * Runs `make` with no stack traces captured: for errors that only say "aborted" and are read by
 * no one (undici's own, one per torn-down socket, whose stack Node's stream destroy formats).
 */
export function stackless<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
