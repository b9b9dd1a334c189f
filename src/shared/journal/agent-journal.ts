import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { MessageParam } from '../provider/types.js';
import { redactSecrets } from '../redact.js';
import type { AgentResult } from '../result.js';
import { REPLIES_FOLDER } from './format.js';
import { withoutLog } from './policy.js';
import { journalFor, type SegmentWriter } from './writer.js';

/** Reply folders this thread has made, per run. */
const madeReplyFolders = new Map<string, Promise<unknown>>();

/**
 * One agent's part of the run journal (docs/LOGS.md), on the segment of the thread it runs on:
 * its start, each committed step and its result. Nothing is written per agent but a reply longer
 * than the reply cap, which spills whole to `replies/<id>.md` (or `.json`) in the run folder.
 *
 * No method blocks on the disk. A step is committed once its record is written, not when `step`
 * returns (docs/RELIABILITY.md). `finish` is the one that waits: it resolves once the result's
 * record, and everything before it, is written.
 */
export class AgentJournal {
  /** The run folder. */
  readonly dir: string;
  readonly id: string;
  readonly inc: number;
  readonly #segment: SegmentWriter;
  #spill: Promise<boolean> | undefined;

  constructor(dir: string, id: string, inc: number) {
    this.dir = dir;
    this.id = id;
    this.inc = inc;
    this.#segment = journalFor(dir);
  }

  /** The segment file it writes to. */
  get file(): string {
    return this.#segment.file;
  }

  /**
   * Its run begins, from `messages` (the prompt, or the transcript it resumes from). A record is
   * serialised as it is appended: the caller may go on changing `messages`.
   */
  start(meta: Record<string, unknown>, messages: readonly MessageParam[]): void {
    this.#segment.append({
      k: 'start',
      a: this.id,
      inc: this.inc,
      at: Date.now(),
      meta,
      m: messages,
    });
  }

  /** A committed step's messages. */
  step(messages: readonly MessageParam[]): void {
    if (messages.length === 0) return;
    this.#segment.append({ k: 'step', a: this.id, inc: this.inc, m: messages });
  }

  /** Writes the full reply payload to its own file and returns its path; `finish` waits for it. */
  spillReply(content: string, structured: boolean): string {
    const folder = path.join(this.dir, REPLIES_FOLDER);
    const file = path.join(folder, `${this.id}.${structured ? 'json' : 'md'}`);
    let made = madeReplyFolders.get(folder);
    if (!made) {
      made = mkdir(folder, { recursive: true });
      madeReplyFolders.set(folder, made);
    }
    this.#spill = made
      .then(() => writeFile(file, redactSecrets(content)))
      .then(
        () => true,
        () => {
          // Made again by the next spill: the run folder may have been removed meanwhile.
          madeReplyFolders.delete(folder);
          return false;
        },
      );
    return file;
  }

  /**
   * Journals the settled agent's result and waits until it is written. Resolves with the result
   * as it may be delivered: without `replyFile` when that file could not be written, and without
   * `logDir` when its records go at close (`keep` false) or the journal could not be written.
   * Never rejects: a journal that cannot be written must not lose the result.
   */
  async finish(result: AgentResult, keep: boolean): Promise<AgentResult> {
    let final = result;
    if (this.#spill && !(await this.#spill) && final.replyFile !== undefined) {
      const { replyFile: _gone, ...rest } = final;
      final = rest;
    }
    this.#segment.append({ k: 'result', a: this.id, at: Date.now(), keep, r: final });
    await this.#segment.flushed();
    return keep && !this.#segment.failed ? final : withoutLog(final);
  }
}
