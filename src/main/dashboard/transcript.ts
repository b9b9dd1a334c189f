import { createReadStream } from 'node:fs';
import {
  histories,
  parseSegment,
  type SegmentContent,
  segmentFiles,
} from '../../shared/journal/reader.js';
import type { MessageParam } from '../../shared/provider/types.js';
import type { AgentResult } from '../../shared/result.js';

/** The most of one agent's records a transcript holds; past it, its earliest steps go. */
export const MAX_TRANSCRIPT_CHARS = 8 * 1024 * 1024;

/** One agent's committed history, as `/api/agents/ID` serves it. */
export interface Transcript {
  messages: MessageParam[];
  steps: number;
  result: AgentResult | null;
  /** Steps between its start and its latest were left out, to keep it under 8 MB. */
  clipped: boolean;
}

/**
 * The transcript of agent `id` from the run journal in `logDir`, or null when the journal holds
 * nothing of it. The segments are streamed, and only the lines that name the agent are kept and
 * parsed: a click on one agent of a large run holds its own records, never a segment's text.
 */
export async function agentTranscript(logDir: string, id: string): Promise<Transcript | null> {
  const needle = `"a":${JSON.stringify(id)}`;
  const contents: SegmentContent[] = [];
  let clipped = false;
  // Over every segment: a resumed agent's runs may be in several.
  let chars = 0;
  for (const file of await segmentFiles(logDir)) {
    const own: string[] = [];
    let rest = '';
    try {
      for await (const chunk of createReadStream(file, { encoding: 'utf8' })) {
        const lines = `${rest}${chunk as string}`.split('\n');
        // The last piece has no newline yet: the next chunk ends it, or it is a torn write.
        rest = lines.pop() ?? '';
        for (const line of lines) {
          if (!line.includes(needle)) continue;
          own.push(line);
          chars += line.length;
          // Its first record here (a start, with the prompt) stays; the earliest steps go.
          while (chars > MAX_TRANSCRIPT_CHARS && own.length > 2) {
            chars -= own.splice(1, 1)[0]!.length;
            clipped = true;
          }
        }
      }
    } catch {
      // A segment removed while it was read (a `logs` policy at close) holds nothing now.
      continue;
    }
    contents.push(parseSegment(file, own.length === 0 ? '' : `${own.join('\n')}\n`));
  }
  const history = histories(contents).get(id);
  if (!history) return null;
  return {
    messages: history.messages,
    steps: history.steps,
    result: history.result ?? null,
    clipped,
  };
}
