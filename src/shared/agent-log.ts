import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { LogLane, type LogWriter, threadLogWriter } from './log-writer.js';
import { checkOption, oneOf } from './option-schema.js';
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

/** The `logs` option: which agents' log folders outlive them (default `all`). */
export const LOG_POLICY = oneOf(LOG_POLICIES, `one of ${LOG_POLICIES.join(', ')}`, {
  default: 'all',
  flag: '--logs',
  arg: LOG_POLICIES.join('|'),
});

/** Checks an optional log policy; `name` is how the caller knows the option (`logs`, `--logs`). */
export function checkLogPolicy(name: string, value: unknown): LogPolicy | undefined {
  return checkOption(name, LOG_POLICY, value);
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

/** A result whose reply file was not written: the text stays, the path goes. */
function withoutReplyFile(result: AgentResult): AgentResult {
  const { replyFile: _replyFile, ...rest } = result;
  return rest;
}

/**
 * An agent's log folder (docs/LOGS.md): `meta.json`, `transcript.jsonl` appended as each step
 * commits, the reply spill (`reply.md` or `reply.json`) and `result.json`. Everything written is
 * redacted of secrets first. The folder name is the agent's id, never its title.
 *
 * No method blocks on the disk: each queues its write on the folder's lane (log-writer.ts), which
 * runs them in order off the event loop, and returns. A step's transcript lines are committed
 * when their write has completed, not when `appendTranscript` returns (docs/RELIABILITY.md).
 * `finish` is the one that waits: it resolves once every write of the folder is done.
 */
export class AgentLog {
  readonly dir: string;
  readonly #lane: LogLane;
  #replyFailed = false;

  /** `writer` is this thread's unless given (a test gives its own). */
  constructor(dir: string, writer: LogWriter = threadLogWriter()) {
    this.dir = dir;
    this.#lane = new LogLane(dir, writer);
  }

  writeMeta(meta: Record<string, unknown>): void {
    this.#lane.push({
      kind: 'write',
      file: 'meta.json',
      data: redactSecrets(`${JSON.stringify(meta, null, 2)}\n`),
    });
  }

  /** Queues whole messages, one JSON line each, to be appended in one write; returns the lines. */
  appendTranscript(messages: readonly MessageParam[]): string {
    if (messages.length === 0) return '';
    const lines = transcriptLines(messages);
    this.#lane.push({ kind: 'append', file: 'transcript.jsonl', data: lines });
    return lines;
  }

  /** The transcript as written so far, or undefined when there is none. */
  async readTranscript(): Promise<string | undefined> {
    try {
      return await readFile(path.join(this.dir, 'transcript.jsonl'), 'utf8');
    } catch {
      return undefined;
    }
  }

  /**
   * Queues the transcript's replacement at once (temporary file + rename), for a resumed child.
   * The rename also fences off its dead worker: a write of that worker still in flight went
   * through a descriptor opened before the worker died, so it lands in the old file, never in
   * the new one (the worker's next step, an open, cannot start once it is dead). Returns the
   * lines, for a checkpoint elsewhere.
   */
  rewriteTranscript(messages: readonly MessageParam[]): string {
    const lines = transcriptLines(messages);
    this.#lane.push({ kind: 'replace', file: 'transcript.jsonl', data: lines });
    return lines;
  }

  /** Queues the full reply payload and returns its path; `finish` drops it if it failed. */
  spillReply(content: string, structured: boolean): string {
    const file = structured ? 'reply.json' : 'reply.md';
    this.#lane.push({ kind: 'write', file, data: redactSecrets(content) }, (error) => {
      if (error) this.#replyFailed = true;
    });
    return path.join(this.dir, file);
  }

  /** Resolves once every write queued so far has completed (or failed). */
  flush(): Promise<void> {
    return this.#lane.idle();
  }

  /**
   * Ends the log of a settled agent, after every write queued before: writes `result.json` when
   * the folder is kept, else removes the folder. Resolves with the result as it may be delivered:
   * without `replyFile` when that file could not be written, and without `logDir` when the folder
   * does not exist afterwards. Never rejects: a log that cannot be written must not lose the
   * result.
   */
  async finish(result: AgentResult, keep: boolean): Promise<AgentResult> {
    let final = result;
    const error = await this.#lane.run(
      keep
        ? {
            kind: 'write',
            file: 'result.json',
            // Composed when its turn comes: by then the reply's write has completed or failed.
            data: () => {
              if (this.#replyFailed && final.replyFile !== undefined) {
                final = withoutReplyFile(final);
              }
              return redactSecrets(`${JSON.stringify(final, null, 2)}\n`);
            },
          }
        : { kind: 'remove' },
    );
    // Also when the folder could not be made, and `data` never ran.
    if (this.#replyFailed && final.replyFile !== undefined) final = withoutReplyFile(final);
    const exists = error === null ? keep : await folderExists(this.dir);
    return exists ? final : withoutLog(final);
  }
}

/** Messages as transcript.jsonl holds them: one redacted JSON line each. */
export function transcriptLines(messages: readonly MessageParam[]): string {
  let lines = '';
  for (const message of messages) lines += `${redactSecrets(JSON.stringify(message))}\n`;
  return lines;
}

async function folderExists(dir: string): Promise<boolean> {
  try {
    await access(dir);
    return true;
  } catch {
    return false;
  }
}
