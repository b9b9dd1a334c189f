import type { ServerResponse } from 'node:http';
import { redactSecrets } from '../../shared/redact.js';

/** A client this far behind (bytes written and not yet taken by its socket) is dropped. */
export const MAX_UNREAD_BYTES = 16 * 1024 * 1024;
/** A comment this often keeps proxies and idle timers from closing a quiet stream. */
const KEEP_ALIVE_MS = 15_000;

/**
 * The Server-Sent Events clients of one dashboard. Each event is serialised, and redacted, once
 * for all of them. `write` never waits: a client whose socket does not keep up is dropped
 * before it can hold more than `MAX_UNREAD_BYTES`, and its browser reconnects for a fresh
 * snapshot.
 */
export class EventStream {
  /** Each client, with the bytes it may have unread: the limit, plus its first snapshot. */
  readonly #clients = new Map<ServerResponse, number>();
  readonly #keepAlive: NodeJS.Timeout;

  constructor() {
    this.#keepAlive = setInterval(() => this.#writeAll(': keep-alive\n\n'), KEEP_ALIVE_MS);
    this.#keepAlive.unref();
  }

  get size(): number {
    return this.#clients.size;
  }

  /** Starts `response` as a stream whose first event is `first` (a whole snapshot). */
  open(response: ServerResponse, headers: Record<string, string>, first: unknown): void {
    response.writeHead(200, {
      ...headers,
      'Content-Type': 'text/event-stream; charset=utf-8',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    const text = `retry: 2000\n\n${eventText('state', first)}`;
    // A large run's snapshot may be tens of MB: a client is behind only past what it was sent
    // first, or it could never get through its first event.
    this.#clients.set(response, MAX_UNREAD_BYTES + Buffer.byteLength(text));
    response.on('close', () => this.#clients.delete(response));
    response.write(text);
  }

  /** Sends one event to every client. */
  send(name: string, data: unknown): void {
    if (this.#clients.size === 0) return;
    this.#writeAll(eventText(name, data));
  }

  /** Sends one event whose data is JSON text already (redacted here, once for all). */
  sendText(name: string, json: string): void {
    if (this.#clients.size === 0) return;
    this.#writeAll(`event: ${name}\ndata: ${redactSecrets(json)}\n\n`);
  }

  #writeAll(text: string): void {
    for (const [client, allowed] of this.#clients) {
      if (client.writableLength > allowed) {
        this.#clients.delete(client);
        client.destroy();
        continue;
      }
      // Once its first snapshot is through, the plain limit holds.
      if (allowed > MAX_UNREAD_BYTES && client.writableLength === 0) {
        this.#clients.set(client, MAX_UNREAD_BYTES);
      }
      client.write(text);
    }
  }

  /** Sends `end` to every client and ends their streams. */
  close(): void {
    clearInterval(this.#keepAlive);
    this.#writeAll(eventText('end', {}));
    for (const client of this.#clients.keys()) client.end();
    this.#clients.clear();
  }
}

function eventText(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${redactSecrets(JSON.stringify(data))}\n\n`;
}
