import { fixtures, LATIN1_TEXT, MULTIBYTE, scripted } from './transport-fixtures.js';
import type { Scenario } from './transport-run.js';
import {
  answer,
  garbageBytes,
  inLatin1,
  replay,
  resetAfterEvents,
  resetBeforeHeaders,
  silent,
  startServer,
  WHOLE_MESSAGE_JSON,
} from './transport-servers.js';

/**
 * The issue's list of scenarios for the transport conformance suite, its "Bad input" section
 * included (transport-conformance.test.ts runs each through both transports; the more remote
 * edges are in transport-edges.ts).
 */
export const ISSUE_SCENARIOS: Scenario[] = [
  {
    name: 'text',
    serve: scripted,
    steps: [{ text: 'Hello there, streaming world.' }],
    expected: {
      code: 'ok',
      calls: 1,
      turn: { text: 'Hello there, streaming world.', stopReason: 'end_turn', calls: [] },
    },
  },
  {
    name: 'several tool calls',
    serve: scripted,
    steps: [
      {
        text: 'Looking.',
        calls: [
          { name: 'lookup', input: { query: 'a long query', nested: { list: [1, 2, 3] } } },
          { name: 'lookup', input: { query: MULTIBYTE } },
        ],
        reply: { done: true },
      },
    ],
    expected: {
      code: 'ok',
      calls: 1,
      turn: {
        text: 'Looking.',
        stopReason: 'tool_use',
        calls: [
          {
            id: 'toolu_cohort_0_0',
            name: 'lookup',
            input: { query: 'a long query', nested: { list: [1, 2, 3] } },
          },
          { id: 'toolu_cohort_0_1', name: 'lookup', input: { query: MULTIBYTE } },
          { id: 'toolu_cohort_0_2', name: 'reply', input: { result: { done: true } } },
        ],
      },
    },
  },
  {
    name: '1-byte writes of multibyte text',
    serve: () => startServer(replay(fixtures().recorded, { bytesPerWrite: 1 })),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'malformed SSE data',
    serve: scripted,
    steps: [{ text: 'Some text before the fault.', malformed: true }],
    expected: { code: 'bad_response', calls: 2, says: /unparsable data in the event stream/ },
  },
  {
    name: 'a mid-stream overloaded_error event',
    serve: scripted,
    steps: [{ text: 'Partial text.', error: { status: 529, midStream: true } }],
    expected: { code: 'overloaded', calls: 2, says: /error event mid-stream: overloaded_error/ },
  },
  {
    name: 'a mid-stream api_error event',
    serve: scripted,
    steps: [{ text: 'Partial text.', error: { status: 500, midStream: true, message: 'oops' } }],
    expected: { code: 'server_error', calls: 2, says: /error event mid-stream: api_error: oops/ },
  },
  {
    name: '429 with retry-after, then an answer',
    serve: scripted,
    steps: [{ text: 'After the wait.', error: { status: 429, retryAfter: 1 }, faultAttempts: 1 }],
    // retry-after: 1 s, clipped to backoffMaxMs: the wait shows the header was read.
    config: { backoffMaxMs: 40 },
    expected: { code: 'ok', calls: 2, turn: { text: 'After the wait.' }, waits: [40] },
  },
  {
    name: '429 with retry-after-ms, then an answer',
    serve: scripted,
    steps: [
      { text: 'After the wait.', error: { status: 429, retryAfterMs: 30 }, faultAttempts: 1 },
    ],
    config: { backoffMaxMs: 40 },
    expected: { code: 'ok', calls: 2, turn: { text: 'After the wait.' }, waits: [30] },
  },
  {
    name: '529',
    serve: scripted,
    steps: [{ error: { status: 529, message: 'busy' } }],
    expected: {
      code: 'overloaded',
      status: 529,
      calls: 2,
      says: /answered 529: overloaded_error: busy/,
    },
  },
  {
    name: '500',
    serve: scripted,
    steps: [{ error: { status: 500, message: 'broken' } }],
    expected: {
      code: 'server_error',
      status: 500,
      calls: 2,
      says: /answered 500: api_error: broken/,
    },
  },
  {
    name: '400 with an error body',
    serve: scripted,
    steps: [{ error: { status: 400, message: 'messages.0: bad shape' } }],
    expected: {
      code: 'bad_request',
      status: 400,
      calls: 1,
      says: /answered 400: invalid_request_error: messages\.0: bad shape/,
    },
  },
  {
    name: 'a disconnect mid-stream',
    serve: scripted,
    steps: [{ text: 'This stream breaks off.', disconnect: true }],
    expected: { code: 'connection', calls: 2, says: /the connection to .* broke/ },
  },
  {
    name: 'a reset (RST) mid-stream',
    serve: () => startServer(resetAfterEvents(fixtures().recorded, 3)),
    expected: { code: 'connection', calls: 2, says: /the connection to .* broke/ },
  },
  {
    name: 'a stall longer than idleTimeoutMs',
    serve: scripted,
    steps: [{ text: 'Then nothing.', stall: { ms: 30_000 } }],
    config: { idleTimeoutMs: 100 },
    expected: { code: 'stalled', calls: 2, says: /no stream event from .* for 100 ms/ },
  },
  {
    name: 'a non-streaming JSON answer',
    serve: () => startServer(answer('application/json', WHOLE_MESSAGE_JSON)),
    expected: {
      code: 'bad_response',
      calls: 1,
      says: /answered 200 with content-type application\/json and a body that starts `\{"id":"msg_1"/,
    },
  },
  {
    name: 'HTTPS with a self-signed certificate',
    serve: () => startServer(replay(fixtures().recorded), { tls: fixtures().tls }),
    // The handshake fails, so no request reaches the server; final, so no retry.
    expected: {
      code: 'connection',
      calls: 1,
      requests: 0,
      says: /DEPTH_ZERO_SELF_SIGNED_CERT \(the server's TLS certificate is self-signed\)/,
    },
  },
  {
    name: 'garbage bytes as a 200 event stream',
    serve: () => startServer(answer('text/event-stream', garbageBytes(4096))),
    expected: { code: 'connection', calls: 2, says: /ended before its first event/ },
  },
  {
    name: 'a reset before the headers',
    serve: () => startServer(resetBeforeHeaders),
    expected: { code: 'connection', calls: 2, says: /cannot connect to .*ECONNRESET/ },
  },
  {
    name: 'no headers within requestTimeoutMs',
    serve: () => startServer(silent),
    config: { requestTimeoutMs: 200 },
    expected: { code: 'connection', calls: 2, says: /no response from .* within 200 ms/ },
  },
  {
    name: 'a latin1 body labelled utf-8',
    serve: () => startServer(replay(inLatin1(fixtures().recordedLatin1))),
    // Each latin1 letter is a byte no UTF-8 sequence can hold: both decoders put U+FFFD there.
    expected: {
      code: 'ok',
      calls: 1,
      turn: { text: LATIN1_TEXT.replace(/[^ -~]/g, '\ufffd') },
    },
  },
  {
    name: 'a UTF-16 body',
    serve: () => {
      const body = Buffer.from(fixtures().recorded.toString('utf8'), 'utf16le');
      const headers = { 'content-type': 'text/event-stream; charset=utf-16le' };
      return startServer(replay(body, { headers }));
    },
    expected: { code: 'connection', calls: 2, says: /ended before its first event/ },
  },
];
