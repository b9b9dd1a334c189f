/**
 * The CLI's two output streams, made safe for misuse:
 *
 * - A closed pipe (`cohort run --json | head -1`) ends output quietly: the first EPIPE marks the
 *   stream closed and later writes are dropped, instead of an unhandled 'error' event and a stack
 *   trace. What the command does about it is its own choice (`onClosed`): `batch` keeps going and
 *   writes its results file; `run` and `agent` stop, since nobody reads them any more.
 * - Text that came from outside (model text, titles, file names, bad task lines) is shown with
 *   its terminal control characters neutralised, so it cannot move the cursor, retitle the window
 *   or hide what follows.
 */

type StreamName = 'stdout' | 'stderr';

/**
 * Something drawn on the terminal below the output, such as a status line: it steps aside for
 * every write (`before`) and learns what was written (`after`), so the output scrolls above it.
 */
export interface WriteObserver {
  before(): void;
  after(text: string): void;
}

class GuardedStream {
  readonly name: StreamName;
  #closed = false;
  #listeners: (() => void)[] = [];
  #observer: WriteObserver | undefined;

  constructor(name: StreamName) {
    this.name = name;
    const stream = process[name];
    // EPIPE (the reader left), EIO (the terminal hung up), EBADF or a destroyed stream: every
    // error of an output stream means the same here, that nobody can read what we write. It is
    // never a reason to crash a run whose results go to files.
    stream.on('error', () => this.#close());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Whether this stream is a terminal (escape sequences such as a progress bar are welcome). */
  get isTTY(): boolean {
    return process[this.name].isTTY === true;
  }

  write(text: string): void {
    if (this.#closed) return;
    const observer = this.#observer;
    observer?.before();
    try {
      process[this.name].write(text);
    } catch {
      // A synchronous write to a pipe whose reader left throws EPIPE on some paths.
      this.#close();
    }
    observer?.after(text);
  }

  /** Sets the one observer of this stream's writes; returns a function that removes it. */
  observe(observer: WriteObserver): () => void {
    this.#observer = observer;
    return () => {
      if (this.#observer === observer) this.#observer = undefined;
    };
  }

  /** Calls `listener` once when the stream closes (at once, if it already has). */
  onClosed(listener: () => void): void {
    if (this.#closed) listener();
    else this.#listeners.push(listener);
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const listener of this.#listeners.splice(0)) listener();
  }
}

let streams: { out: GuardedStream; err: GuardedStream } | undefined;

function guarded(): { out: GuardedStream; err: GuardedStream } {
  streams ??= { out: new GuardedStream('stdout'), err: new GuardedStream('stderr') };
  return streams;
}

/** Guards both streams at once, before anything (a library, a progress bar) writes to them. */
export function guardOutput(): void {
  guarded();
}

/** Standard output: results and JSON. */
export function stdout(): GuardedStream {
  return guarded().out;
}

/** Standard error: progress, notices and errors. */
export function stderr(): GuardedStream {
  return guarded().err;
}

/** Writes one line to stderr. */
export function note(line: string): void {
  stderr().write(`${line}\n`);
}

export type { GuardedStream };

/** The C0 controls but tab and newline, DEL and the C1 range: what a terminal acts on. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

function hexEscape(char: string): string {
  return `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`;
}

/**
 * Neutralises terminal control characters in text that came from outside: ESC, the other C0
 * controls but tab and newline, DEL and the C1 range become visible `\xNN` escapes. A carriage
 * return is escaped too: it would let a line overwrite what came before it.
 */
export function safeText(text: string): string {
  // A Windows line end is a line end, not a stray carriage return.
  return text.replace(/\r\n/g, '\n').replace(CONTROL, hexEscape);
}

/** `safeText` for one-line labels (titles, paths): newlines and tabs are escaped as well. */
export function safeLabel(text: string): string {
  return safeText(text).replace(/\n/g, '\\n').replace(/\t/g, '\\t');
}

/**
 * Quotes a word for a POSIX shell when it needs it, so a printed command (the resume hint) can be
 * pasted back as it is.
 */
export function shellQuote(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  if (word.search(CONTROL) !== -1) {
    // ANSI-C quoting: the control characters print as escapes and still paste back as they were.
    return `$'${word.replace(/[\\']/g, (char) => `\\${char}`).replace(CONTROL, hexEscape)}'`;
  }
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
