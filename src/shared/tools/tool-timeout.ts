import { formatDuration } from '../duration.js';
import type { AnyTool, ToolContext } from './types.js';

/**
 * How long a tool call may run when neither its tool (`timeoutMs`) nor the engine
 * (`toolTimeoutMs`) says otherwise: ten minutes, far past any tool that is working and well
 * short of an agent that waits for ever on one that is not.
 */
export const DEFAULT_TOOL_TIMEOUT_MS = 600_000;

/**
 * The `timeoutMs` of a tool that is never timed: the spawn family (a sync `agent` call lasts as
 * long as its child, which has limits of its own) and a child's proxies of host tools (main times
 * the host tool itself, so its signal's reason says why).
 */
export const UNTIMED = Number.POSITIVE_INFINITY;

/** A tool call's time limit: its tool's own, else the agent's default, else ten minutes. */
export function toolLimitMs(tool: { timeoutMs?: number }, fallback: number | undefined): number {
  return tool.timeoutMs ?? fallback ?? DEFAULT_TOOL_TIMEOUT_MS;
}

/** What the model reads when a call ran past its limit: the tool and the limit, by name. */
export function toolTimeoutText(name: string, limitMs: number): string {
  return `\`${name}\` timed out after ${formatDuration(limitMs)} (its timeoutMs is ${limitMs}); it was stopped and gave no result`;
}

/**
 * The abort reason a timed-out call's `signal` carries: a `TimeoutError`, as
 * `AbortSignal.timeout` gives, whose message names the tool and the limit.
 */
function toolTimeoutReason(name: string, limitMs: number): DOMException {
  return new DOMException(
    `\`${name}\` timed out after ${formatDuration(limitMs)} (timeoutMs ${limitMs})`,
    'TimeoutError',
  );
}

/**
 * Thrown by a child's proxy of a host tool that main timed out: its message is the model's text
 * as it is (`toolTimeoutText`), not wrapped as a failure.
 */
export class ToolTimeoutError extends Error {
  override readonly name = 'ToolTimeoutError';
}

/** Something that stops a timed call before its limit: a signal, and the reason its call's signal then gets. */
export interface CallStop {
  signal: AbortSignal;
  /** Whether this abort stops the call (default: every abort does). */
  applies?: () => boolean;
  /** The reason the call's own signal aborts with. */
  reason: () => unknown;
  /** Only an abort during the call stops it; one before it began lets it run. */
  onlyLater?: boolean;
}

/** How a timed call ended: its tool's value or throw, its limit, or the stop at `stops[index]`. */
export type TimedEnd =
  | { kind: 'value'; value: unknown }
  | { kind: 'threw'; error: unknown }
  | { kind: 'timeout' }
  | { kind: 'stopped'; index: number };

/**
 * Runs one tool call with a signal of its own and resolves at the first of: its end, its time
 * limit (`limitMs`; `Infinity`: none), or one of `stops` aborting. In the last two the call's
 * signal aborts (a timeout with a `TimeoutError` naming the tool and the limit, a stop with its
 * reason) and the call is answered at once, not when the tool notices: a tool that ignores its
 * signal is left behind, and what it returns later is dropped. Worker tools (dispatch.ts) and
 * host tools on main (host-bridge.ts) both run through it.
 */
export function runTimed(
  tool: AnyTool,
  input: unknown,
  context: ToolContext,
  limitMs: number,
  stops: readonly CallStop[],
): Promise<TimedEnd> {
  const controller = new AbortController();
  return new Promise<TimedEnd>((resolve) => {
    let done = false;
    const listeners = stops.map((stop, index) => () => {
      if (stop.applies && !stop.applies()) return;
      end({ kind: 'stopped', index }, stop.reason());
    });
    const end = (outcome: TimedEnd, reason?: unknown): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stops.forEach((stop, index) => {
        stop.signal.removeEventListener('abort', listeners[index]!);
      });
      if (reason !== undefined) controller.abort(reason);
      resolve(outcome);
    };
    const timer = Number.isFinite(limitMs)
      ? setTimeout(() => end({ kind: 'timeout' }, toolTimeoutReason(tool.name, limitMs)), limitMs)
      : undefined;
    stops.forEach((stop, index) => {
      if (!stop.signal.aborted) {
        stop.signal.addEventListener('abort', listeners[index]!, { once: true });
      }
    });
    try {
      Promise.resolve(tool.run(input, { ...context, signal: controller.signal })).then(
        (value) => end({ kind: 'value', value }),
        (error: unknown) => end({ kind: 'threw', error }),
      );
    } catch (error) {
      end({ kind: 'threw', error });
    }
    // A stop that had happened before the call began ends it at once (after its `run` was called,
    // as before: a tool sees an aborted signal and may clean up).
    stops.forEach((stop, index) => {
      if (stop.signal.aborted && !stop.onlyLater) listeners[index]!();
    });
  });
}
