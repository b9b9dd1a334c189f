import { readFile } from 'node:fs/promises';
import { histories, parseSegment, segmentFiles } from '../../shared/journal/reader.js';
import type { MessageParam } from '../../shared/provider/types.js';
import type { AgentResult } from '../../shared/result.js';

/** One agent's committed history, as `/api/agents/ID` serves it. */
export interface Transcript {
  messages: MessageParam[];
  steps: number;
  result: AgentResult | null;
}

/**
 * The transcript of agent `id` from the run journal in `logDir`, or null when the journal holds
 * nothing of it. Only the lines that name the agent are parsed: a click on one agent of a large
 * run reads the segments but parses a handful of records.
 */
export async function agentTranscript(logDir: string, id: string): Promise<Transcript | null> {
  const needle = `"a":${JSON.stringify(id)}`;
  const contents = await Promise.all(
    (await segmentFiles(logDir)).map(async (file) => {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch {
        return parseSegment(file, '');
      }
      // A line cut short by a write under way has no newline: it is dropped as the reader would.
      const lines = text.split('\n');
      lines.pop();
      const own = lines.filter((line) => line.includes(needle));
      return parseSegment(file, own.length === 0 ? '' : `${own.join('\n')}\n`);
    }),
  );
  const history = histories(contents).get(id);
  if (!history) return null;
  return { messages: history.messages, steps: history.steps, result: history.result ?? null };
}
