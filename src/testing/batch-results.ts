/**
 * The results file of an ended Message Batch: JSONL, one line per request,
 * `{"custom_id": …, "result": {"type": "succeeded", "message"} | {"type": "errored", "error"}
 * | {"type": "canceled"} | {"type": "expired"}}`. As the real API warns, the lines are not
 * in request order: they come in a seeded shuffle, so a client that pairs results with
 * requests by position fails here before it fails in production.
 */
import type { ServerResponse } from 'node:http';
import { fnv1a, seededRandom } from './hash.js';
import type { ResultType, StoredBatch } from './message-batches.js';

/** Bytes gathered before a write, so a large file goes out in pieces the socket can take. */
const WRITE_CHUNK = 64 * 1024;

/** The lines of the results file of `batch`, whose requests ended as `types` say. */
export function* resultLines(
  batch: StoredBatch,
  types: readonly ResultType[],
  seed: number,
): Generator<string> {
  for (const index of shuffledIndexes(types.length, fnv1a(`${seed}\u0000${batch.id}`))) {
    const type = types[index]!;
    const entry = batch.entries[index]!;
    const result =
      type === 'succeeded' || type === 'errored' ? entry.answer.result : `{"type":"${type}"}`;
    yield `{"custom_id":${JSON.stringify(entry.customId)},"result":${result}}\n`;
  }
}

/** 0..count-1 in a Fisher-Yates shuffle seeded by `seed`. */
function shuffledIndexes(count: number, seed: number): number[] {
  const indexes = Array.from({ length: count }, (_, index) => index);
  const random = seededRandom(seed);
  for (let index = count - 1; index > 0; index--) {
    const other = Math.floor(random() * (index + 1));
    [indexes[index], indexes[other]] = [indexes[other]!, indexes[index]!];
  }
  return indexes;
}

/** Sends `lines` as a 200 JSONL body, in pieces, waiting for the socket when it is full. */
export function sendResultLines(
  response: ServerResponse,
  requestId: string,
  lines: Iterator<string>,
): void {
  response.writeHead(200, { 'content-type': 'application/binary', 'request-id': requestId });
  const pump = (): void => {
    for (;;) {
      if (response.destroyed) return;
      let piece = '';
      let next = lines.next();
      while (next.done !== true) {
        piece += next.value;
        if (piece.length >= WRITE_CHUNK) break;
        next = lines.next();
      }
      if (next.done === true) {
        response.end(piece);
        return;
      }
      if (!response.write(piece)) {
        response.once('drain', pump);
        return;
      }
    }
  };
  pump();
}
