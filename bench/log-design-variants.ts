/**
 * The ways an agent's log folder could be written, measured by log-designs.ts. `group-commit` is
 * the one cohort ships (src/shared/agent-log.ts on src/shared/log-writer.ts); the others are
 * written here only to be measured against it. All of them write the same files with the same
 * content (docs/LOGS.md), redacted the same way.
 */
import fs, {
  appendFileSync,
  existsSync,
  mkdirSync,
  rmSync,
  type WriteStream,
  writeFileSync,
} from 'node:fs';
import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { AgentLog } from '../src/shared/agent-log.js';
import { LogWriter } from '../src/shared/log-writer.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import { redactSecrets } from '../src/shared/redact.js';
import type { AgentResult } from '../src/shared/result.js';

export const DESIGNS = [
  'none',
  'sync',
  'async-ops',
  'group-commit',
  'group-commit-32',
  'fd-per-child',
  'writer-thread',
] as const;
export type Design = (typeof DESIGNS)[number];

/** What the measured agents call: the shape of AgentLog. */
export interface DesignLog {
  writeMeta(meta: Record<string, unknown>): void;
  appendTranscript(messages: readonly MessageParam[]): void;
  spillReply(content: string, structured: boolean): string;
  finish(result: AgentResult, keep: boolean): Promise<unknown> | unknown;
}

export interface DesignRuntime {
  open(dir: string): DesignLog;
  /** Frees what the design holds for the whole thread (the writer thread). */
  close(): Promise<void>;
}

const lines = (messages: readonly MessageParam[]) =>
  messages.map((message) => `${redactSecrets(JSON.stringify(message))}\n`).join('');
const metaText = (meta: Record<string, unknown>) =>
  redactSecrets(`${JSON.stringify(meta, null, 2)}\n`);
const resultText = (result: AgentResult) => redactSecrets(`${JSON.stringify(result, null, 2)}\n`);

export function designRuntime(design: Design): DesignRuntime {
  const closeNothing = async () => {};
  switch (design) {
    case 'none':
      return { open: () => new NoLog(), close: closeNothing };
    case 'sync':
      return { open: (dir) => new SyncLog(dir), close: closeNothing };
    case 'async-ops':
      return { open: (dir) => new AsyncOpsLog(dir), close: closeNothing };
    case 'group-commit':
      // What cohort ships: this thread's writer, with its defaults.
      return { open: (dir) => new AgentLog(dir), close: closeNothing };
    case 'group-commit-32': {
      // The same writer with 32 folders in flight instead of 8.
      const writer = new LogWriter(32);
      return { open: (dir) => new AgentLog(dir, writer), close: closeNothing };
    }
    case 'fd-per-child':
      return { open: (dir) => new HeldFileLog(dir), close: closeNothing };
    case 'writer-thread':
      return writerThreadRuntime();
  }
}

/** No files: the same strings made (JSON, redaction) and dropped. What the rest costs. */
class NoLog implements DesignLog {
  writeMeta(meta: Record<string, unknown>): void {
    metaText(meta);
  }
  appendTranscript(messages: readonly MessageParam[]): void {
    lines(messages);
  }
  spillReply(content: string): string {
    redactSecrets(content);
    return '';
  }
  finish(result: AgentResult): boolean {
    resultText(result);
    return true;
  }
}

/** cohort before issue 11: every write synchronous, on the agent's own event loop. */
class SyncLog implements DesignLog {
  readonly #dir: string;
  #ready = false;

  constructor(dir: string) {
    this.#dir = dir;
  }

  #ensure(): void {
    if (this.#ready) return;
    mkdirSync(this.#dir, { recursive: true });
    this.#ready = true;
  }

  writeMeta(meta: Record<string, unknown>): void {
    this.#ensure();
    writeFileSync(path.join(this.#dir, 'meta.json'), metaText(meta));
  }

  appendTranscript(messages: readonly MessageParam[]): void {
    this.#ensure();
    appendFileSync(path.join(this.#dir, 'transcript.jsonl'), lines(messages));
  }

  spillReply(content: string, structured: boolean): string {
    this.#ensure();
    const file = path.join(this.#dir, structured ? 'reply.json' : 'reply.md');
    writeFileSync(file, redactSecrets(content));
    return file;
  }

  finish(result: AgentResult): boolean {
    try {
      this.#ensure();
      writeFileSync(path.join(this.#dir, 'result.json'), resultText(result));
    } catch {}
    return existsSync(this.#dir);
  }
}

/** (a) One fs.promises call per write, chained per agent so that its writes stay in order. */
class AsyncOpsLog implements DesignLog {
  readonly #dir: string;
  /** The folder made (or failed). */
  protected readonly made: Promise<unknown>;
  #tail: Promise<unknown>;

  constructor(dir: string) {
    this.#dir = dir;
    this.made = mkdir(dir, { recursive: true }).catch(() => {});
    this.#tail = this.made;
  }

  #then(write: () => Promise<unknown>): void {
    this.#tail = this.#tail.then(write).catch(() => {});
  }

  writeMeta(meta: Record<string, unknown>): void {
    this.#then(() => writeFile(path.join(this.#dir, 'meta.json'), metaText(meta)));
  }

  appendTranscript(messages: readonly MessageParam[]): void {
    const data = lines(messages);
    this.#then(() => appendFile(path.join(this.#dir, 'transcript.jsonl'), data));
  }

  spillReply(content: string, structured: boolean): string {
    const file = path.join(this.#dir, structured ? 'reply.json' : 'reply.md');
    this.#then(() => writeFile(file, redactSecrets(content)));
    return file;
  }

  async finish(result: AgentResult): Promise<void> {
    this.#then(() => writeFile(path.join(this.#dir, 'result.json'), resultText(result)));
    await this.#tail;
  }
}

/**
 * (c) One descriptor held per live agent: its transcript opened once (a WriteStream, which
 * queues writes in order), closed when the agent ends. Small files as (a). 10,000 parked children
 * would hold 10,000 descriptors.
 */
class HeldFileLog extends AsyncOpsLog {
  readonly #file: string;
  #stream: Promise<WriteStream> | undefined;

  constructor(dir: string) {
    super(dir);
    this.#file = path.join(dir, 'transcript.jsonl');
  }

  override appendTranscript(messages: readonly MessageParam[]): void {
    const data = lines(messages);
    this.#stream ??= this.made.then(() => {
      const stream = fs.createWriteStream(this.#file, { flags: 'a' });
      stream.on('error', () => {});
      return stream;
    });
    void this.#stream.then((stream) => stream.write(data));
  }

  override async finish(result: AgentResult): Promise<void> {
    const stream = await this.#stream;
    if (stream) await new Promise<void>((resolve) => stream.end(resolve));
    await super.finish(result);
  }
}

/**
 * (d) A writer thread: the agents' thread posts each turn's writes in one message to a thread
 * that runs them synchronously and answers once per batch.
 */
function writerThreadRuntime(): DesignRuntime {
  const worker = new Worker(WRITER_SOURCE, { eval: true });
  const waiting = new Map<number, () => void>();
  let batch: WriterOp[] = [];
  let nextId = 1;
  worker.on('message', (done: number[]) => {
    for (const id of done) {
      waiting.get(id)?.();
      waiting.delete(id);
    }
  });
  const post = (op: WriterOp) => {
    if (batch.length === 0) {
      setImmediate(() => {
        worker.postMessage(batch);
        batch = [];
      });
    }
    batch.push(op);
  };
  const open = (dir: string): DesignLog => ({
    writeMeta: (meta) => post({ dir, file: 'meta.json', data: metaText(meta), flag: 'w' }),
    appendTranscript: (messages) =>
      post({ dir, file: 'transcript.jsonl', data: lines(messages), flag: 'a' }),
    spillReply: (content, structured) => {
      const file = structured ? 'reply.json' : 'reply.md';
      post({ dir, file, data: redactSecrets(content), flag: 'w' });
      return path.join(dir, file);
    },
    finish: (result) => {
      const id = nextId++;
      post({ dir, file: 'result.json', data: resultText(result), flag: 'w', id });
      return new Promise<void>((resolve) => waiting.set(id, resolve));
    },
  });
  return { open, close: async () => void (await worker.terminate()) };
}

interface WriterOp {
  dir: string;
  file: string;
  data: string;
  flag: 'a' | 'w';
  id?: number;
}

const WRITER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
const path = require('node:path');
const made = new Set();
parentPort.on('message', (batch) => {
  const done = [];
  for (const op of batch) {
    try {
      if (!made.has(op.dir)) { fs.mkdirSync(op.dir, { recursive: true }); made.add(op.dir); }
      fs.writeFileSync(path.join(op.dir, op.file), op.data, { flag: op.flag });
    } catch {}
    if (op.id !== undefined) done.push(op.id);
  }
  if (done.length > 0) parentPort.postMessage(done);
});
`;

/** Removes a run's folders (outside the measured window). */
export function removeRunDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
