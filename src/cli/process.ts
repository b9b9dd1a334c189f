import { note, stderr } from './output.js';

/**
 * The CLI process's life: what must be closed before it exits, and what a signal does.
 *
 * Every command registers what it started (the built-in model, the engine) with `onCleanup`; the
 * top level runs those on every path, error or not, so a failure after the model started can
 * never leave a process that prints its error and then hangs.
 *
 * Signals: SIGINT, SIGTERM and SIGHUP go to the running command's handler, which decides whether
 * it can stop gracefully (cancel, write the cancelled results, print the summary) or whether it
 * is time to force. A command with no handler, or one that asks for it, is forced: what has
 * settled is printed by its `onForce`, the terminal is restored and the process exits with the
 * first signal's code (130, 143 or 129).
 */

export type StopSignal = 'SIGINT' | 'SIGTERM' | 'SIGHUP';

const SIGNAL_CODES: Record<StopSignal, number> = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };

/** The conventional exit code of a process stopped by `signal` (128 + its number). */
export function signalExitCode(signal: StopSignal): number {
  return SIGNAL_CODES[signal];
}

type Cleanup = () => unknown;

const cleanups: Cleanup[] = [];

/** Registers something to close before the process exits; run once, newest first. */
export function onCleanup(cleanup: Cleanup): void {
  cleanups.push(cleanup);
}

/** Runs every registered cleanup, newest first; one that throws does not stop the others. */
export async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    const cleanup = cleanups.pop()!;
    try {
      await cleanup();
    } catch (error) {
      note(`cohort: while closing: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

export interface InterruptHandler {
  /**
   * A signal arrived; `count` counts every signal so far, of any kind. Return `force` to stop
   * at once (after `onForce`), or `handled` when the command is stopping on its own.
   */
  onSignal(signal: StopSignal, count: number): 'handled' | 'force';
  /** Just before a forced exit: print what has settled. Must be synchronous. */
  onForce?(): void;
}

let handler: InterruptHandler | undefined;
let firstSignal: StopSignal | undefined;
let count = 0;
let cursorHidden = false;

/** Sets the running command's interrupt handler; returns a function that removes it. */
export function handleInterrupts(next: InterruptHandler): () => void {
  handler = next;
  return () => {
    if (handler === next) handler = undefined;
  };
}

/** The first stop signal received, if any. */
export function stopSignal(): StopSignal | undefined {
  return firstSignal;
}

/** A progress bar hid the cursor: show it again on every way out. */
export function noteCursorHidden(): void {
  cursorHidden = true;
}

/** Shows the cursor again if we hid it. Safe to call more than once. */
export function restoreTerminal(): void {
  if (!cursorHidden) return;
  cursorHidden = false;
  // Show the cursor, and turn line wrapping back on (the progress bar turns it off).
  stderr().write('\u001b[?25h\u001b[?7h');
}

/** Installs the signal listeners once, for the life of the process. */
export function installSignalHandlers(): void {
  for (const signal of Object.keys(SIGNAL_CODES) as StopSignal[]) {
    process.on(signal, () => receive(signal));
  }
  process.on('exit', restoreTerminal);
}

function receive(signal: StopSignal): void {
  count++;
  firstSignal ??= signal;
  const decision = handler ? handler.onSignal(signal, count) : 'force';
  if (decision === 'handled') return;
  try {
    handler?.onForce?.();
  } finally {
    restoreTerminal();
    note(
      count > 1
        ? `cohort: a second signal (${signal}): stopped at once`
        : `cohort: stopped by ${signal}`,
    );
    process.exit(signalExitCode(firstSignal));
  }
}
