import cliProgress from 'cli-progress';
import { noteCursorHidden } from '../process.js';

/**
 * A cli-progress bar on stderr: the one way the CLI draws on a terminal (the batch bar, the run's
 * status line). It hides the cursor while it draws; the process shows it again on every way out
 * (`restoreTerminal`), a crash and a forced exit included.
 */
export function stderrBar(
  options: cliProgress.Options,
  preset?: cliProgress.Preset,
): cliProgress.SingleBar {
  noteCursorHidden();
  return new cliProgress.SingleBar(
    { hideCursor: true, stream: process.stderr, ...options },
    preset,
  );
}
