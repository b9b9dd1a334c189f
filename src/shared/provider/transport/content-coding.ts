import { pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { APIConnectionError } from '@anthropic-ai/sdk/error';

// Lenient as fetch is (and curl): a stream cut short decodes as far as it goes.
const GZIP = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH };
const BROTLI = {
  flush: zlib.constants.BROTLI_OPERATION_FLUSH,
  finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH,
};

const DECODERS: Record<string, () => NodeJS.ReadWriteStream> = {
  gzip: () => zlib.createGunzip(GZIP),
  'x-gzip': () => zlib.createGunzip(GZIP),
  deflate: () => zlib.createInflate(GZIP),
  br: () => zlib.createBrotliDecompress(BROTLI),
};

/** More codings than this is an attack, not a format (fetch's limit). */
const MAX_CODINGS = 5;

/**
 * The body with its `content-encoding` undone, as fetch undoes it: cohort never asks for a
 * compressed body, but a proxy may send one anyway. A body with no coding (the common case) is
 * returned as it is, at no cost; one with a coding this does not know is left encoded, as fetch
 * leaves it. Destroying the decoded stream destroys the body under it. More codings than fetch
 * allows throw fetch's failure, an `APIConnectionError`.
 */
export function decodeBody(body: Readable, status: number, coding: string | null): Readable {
  if (coding === null || status === 204 || status === 304) return body;
  const codings = coding.toLowerCase().split(',');
  if (codings.length > MAX_CODINGS) {
    // fetch fails the whole request, before its status is looked at. The body is let go; its
    // own abort error has nobody to tell.
    body.on('error', () => {});
    body.destroy();
    throw new APIConnectionError({
      cause: new TypeError('fetch failed', {
        cause: new Error(
          `too many content-encodings in response: ${codings.length}, maximum allowed is ${MAX_CODINGS}`,
        ),
      }),
    });
  }
  const decoders: NodeJS.ReadWriteStream[] = [];
  // Codings are listed in the order they were applied: undo them from the last.
  for (let index = codings.length - 1; index >= 0; index--) {
    const make = DECODERS[(codings[index] as string).trim()];
    if (make === undefined) return body;
    decoders.push(make());
  }
  // The callback only keeps pipeline from throwing; errors surface on the returned stream.
  return pipeline([body, ...decoders], () => {}) as unknown as Readable;
}
