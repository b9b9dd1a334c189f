import { appendFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { MessageParam } from './provider/types.js';
import { redactSecrets } from './redact.js';
import type { AgentResult } from './result.js';

/**
 * An agent's log folder (docs/LOGS.md): `meta.json`, `transcript.jsonl` appended as each step
 * commits, the reply spill (`reply.md` or `reply.json`) and `result.json`. Everything written is
 * redacted of secrets first. The folder name is the agent's id, never its title.
 *
 * Writes are synchronous on purpose: they are small, once per step, and run on a worker thread
 * (or for one root on main). A promise-based write costs an open, a write and a close, each a
 * round trip through libuv's thread pool; measured, that was a sixth of a worker's CPU per step.
 * Holding a descriptor open per agent instead would tie up one per live child (10,000+).
 */
export class AgentLog {
  readonly dir: string;
  #ready = false;

  constructor(dir: string) {
    this.dir = dir;
  }

  #ensure(): void {
    if (this.#ready) return;
    mkdirSync(this.dir, { recursive: true });
    this.#ready = true;
  }

  writeMeta(meta: Record<string, unknown>): void {
    this.#ensure();
    writeFileSync(
      path.join(this.dir, 'meta.json'),
      redactSecrets(`${JSON.stringify(meta, null, 2)}\n`),
    );
  }

  /** Appends whole messages, one JSON line each, in one write. */
  appendTranscript(messages: readonly MessageParam[]): void {
    if (messages.length === 0) return;
    this.#ensure();
    const lines = messages.map((message) => redactSecrets(JSON.stringify(message))).join('\n');
    appendFileSync(path.join(this.dir, 'transcript.jsonl'), `${lines}\n`);
  }

  /** The transcript as written so far, or undefined when there is none. */
  readTranscript(): string | undefined {
    try {
      return readFileSync(path.join(this.dir, 'transcript.jsonl'), 'utf8');
    } catch {
      return undefined;
    }
  }

  /** Replaces the transcript at once (temporary file + rename), for a resumed child. */
  rewriteTranscript(messages: readonly MessageParam[]): void {
    this.#ensure();
    const file = path.join(this.dir, 'transcript.jsonl');
    const lines = messages.map((message) => `${redactSecrets(JSON.stringify(message))}\n`).join('');
    writeFileSync(`${file}.tmp`, lines);
    renameSync(`${file}.tmp`, file);
  }

  /** Writes the full reply payload and returns its path. */
  spillReply(content: string, structured: boolean): string {
    this.#ensure();
    const file = path.join(this.dir, structured ? 'reply.json' : 'reply.md');
    writeFileSync(file, redactSecrets(content));
    return file;
  }

  writeResult(result: AgentResult): void {
    this.#ensure();
    writeFileSync(
      path.join(this.dir, 'result.json'),
      redactSecrets(`${JSON.stringify(result, null, 2)}\n`),
    );
  }
}
