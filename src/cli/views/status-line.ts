import type cliProgress from 'cli-progress';
import { stderr, stdout } from '../output.js';
import { stderrBar } from './terminal-bar.js';

/** At most this many redraws a second: a burst of events costs one redraw, not one per event. */
const REDRAWS_PER_SECOND = 8;
const REDRAW_MS = 1000 / REDRAWS_PER_SECOND;

/**
 * `text` cut to `columns` terminal columns, with `…` where it was cut: a status line must never
 * wrap, or its erase would leave the wrapped part behind. Counts code points, which is the width
 * of what a status line holds (its own words, digits and single-width marks).
 */
export function fitToWidth(text: string, columns: number): string {
  const chars = [...text];
  if (chars.length <= columns) return text;
  if (columns <= 0) return '';
  return `${chars.slice(0, columns - 1).join('')}…`;
}

/**
 * One line pinned at the bottom of stderr on a terminal, redrawn from `render` while the output
 * scrolls above it. Every write through `stdout()` or `stderr()` (the live view, notes, the
 * summary, an error) first erases the line; it is drawn again once the writes pause, at most
 * `REDRAWS_PER_SECOND` times a second, and only when its text changed. While the output stands
 * in the middle of a line (the root's text still streaming), it stays hidden: drawn there it
 * would split that line in two.
 *
 * The drawing is the batch bar's (`stderrBar`, cli-progress), which reads the terminal's width at
 * every redraw, so a resize is followed. `stop` erases it for good; the command calls it before
 * its summary and from its cleanups (a crash), and a forced exit writes its last lines through
 * `stderr()`, which erases it too.
 */
export class StatusLine {
  readonly #render: () => string;
  readonly #bar: cliProgress.SingleBar;
  /** Whether the line is on the screen. */
  #shown = false;
  #stopped = false;
  /** The text last drawn, which the bar draws again while it is being erased. */
  #drawn = '';
  #erasing = false;
  #redraw: NodeJS.Timeout | undefined;
  /** The terminal streams whose last write did not end its line. */
  readonly #midLine = new Set<string>();
  readonly #unobserve: (() => void)[] = [];

  /**
   * A status line when stderr is a terminal that takes escape codes, else undefined: a pipe, a
   * file or `TERM=dumb` get the output as it always was.
   */
  static onTerminal(render: () => string): StatusLine | undefined {
    if (!stderr().isTTY || process.env.TERM === 'dumb') return undefined;
    return new StatusLine(render);
  }

  private constructor(render: () => string) {
    this.#render = render;
    this.#bar = stderrBar({
      format: (_options, params) => this.#text(params.maxWidth),
      fps: REDRAWS_PER_SECOND,
      clearOnComplete: true,
    });
    // stdout steps aside only when it shares the terminal; piped, its writes never reach it.
    const streams = stdout().isTTY ? [stderr(), stdout()] : [stderr()];
    for (const stream of streams) {
      this.#unobserve.push(
        stream.observe({
          before: () => this.#erase(),
          after: (text) => this.#written(stream.name, text),
        }),
      );
    }
    stderr().onClosed(() => this.stop());
  }

  /** Draws the line now (then on every change). */
  start(): void {
    this.#draw();
  }

  /** Erases the line for good; safe to call more than once. */
  stop(): void {
    if (this.#stopped) return;
    this.#erase();
    this.#stopped = true;
    clearTimeout(this.#redraw);
    for (const unobserve of this.#unobserve.splice(0)) unobserve();
  }

  #text(maxWidth: number): string {
    // A bar being stopped draws once more: the same text again, so nothing is written.
    if (this.#erasing) return this.#drawn;
    // One column spare: a line that fills the last column wraps on some terminals.
    this.#drawn = fitToWidth(this.#render(), maxWidth - 1);
    return this.#drawn;
  }

  #draw(): void {
    if (this.#stopped || this.#shown || this.#midLine.size > 0 || stderr().closed) return;
    this.#shown = true;
    this.#bar.start(0, 0);
  }

  #erase(): void {
    if (!this.#shown) return;
    this.#shown = false;
    this.#erasing = true;
    try {
      // Clears the line and leaves the cursor at its start, where the next write goes.
      this.#bar.stop();
    } catch {
      // A terminal that hung up: there is nothing left to erase, and the write goes on.
    } finally {
      this.#erasing = false;
    }
  }

  #written(stream: string, text: string): void {
    if (text === '') return;
    if (text.endsWith('\n')) this.#midLine.delete(stream);
    else this.#midLine.add(stream);
    if (this.#stopped || this.#redraw !== undefined) return;
    this.#redraw = setTimeout(() => {
      this.#redraw = undefined;
      this.#draw();
    }, REDRAW_MS);
    // The run keeps the process alive, not its status line.
    this.#redraw.unref();
  }
}
