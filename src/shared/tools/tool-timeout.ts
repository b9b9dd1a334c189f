import { formatDuration } from '../duration.js';

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
export function toolTimeoutReason(name: string, limitMs: number): DOMException {
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
