/**
 * The `logs` policy applied at close (docs/LOGS.md): the records of agents whose result says
 * `keep: false` are taken out of this process's segments, each rewritten whole (a temporary file
 * renamed over it), and a segment left with nothing but its header is removed.
 */
import { readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { REPLIES_FOLDER, segmentPid } from './format.js';
import { segmentFiles } from './reader.js';

const AGENT_AND_KIND = /^\{"k":"(start|step|result)","a":"([^"]+)"/;
const DROPPED_RESULT = /^\{"k":"result","a":"([^"]+)","at":\d+,"keep":false/;

/** Applies the policy to the segments process `pid` wrote in the run folder `dir`. */
export async function compactJournal(dir: string, pid = process.pid): Promise<void> {
  const files = (await segmentFiles(dir)).filter((file) => segmentPid(path.basename(file)) === pid);
  const texts = await Promise.all(files.map((file) => readFile(file, 'utf8').catch(() => '')));
  const dropped = new Set<string>();
  for (const text of texts) {
    for (const line of text.split('\n')) {
      const match = DROPPED_RESULT.exec(line);
      if (match) dropped.add(match[1]!);
    }
  }
  if (dropped.size === 0) return;
  await Promise.all(
    files.map(async (file, index) => {
      const lines = texts[index]!.split('\n');
      // The last piece is empty, or a line cut short: neither is kept.
      lines.pop();
      const kept = lines.filter((line) => {
        const match = AGENT_AND_KIND.exec(line);
        return !match || !dropped.has(match[2]!);
      });
      if (kept.every((line) => line.startsWith('{"k":"segment"') || line === '')) {
        await rm(file, { force: true });
        return;
      }
      const temporary = `${file}.tmp`;
      await writeFile(temporary, `${kept.join('\n')}\n`);
      await rename(temporary, file);
    }),
  );
  // A dropped agent's reply was never spilled (docs/LOGS.md); an empty folder goes too.
  await rmdir(path.join(dir, REPLIES_FOLDER)).catch(() => {});
}
