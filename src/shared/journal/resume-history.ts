/**
 * What a child resumed on a fresh worker goes on from: its history in the segments of the threads
 * it ran on. A worker that died leaves many children to resume, each reading the same segments:
 * a thread parses and files each segment by agent once, for a moment.
 */
import type { AgentRecord } from './format.js';
import { type AgentHistory, histories, readSegment } from './reader.js';

/** A segment read for resumes, its records filed by agent. */
interface FiledSegment {
  file: string;
  byAgent: Map<string, AgentRecord[]>;
  corrupt: Set<string>;
}

/**
 * Segments read for resumes on this thread, for a moment: a worker that died leaves many children
 * to resume, and each reads the same segment. Each is parsed and filed by agent once.
 */
const recent = new Map<string, Promise<FiledSegment | undefined>>();
const RECENT_MS = 10_000;

function readRecent(file: string): Promise<FiledSegment | undefined> {
  let read = recent.get(file);
  if (!read) {
    read = readSegment(file).then(
      (content) => {
        const byAgent = new Map<string, AgentRecord[]>();
        for (const record of content.records) {
          const records = byAgent.get(record.a);
          if (records) records.push(record);
          else byAgent.set(record.a, [record]);
        }
        return { file, byAgent, corrupt: content.corrupt };
      },
      () => undefined,
    );
    recent.set(file, read);
    setTimeout(() => recent.delete(file), RECENT_MS).unref();
  }
  return read;
}

/**
 * What a resumed agent starts from: its history in the segments of the threads it ran on, or
 * undefined when none of them holds a start of it.
 */
export async function historyFrom(
  files: readonly string[],
  id: string,
): Promise<AgentHistory | undefined> {
  const contents = (await Promise.all(files.map(readRecent))).flatMap((filed) =>
    filed === undefined
      ? []
      : [
          {
            file: filed.file,
            header: undefined,
            records: filed.byAgent.get(id) ?? [],
            batches: [],
            batchesRead: [],
            corrupt: filed.corrupt.has(id) ? new Set([id]) : new Set<string>(),
            unattributed: 0,
          },
        ],
  );
  const history = histories(contents).get(id);
  return history && history.inc >= 0 ? history : undefined;
}
