import { tempDir } from './helpers.js';
import {
  makeCertificate,
  recordStream,
  startScripted,
  type TlsFiles,
} from './transport-servers.js';

/** What the scenario tables of the transport conformance suite share. */

export const MULTIBYTE = 'naïve 日本語テキスト 🧪🚀 ok — Ünïcödé ∑';
/** Only characters latin1 can hold, so its latin1 bytes still make JSON ('a latin1 body…'). */
export const LATIN1_TEXT = 'naïve café, smørrebrød, Zürich';

/** What the odd servers serve, made once by `prepareFixtures` before the scenarios run. */
interface Fixtures {
  tls: TlsFiles;
  /** A stream of MULTIBYTE recorded from the scripted model, for the odd servers to replay. */
  recorded: Buffer;
  recordedLatin1: Buffer;
}

let prepared: Fixtures | undefined;

export function fixtures(): Fixtures {
  if (prepared === undefined) {
    throw new Error('Expected prepareFixtures() to have run (in beforeAll), got no fixtures');
  }
  return prepared;
}

export async function prepareFixtures(): Promise<void> {
  prepared = {
    tls: makeCertificate(tempDir('cohort-tls-')),
    recorded: await recordStream([{ text: MULTIBYTE }]),
    recordedLatin1: await recordStream([{ text: LATIN1_TEXT }]),
  };
}

/** A fresh scripted model: the request's script says what it answers. */
export const scripted = () => startScripted();

/** Replay options: one byte per write. */
export const BYTE = { bytesPerWrite: 1 };

/** Event-stream headers that say the body is coded `coding`. */
export const coded = (coding: string) => ({
  'content-type': 'text/event-stream',
  'content-encoding': coding,
});

/**
 * Sets (or, for `undefined`, removes) environment variables; returns what puts them back. The
 * suite pins what steers either transport: a proxy variable would send only undici through a
 * proxy (fetch ignores them), and a token or custom headers would change what both send.
 */
export function pinEnv(values: Record<string, string | undefined>): () => void {
  const saved = Object.keys(values).map((name) => [name, process.env[name]] as const);
  const apply = (pairs: readonly (readonly [string, string | undefined])[]) => {
    for (const [name, value] of pairs) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  apply(Object.entries(values));
  return () => apply(saved);
}
