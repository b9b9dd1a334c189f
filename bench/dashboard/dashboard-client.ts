/**
 * A live client of the dashboard in a process of its own, so that its CPU is not the engine's
 * (a browser's never is): `node dashboard-client.js URL` reads `/api/events` the whole time, as
 * the page does (the stream's first event is the whole state), and parses every event's data as
 * the page would. It prints `connected` once the
 * stream's headers arrive, and, when the stream ends (the dashboard closed), one JSON line of
 * what it read (`ClientTally`), then exits.
 */
import { request } from 'node:http';
import { isEntryScript } from '../../src/testing/entry-script.js';

/** What the client read while the run lasted. */
export interface ClientTally {
  /** SSE events by name (`state`, `delta`, `end`). */
  events: Record<string, number>;
  streamBytes: number;
}

async function watch(pageUrl: string): Promise<ClientTally> {
  const page = new URL(pageUrl);
  const token = page.searchParams.get('token') ?? '';
  const tally: ClientTally = { events: {}, streamBytes: 0 };
  await new Promise<void>((resolve, reject) => {
    const outgoing = request(
      new URL('/api/events', page),
      { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } },
      (response) => {
        if (response.statusCode !== 200) {
          reject(new Error(`GET /api/events answered ${response.statusCode}`));
          response.resume();
          return;
        }
        process.stdout.write('connected\n');
        response.setEncoding('utf8');
        let pending = '';
        response.on('data', (chunk: string) => {
          tally.streamBytes += Buffer.byteLength(chunk);
          pending += chunk;
          // The event names are counted, and the data parsed, as the page would.
          let newline = pending.indexOf('\n');
          while (newline !== -1) {
            const line = pending.slice(0, newline);
            pending = pending.slice(newline + 1);
            if (line.startsWith('event: ')) {
              const name = line.slice(7).trim();
              tally.events[name] = (tally.events[name] ?? 0) + 1;
            } else if (line.startsWith('data: ')) {
              JSON.parse(line.slice(6));
            }
            newline = pending.indexOf('\n');
          }
        });
        response.once('end', resolve);
        response.once('error', reject);
      },
    );
    outgoing.once('error', reject);
    outgoing.end();
  });
  return tally;
}

if (isEntryScript(import.meta.url)) {
  const url = process.argv[2];
  if (url === undefined) {
    process.stderr.write('usage: dashboard-client.js URL\n');
    process.exitCode = 2;
  } else {
    const tally = await watch(url);
    process.stdout.write(`${JSON.stringify(tally)}\n`);
  }
}
