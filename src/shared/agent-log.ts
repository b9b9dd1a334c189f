import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { expected } from './errors.js';
import type { MessageParam } from './provider/types.js';
import { redactSecrets } from './redact.js';
import type { AgentOutcome, AgentResult } from './result.js';

/**
 * Which agents' folders outlive their run: `all` (the default), `failed` (only agents whose
 * outcome is `failed`), or `none`. Every agent writes its folder while it runs either way: a
 * child resumed after a worker crash reads its transcript back from it.
 */
export type LogPolicy = 'all' | 'failed' | 'none';

export const LOG_POLICIES: readonly LogPolicy[] = ['all', 'failed', 'none'];

/** Checks an optional log policy; `name` is how the caller knows the option (`logs`, `--logs`). */
export function checkLogPolicy(name: string, value: unknown): LogPolicy | undefined {
  if (value === undefined) return undefined;
  if (!LOG_POLICIES.includes(value as LogPolicy)) {
    throw expected(name, `one of ${LOG_POLICIES.join(', ')}`, value);
  }
  return value as LogPolicy;
}

/** Whether an agent that ended with `outcome` keeps its folder under `policy`. */
export function keepsLog(policy: LogPolicy | undefined, outcome: AgentOutcome): boolean {
  if (policy === 'none') return false;
  if (policy === 'failed') return outcome === 'failed';
  return true;
}

/** A result whose folder is gone: no `logDir`, and no `replyFile`, which lived in it. */
export function withoutLog(result: AgentResult): AgentResult {
  const { logDir: _logDir, replyFile: _replyFile, ...rest } = result;
  return rest;
}

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

  /**
   * Ends the log of a settled agent: writes `result.json` when the folder is kept, else removes
   * the folder. Never throws: a log that cannot be written or removed must not lose the result.
   * Returns whether the folder exists afterwards, so the result names it only when it does.
   */
  finish(result: AgentResult, keep: boolean): boolean {
    try {
      if (keep) this.writeResult(result);
      else rmSync(this.dir, { recursive: true, force: true });
    } catch {
      // Reported through the return value: the folder is there or it is not.
    }
    return existsSync(this.dir);
  }

  writeResult(result: AgentResult): void {
    this.#ensure();
    writeFileSync(
      path.join(this.dir, 'result.json'),
      redactSecrets(`${JSON.stringify(result, null, 2)}\n`),
    );
  }
}
