import type { Readable } from 'node:stream';
import { APIError } from '@anthropic-ai/sdk/error';
import type { ErrorType } from '@anthropic-ai/sdk/resources/shared';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import type { StreamEvent } from './types.js';

// One options object for every decode call instead of one per chunk.
const STREAMING = { stream: true } as const;
const CR = 13;

/**
 * The Messages-API events of an event-stream body, by the SDK's rules (its `Stream.fromSSEResponse`):
 * an event with no name and a `ping` are skipped, so is one with empty data; an `error` event
 * throws an `APIError` with no status, its data as the body; data that is not JSON throws
 * JSON.parse's `SyntaxError`; a body that breaks off throws the connection's error. When `signal`
 * aborts mid-body the events end quietly, as the SDK's do: the caller knows why.
 *
 * The bytes go through one streaming TextDecoder, so a character split across chunks stays whole.
 * Leaving the loop early (or an error) destroys the body, which lets go of its connection.
 */
export async function* streamEvents(
  body: Readable,
  headers: Headers,
  signal: AbortSignal,
): AsyncGenerator<StreamEvent> {
  const decoder = new TextDecoder();
  const parsed: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => parsed.push(message) });
  let done = false;
  let endsWithCR = false;
  try {
    for await (const chunk of body) {
      const text = decoder.decode(chunk as Buffer, STREAMING);
      if (text === '') continue;
      endsWithCR = text.charCodeAt(text.length - 1) === CR;
      parser.feed(text);
      // The messages of this chunk are taken before the next feed: yielding pauses the reading.
      for (let index = 0; index < parsed.length; index++) {
        const event = toStreamEvent(parsed[index] as EventSourceMessage, headers);
        if (event !== undefined) yield event;
      }
      parsed.length = 0;
    }
    // A CR that ends the body ends its line, as the SDK reads it; the parser would wait for an
    // LF that may follow. Only a CR: an LF-ended body has no line pending.
    if (decoder.decode() === '' && endsWithCR) {
      parser.feed('\n');
      for (const message of parsed) {
        const event = toStreamEvent(message, headers);
        if (event !== undefined) yield event;
      }
    }
    done = true;
  } catch (error) {
    if (signal.aborted) return;
    throw asFetchBodyError(error);
  } finally {
    if (!done) body.destroy();
  }
}

/**
 * A body that failed as fetch reports it: fetch wraps whatever broke the body (a reset, a broken
 * chunked encoding, a bad compressed stream) in `TypeError('terminated')`, which `classify`
 * reads as a connection that broke. What the stream's own rules throw (an `error` event's
 * `APIError`, JSON.parse's `SyntaxError`) passes as it is.
 */
export function asFetchBodyError(error: unknown): unknown {
  if (error instanceof APIError || error instanceof SyntaxError) return error;
  return new TypeError('terminated', { cause: error });
}

/** One server-sent event as the SDK turns it into a stream event, or nothing to yield. */
function toStreamEvent(message: EventSourceMessage, headers: Headers): StreamEvent | undefined {
  const name = message.event;
  if (name === undefined || name === 'ping') return undefined;
  if (name === 'error') {
    const body = safeJSON(message.data) ?? message.data;
    // The SDK takes the type as the body says it, whatever it is.
    const type = (body as { error?: { type?: ErrorType } } | undefined)?.error?.type;
    throw new APIError(undefined, body, undefined, headers, type);
  }
  if (!message.data) return undefined;
  return JSON.parse(message.data) as StreamEvent;
}

/** JSON.parse that answers undefined instead of throwing, as the SDK's `safeJSON`. */
export function safeJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The first `maxBytes` of a body as text; the rest is never read (the body is destroyed, and
 * with it the connection). A body that fails while being read rejects with its error.
 */
export async function readStart(body: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= maxBytes) break;
    }
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, maxBytes);
}
