import type { ServerResponse } from 'node:http';
import { type ErrorDetails, errorBody } from './messages-api.js';
import type { MessagePlan } from './plan.js';
import {
  type MessageIdentity,
  messageJson,
  type SseEvent,
  sseEvent,
  streamBody,
  streamHead,
} from './sse-events.js';
import type { TickScheduler } from './tick-scheduler.js';

/** How one response is paced, and where it goes. */
export interface PlayContext {
  response: ServerResponse;
  scheduler: TickScheduler;
  identity: MessageIdentity;
  requestId: string;
  /** Time to first token: headers and message_start go at once, the first delta waits this. */
  ttftMs: number;
  /** Output characters per millisecond; 0 sends everything as fast as the socket takes it. */
  charsPerMs: number;
  chunkChars: number;
  /** Called just before the player destroys the socket on purpose (the disconnect fault). */
  onDeliberateClose: () => void;
  /**
   * Called with the output characters (thinking, text, tool input JSON) just handed to the
   * socket: once per write of a stream, once with the whole output for a JSON body. A
   * rate limit charges output tokens through it as they are generated. Fault bytes do
   * not count.
   */
  onOutput?: (chars: number) => void;
  /**
   * More headers for a 200 (the rate-limit headers). The player adds its own to this
   * object and hands it to `writeHead` as is: a copy per response is measurable.
   */
  headers?: Record<string, string>;
}

/** The head of a 200: `extra` with the given headers added, or just those. */
function headOf(
  extra: Record<string, string> | undefined,
  contentType: string,
  requestId: string,
  stream: boolean,
): Record<string, string> {
  const headers = extra ?? {};
  headers['content-type'] = contentType;
  if (stream) headers['cache-control'] = 'no-cache';
  headers['request-id'] = requestId;
  return headers;
}

// An SSE event whose data line is cut off in the middle of a JSON string.
const MALFORMED_EVENT =
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_del\n\n';

/** An Anthropic-style error response. */
export interface ErrorResponse {
  status: number;
  type: string;
  message: string;
  requestId: string;
  headers?: Record<string, string>;
  /** `error.details`, e.g. `{error_code: "thread_not_found"}`. */
  details?: ErrorDetails;
}

/** Sends an Anthropic-style error response, unless the response is already gone. */
export function sendError(response: ServerResponse, error: ErrorResponse): void {
  if (response.destroyed || response.headersSent) return;
  response.writeHead(error.status, {
    'content-type': 'application/json',
    'request-id': error.requestId,
    ...error.headers,
  });
  response.end(errorBody(error.type, error.message, error.requestId, error.details));
}

/** Sends `plan` as one Message JSON after the time the whole output would take. */
export function playJson(plan: MessagePlan, context: PlayContext): void {
  const { response } = context;
  const { faults } = plan;
  const generation = context.charsPerMs > 0 ? plan.outputChars / context.charsPerMs : 0;
  const waitMs = context.ttftMs + generation + faults.stallMs;
  const send = (): void => {
    if (response.destroyed) return;
    if (faults.disconnect === true) {
      context.onDeliberateClose();
      response.destroy();
      return;
    }
    if (faults.error !== undefined) {
      const { headers } = faults.error;
      const rate = context.headers;
      sendError(response, {
        ...faults.error,
        requestId: context.requestId,
        ...(rate === undefined
          ? {}
          : { headers: headers === undefined ? rate : { ...rate, ...headers } }),
      });
      return;
    }
    response.writeHead(200, headOf(context.headers, 'application/json', context.requestId, false));
    const body = messageJson(plan, context.identity);
    // A malformed body still cost its whole output to generate.
    context.onOutput?.(plan.outputChars);
    response.end(faults.malformed === true ? body.slice(0, Math.ceil(body.length / 2)) : body);
  };
  if (waitMs > 0) context.scheduler.schedule(context.scheduler.now() + waitMs, send);
  else send();
}

/** Streams `plan` as SSE, paced by the context, with its faults at the fault point. */
export function playStream(plan: MessagePlan, context: PlayContext): void {
  new StreamPlayer(plan, context).start();
}

/**
 * Walks the lazy event sequence of one stream. Each wake-up writes every event that is
 * due in one `write`, then books the next wake-up on the shared scheduler: a paced
 * stream costs one bucket entry per wake, never a timer of its own.
 */
class StreamPlayer {
  readonly #plan: MessagePlan;
  readonly #context: PlayContext;
  readonly #events: Generator<SseEvent>;
  #pending: SseEvent | undefined;
  #charsSent = 0;
  /** Output characters added to the text being assembled, not yet reported to onOutput. */
  #charsUnreported = 0;
  #firstTokenAt = 0;
  #shiftMs = 0;
  #sawDelta = false;
  /** 'stall' then 'rest' (malformed, error, disconnect) then 'done'. */
  #faultStage: 'stall' | 'rest' | 'done';

  constructor(plan: MessagePlan, context: PlayContext) {
    this.#plan = plan;
    this.#context = context;
    this.#events = streamBody(plan, context.chunkChars);
    const { faults } = plan;
    const anyFault =
      faults.stallMs > 0 || faults.malformed || faults.disconnect || faults.error !== undefined;
    this.#faultStage = anyFault ? 'stall' : 'done';
  }

  start(): void {
    const { response, scheduler, ttftMs, requestId } = this.#context;
    const { headers } = this.#context;
    response.writeHead(200, headOf(headers, 'text/event-stream; charset=utf-8', requestId, true));
    const head = streamHead(this.#plan, this.#context.identity);
    if (ttftMs > 0) {
      response.write(head);
      this.#firstTokenAt = scheduler.now() + ttftMs;
      scheduler.schedule(this.#firstTokenAt, this.#pump);
      return;
    }
    this.#firstTokenAt = this.#context.charsPerMs > 0 ? scheduler.now() : 0;
    this.#pump(head);
  }

  readonly #pump = (prefix = ''): void => {
    const { response, scheduler, charsPerMs } = this.#context;
    if (response.destroyed || response.writableEnded) return;
    if (prefix === '' && response.writableNeedDrain) {
      response.once('drain', () => this.#pump());
      return;
    }
    let out = prefix;
    const now = charsPerMs > 0 ? scheduler.now() : 0;
    for (;;) {
      if (this.#faultStage !== 'done' && (this.#sawDelta || this.#plan.blocks.length === 0)) {
        const rest = this.#fault(out);
        if (rest === undefined) return;
        out = rest;
      }
      const event = this.#pending ?? this.#nextEvent();
      this.#pending = undefined;
      if (event === undefined) {
        this.#reportOutput();
        response.end(out);
        return;
      }
      if (event.chars > 0 && charsPerMs > 0) {
        const due = this.#firstTokenAt + this.#shiftMs + this.#charsSent / charsPerMs;
        if (due > now) {
          this.#pending = event;
          this.#reportOutput();
          if (out !== '') response.write(out);
          scheduler.schedule(due, () => this.#pump());
          return;
        }
      }
      out += event.text;
      if (event.chars > 0) {
        this.#charsSent += event.chars;
        this.#charsUnreported += event.chars;
        this.#sawDelta = true;
      }
    }
  };

  /** Reports the output characters of the text about to be written, if any. */
  #reportOutput(): void {
    if (this.#charsUnreported === 0) return;
    const chars = this.#charsUnreported;
    this.#charsUnreported = 0;
    this.#context.onOutput?.(chars);
  }

  #nextEvent(): SseEvent | undefined {
    const next = this.#events.next();
    return next.done === true ? undefined : next.value;
  }

  /** Runs the next fault stage. Returns the text to go on with, or undefined to stop here. */
  #fault(out: string): string | undefined {
    const { response, scheduler } = this.#context;
    const { faults } = this.#plan;
    // Whatever happens at the fault point, the output assembled so far goes out now (or,
    // past a stall or malformed event, with the next write): it has been generated.
    this.#reportOutput();
    if (this.#faultStage === 'stall') {
      this.#faultStage = 'rest';
      if (faults.stallMs > 0) {
        if (out !== '') response.write(out);
        this.#shiftMs += faults.stallMs;
        scheduler.schedule(scheduler.now() + faults.stallMs, () => this.#pump());
        return undefined;
      }
    }
    this.#faultStage = 'done';
    let text = faults.malformed ? out + MALFORMED_EVENT : out;
    if (faults.error !== undefined) {
      const { type, message, details } = faults.error;
      const { requestId } = this.#context;
      // The same shape as an error body, so the SDK reads `errorCode` from it too.
      const error = details === undefined ? { type, message } : { type, message, details };
      response.end(text + sseEvent('error', { type: 'error', error, request_id: requestId }));
      return undefined;
    }
    if (faults.disconnect) {
      this.#context.onDeliberateClose();
      // Destroy only after the bytes before the fault point reached the socket, so the
      // client sees message_start and the first delta, then a broken stream.
      if (text === '') setImmediate(() => response.destroy());
      else response.write(text, () => response.destroy());
      text = '';
      return undefined;
    }
    return text;
  }
}
