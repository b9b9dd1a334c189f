import { appendFile, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { MessageParam } from './provider/types.js';
import { redactSecrets } from './redact.js';
import type { AgentResult } from './result.js';

/**
 * An agent's log folder (docs/LOGS.md): `meta.json`, `transcript.jsonl` appended as each step
 * commits, the reply spill (`reply.md` or `reply.json`) and `result.json`. Everything written is
 * redacted of secrets first. The folder name is the agent's id, never its title.
 */
export class AgentLog {
  readonly dir: string;
  #ready: Promise<void> | undefined;

  constructor(dir: string) {
    this.dir = dir;
  }

  #ensure(): Promise<void> {
    this.#ready ??= mkdir(this.dir, { recursive: true }).then(() => undefined);
    return this.#ready;
  }

  async writeMeta(meta: Record<string, unknown>): Promise<void> {
    await this.#ensure();
    await writeFile(
      path.join(this.dir, 'meta.json'),
      redactSecrets(`${JSON.stringify(meta, null, 2)}\n`),
    );
  }

  /** Appends whole messages, one JSON line each, in one write. */
  async appendTranscript(messages: readonly MessageParam[]): Promise<void> {
    if (messages.length === 0) return;
    await this.#ensure();
    const lines = messages.map((message) => redactSecrets(JSON.stringify(message))).join('\n');
    await appendFile(path.join(this.dir, 'transcript.jsonl'), `${lines}\n`);
  }

  /** The transcript as written so far, or undefined when there is none. */
  async readTranscript(): Promise<string | undefined> {
    try {
      return await readFile(path.join(this.dir, 'transcript.jsonl'), 'utf8');
    } catch {
      return undefined;
    }
  }

  /** Replaces the transcript at once (temporary file + rename), for a resumed child. */
  async rewriteTranscript(messages: readonly MessageParam[]): Promise<void> {
    await this.#ensure();
    const file = path.join(this.dir, 'transcript.jsonl');
    const lines = messages.map((message) => `${redactSecrets(JSON.stringify(message))}\n`).join('');
    await writeFile(`${file}.tmp`, lines);
    await rename(`${file}.tmp`, file);
  }

  /** Writes the full reply payload and returns its path. */
  async spillReply(content: string, structured: boolean): Promise<string> {
    await this.#ensure();
    const file = path.join(this.dir, structured ? 'reply.json' : 'reply.md');
    await writeFile(file, redactSecrets(content));
    return file;
  }

  async writeResult(result: AgentResult): Promise<void> {
    await this.#ensure();
    await writeFile(
      path.join(this.dir, 'result.json'),
      redactSecrets(`${JSON.stringify(result, null, 2)}\n`),
    );
  }
}
