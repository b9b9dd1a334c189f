/**
 * `cohort logs tail`: a run's records as one line each (when, which agent, what: started, a step
 * and its tool calls, the result), or the records themselves with `--json`. With `--follow` it
 * keeps reading what is appended to every segment, and segments that appear, until stopped.
 */
import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JournalRecord } from '../../shared/journal/format.js';
import { parseSegment, segmentFiles } from '../../shared/journal/reader.js';
import { redactSecrets } from '../../shared/redact.js';
import { safeLabel } from '../output.js';
import { RecordLines } from './record-lines.js';
import type { RunInfo } from './runs.js';

/** How often `--follow` looks for what was appended: a journal is written in small bursts. */
export const FOLLOW_INTERVAL_MS = 200;

/** Bytes read from a segment at once. */
const CHUNK = 1 << 20;

const NEWLINE = 0x0a;

/**
 * One segment read from where the last read ended. Only whole lines are taken: a line still
 * being written waits for the next read. A segment replaced since (the `logs` policy rewrites a
 * process's segments at close, without the records it drops) is read on from its new end: it
 * holds nothing that was not read already.
 */
class SegmentTail {
  readonly file: string;
  #offset = 0;
  #rest: Buffer = Buffer.alloc(0);
  #inode: number | undefined;

  constructor(file: string) {
    this.file = file;
  }

  /** The whole records appended since the last read, in order, headers included. */
  async read(): Promise<{ records: JournalRecord[]; unparsed: number }> {
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(this.file, 'r');
    } catch {
      return { records: [], unparsed: 0 }; // removed (the run folder went): nothing more to read
    }
    try {
      const info = await handle.stat();
      if (this.#inode !== undefined && (info.ino !== this.#inode || info.size < this.#offset)) {
        this.#offset = info.size;
        this.#rest = Buffer.alloc(0);
      }
      this.#inode = info.ino;
      const pieces = [this.#rest];
      while (this.#offset < info.size) {
        const buffer = Buffer.alloc(Math.min(CHUNK, info.size - this.#offset));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.#offset);
        if (bytesRead === 0) break;
        pieces.push(buffer.subarray(0, bytesRead));
        this.#offset += bytesRead;
      }
      const data = Buffer.concat(pieces);
      // A newline byte is never part of a longer UTF-8 sequence: whole lines decode whole.
      const end = data.lastIndexOf(NEWLINE);
      this.#rest = data.subarray(end + 1);
      if (end < 0) return { records: [], unparsed: 0 };
      const content = parseSegment(this.file, data.subarray(0, end + 1).toString('utf8'));
      const records: JournalRecord[] = content.header ? [content.header] : [];
      records.push(...content.records);
      return { records, unparsed: content.corrupt.size + content.unattributed };
    } finally {
      await handle.close();
    }
  }
}

export interface TailOptions {
  run: RunInfo;
  json: boolean;
  follow: boolean;
  /** Ends `--follow`. */
  signal: AbortSignal;
  write: (text: string) => void;
  /** Told of lines that did not parse. */
  warn: (line: string) => void;
  intervalMs?: number;
}

/**
 * Prints the run's records: first every record there is, the segments merged in time order;
 * then, with `follow`, each record as it is read, until `signal` aborts.
 */
export async function tailRun(options: TailOptions): Promise<void> {
  const tails = new Map<string, SegmentTail>();
  const lines = new RecordLines();
  const print = (record: JournalRecord) => {
    if (options.json) {
      options.write(`${redactSecrets(JSON.stringify(record))}\n`);
      return;
    }
    const line = lines.line(record);
    if (line !== undefined) options.write(`${redactSecrets(line)}\n`);
  };
  const readAll = async () => {
    for (const file of await segmentFiles(options.run.dir)) {
      if (!tails.has(file)) tails.set(file, new SegmentTail(file));
    }
    const read = await Promise.all([...tails.values()].map((tail) => tail.read()));
    read.forEach(({ unparsed }, index) => {
      if (unparsed > 0) {
        const file = [...tails.keys()][index]!;
        options.warn(`cohort logs: ${safeLabel(file)}: ${unparsed} line(s) did not parse`);
      }
    });
    return read.map(({ records }) => records);
  };
  const first = timeOrder(await readAll());
  for (const { record } of first) print(record);
  // Nothing to show is said, not left blank: the newest run may be one that has only begun.
  if (first.length === 0 && !options.follow) {
    options.warn(
      `cohort logs: run ${safeLabel(options.run.id)} has no records yet (${safeLabel(options.run.dir)}); --follow waits for them, --run picks another`,
    );
  }
  const interval = options.intervalMs ?? FOLLOW_INTERVAL_MS;
  while (options.follow && !options.signal.aborted) {
    try {
      await sleep(interval, undefined, { signal: options.signal });
    } catch {
      break; // stopped
    }
    for (const records of await readAll()) for (const record of records) print(record);
  }
}

/**
 * Records of several segments merged by time, each segment's in its own order: a record sorts at
 * the latest time its segment has shown so far (a step has none of its own, and a segment's
 * header is stamped when its file opened, just after the first record was queued). The sort is
 * stable.
 */
function timeOrder(segments: JournalRecord[][]): { at: number; record: JournalRecord }[] {
  const timed = segments.flatMap((records) => {
    let at = 0;
    return records.map((record) => {
      if (record.k !== 'step') at = Math.max(at, record.at);
      return { at, record };
    });
  });
  return timed.sort((a, b) => a.at - b.at);
}
