/**
 * `cohort logs export ID --dir D`: one agent's records as the folder of files older cohorts
 * wrote per agent, for tools that read files: `D/<id>/meta.json`, `transcript.jsonl` (one
 * Messages-API message per line, what `restoreTranscript` reads), `reply.md` or `reply.json` (the
 * whole reply) and `result.json`.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { REPLIES_FOLDER } from '../../shared/journal/format.js';
import { type AgentHistory, transcriptText } from '../../shared/journal/reader.js';
import { redactSecrets } from '../../shared/redact.js';
import { toolCalls } from './blocks.js';
import type { RunInfo } from './runs.js';

/** What an export wrote. */
export interface Exported {
  dir: string;
  files: string[];
}

/**
 * Writes the agent's folder under `into` (made if missing; files of an earlier export of the
 * same agent are replaced). A file the journal has nothing for is not written: no `meta.json`
 * for an agent whose start was not journaled, no reply or `result.json` before its result.
 */
export async function exportAgent(
  history: AgentHistory,
  run: RunInfo,
  into: string,
): Promise<Exported> {
  const dir = path.join(path.resolve(into), history.id);
  await mkdir(dir, { recursive: true });
  const files: [string, string][] = [];
  if (history.meta) files.push(['meta.json', json(history.meta)]);
  files.push(['transcript.jsonl', transcriptText(history.messages)]);
  const reply = history.result ? await replyOf(history, run) : undefined;
  if (reply) files.push([reply.name, reply.text]);
  if (history.result) files.push(['result.json', json(history.result)]);
  // One reply file: a re-export whose reply changed kind leaves no stale other one.
  const stale = reply?.name === 'reply.md' ? 'reply.json' : 'reply.md';
  await rm(path.join(dir, stale), { force: true });
  for (const [name, text] of files) await writeFile(path.join(dir, name), redactSecrets(text));
  return { dir, files: files.map(([name]) => name) };
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/**
 * The whole reply: the file it spilled to in the run's folder when it was longer than the cap,
 * else the result's text (whole, since it was not clipped). `reply.json` when the reply was one
 * object or array, as the spill names it; none when the agent made no reply.
 */
async function replyOf(
  history: AgentHistory,
  run: RunInfo,
): Promise<{ name: string; text: string } | undefined> {
  const result = history.result!;
  for (const extension of ['json', 'md']) {
    const file = path.join(run.dir, REPLIES_FOLDER, `${history.id}.${extension}`);
    try {
      return { name: `reply.${extension}`, text: await readFile(file, 'utf8') };
    } catch {
      // Not spilled, or not this kind: the other, or the result's text.
    }
  }
  if (result.outcome !== 'complete') return undefined;
  return { name: repliedStructured(history) ? 'reply.json' : 'reply.md', text: result.text };
}

/**
 * Whether the reply was one object or array: a typed reply's value is, or the last step's one
 * `reply` call passed one.
 */
function repliedStructured(history: AgentHistory): boolean {
  const value = history.result?.value;
  if (value !== undefined) return typeof value === 'object' && value !== null;
  const last = history.messages.findLast((message) => message.role === 'assistant');
  const replies = last ? toolCalls(last).filter((call) => call.name === 'reply') : [];
  if (replies.length !== 1) return false;
  const input = replies[0]!.input as { result?: unknown } | null;
  return typeof input?.result === 'object' && input.result !== null;
}
