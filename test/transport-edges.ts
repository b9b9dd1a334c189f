import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { BYTE, coded, fixtures, MULTIBYTE, scripted } from './transport-fixtures.js';
import type { Scenario } from './transport-run.js';
import {
  brokenChunkAfterEvents,
  echoCredential,
  eventsThen,
  nowhere,
  redirect,
  redirectForever,
  replay,
  startServer,
  status,
  viaUrl,
  withBom,
  withLineEndings,
  withoutEventLines,
  withSseExtras,
} from './transport-servers.js';

/**
 * More scenarios for the transport conformance suite, past the list: more statuses and
 * error bodies, connection and URL faults, and the edges where a hand-written HTTP path most
 * easily parts from fetch's (content codings, redirects, 1xx, SSE line endings and fields, aborts).
 */
export const EDGE_SCENARIOS: Scenario[] = [
  {
    name: '502 with an HTML body (a proxy)',
    serve: () => startServer(status(502, 'text/html', '<html><h1>Bad gateway</h1></html>')),
    expected: {
      code: 'server_error',
      status: 502,
      calls: 2,
      says: /answered 502: <html><h1>Bad gateway<\/h1><\/html>/,
    },
  },
  {
    name: '429 for a spend limit (final)',
    serve: scripted,
    steps: [{ error: { status: 429, errorCode: 'enforced_spend_limit_reached' } }],
    expected: { code: 'quota_exhausted', status: 429, calls: 1, says: /spend limit is reached/ },
  },
  {
    name: '529 with x-should-retry: false (final)',
    serve: scripted,
    steps: [{ error: { status: 529, shouldRetry: false } }],
    expected: { code: 'overloaded', status: 529, calls: 1, says: /answered 529: overloaded_error/ },
  },
  {
    name: '401',
    serve: scripted,
    steps: [{ error: { status: 401, type: 'authentication_error', message: 'invalid x-api-key' } }],
    expected: {
      code: 'auth',
      status: 401,
      calls: 1,
      says: /the API key was refused .*authentication_error: invalid x-api-key/,
    },
  },
  {
    name: 'a 401 that echoes the credential',
    serve: () => startServer(echoCredential),
    expected: {
      code: 'auth',
      status: 401,
      calls: 1,
      says: /invalid credential: Bearer \[redacted\]\); check the key in ANTHROPIC_API_KEY/,
    },
  },
  {
    name: 'nothing listening',
    serve: () => nowhere(),
    expected: {
      code: 'connection',
      calls: 2,
      requests: 0,
      says: /cannot connect to .*: ECONNREFUSED/,
    },
  },
  {
    name: 'https to a plain-http server',
    serve: async () => {
      const target = await startServer(replay(fixtures().recorded));
      return viaUrl(target, target.url.replace('http:', 'https:'));
    },
    expected: {
      code: 'connection',
      calls: 1,
      requests: 0,
      says: /ERR_SSL_WRONG_VERSION_NUMBER \(TLS handshake failed/,
    },
  },
  {
    name: 'http to an https server',
    serve: async () => {
      const target = await startServer(replay(fixtures().recorded), { tls: fixtures().tls });
      return viaUrl(target, target.url.replace('https:', 'http:'));
    },
    expected: {
      code: 'connection',
      calls: 2,
      requests: 0,
      says: /cannot connect to http:.*: UND_ERR_SOCKET/,
    },
  },
  {
    name: 'a port fetch refuses (6000)',
    serve: () => nowhere(() => 'http://127.0.0.1:6000'),
    expected: {
      code: 'connection',
      calls: 1,
      requests: 0,
      says: /127\.0\.0\.1:6000\/v1\/messages: bad port/,
    },
  },
  {
    name: 'credentials in the base URL',
    serve: async () => {
      const target = await startServer(replay(fixtures().recorded));
      return viaUrl(target, target.url.replace('//', '//user:secret@'));
    },
    expected: {
      code: 'connection',
      calls: 1,
      requests: 0,
      says: /to http:\/\/127\.0\.0\.1:PORT\/v1\/messages: fetch refuses a URL with a user name/,
    },
  },
  {
    // Nobody asked for gzip (fetch does ask, undici.request does not): sent anyway.
    name: 'a gzip body with content-encoding: gzip',
    serve: () => startServer(replay(gzipSync(fixtures().recorded), { headers: coded('gzip') })),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'a deflate body',
    serve: () =>
      startServer(replay(deflateSync(fixtures().recorded), { headers: coded('deflate') })),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'a body coded br, then gzip',
    serve: () => {
      const body = gzipSync(brotliCompressSync(fixtures().recorded));
      return startServer(replay(body, { headers: coded('br, gzip') }));
    },
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'a body labelled gzip that is not',
    serve: () => startServer(replay(fixtures().recorded, { headers: coded('gzip') })),
    expected: {
      code: 'connection',
      calls: 2,
      says: /broke: Z_DATA_ERROR \(incorrect header check\)/,
    },
  },
  {
    name: 'a gzip body cut short',
    // Its last 16 bytes gone: the 8-byte trailer and the end of the data, message_stop with it.
    serve: () => {
      const body = gzipSync(fixtures().recorded);
      return startServer(replay(body.subarray(0, -16), { headers: coded('gzip') }));
    },
    expected: { code: 'connection', calls: 2, says: /ended before message_stop/ },
  },
  {
    name: 'an unknown content-encoding on a plain body',
    serve: () => startServer(replay(fixtures().recorded, { headers: coded('x-cohort-unknown') })),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'a 529 with a gzip error body',
    serve: () => {
      const body = gzipSync(
        JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'busy' } }),
      );
      return startServer(status(529, 'application/json', body, 'gzip'));
    },
    expected: {
      code: 'overloaded',
      status: 529,
      calls: 2,
      says: /answered 529: overloaded_error: busy/,
    },
  },
  {
    name: 'a 503 with an empty body',
    serve: () => startServer(status(503, 'text/plain', '')),
    expected: {
      code: 'server_error',
      status: 503,
      calls: 2,
      says: /answered 503: status code \(no body\)/,
    },
  },
  {
    // Bigger than any real error body: it must still be read whole to be parsed.
    name: 'a 400 with a 100 KiB JSON error body',
    serve: () => {
      const error = {
        type: 'invalid_request_error',
        message: `too long: ${'x'.repeat(100 * 1024)}`,
      };
      return startServer(status(400, 'application/json', JSON.stringify({ type: 'error', error })));
    },
    expected: {
      code: 'bad_request',
      status: 400,
      calls: 1,
      says: /answered 400: invalid_request_error: too long: x+…$/,
    },
  },
  {
    // Today's (sdk) answer; the SDK's stream refuses a response whose body is null.
    name: 'a 204 with no body',
    serve: () => startServer(status(204, 'text/event-stream', '')),
    expected: {
      code: 'bad_response',
      calls: 2,
      says: /Attempted to iterate over a response with no body/,
    },
  },
  {
    name: '103 Early Hints before the stream',
    serve: () => {
      const play = replay(fixtures().recorded);
      return startServer((request, response) => {
        response.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
        play(request, response);
      });
    },
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'a 308 redirect to the stream',
    serve: () => startServer(redirect(replay(fixtures().recorded))),
    expected: { code: 'ok', calls: 1, requests: 2, turn: { text: MULTIBYTE } },
  },
  {
    name: 'an event stream with no content-type',
    serve: () => startServer(replay(fixtures().recorded, { headers: {} })),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'CRLF line endings, 1-byte writes',
    serve: () => startServer(replay(withLineEndings(fixtures().recorded, '\r\n'), BYTE)),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'CR line endings, 1-byte writes',
    serve: () => startServer(replay(withLineEndings(fixtures().recorded, '\r'), BYTE)),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'comments, id and retry fields, data over two lines',
    serve: () => startServer(replay(withSseExtras(fixtures().recorded))),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'a UTF-8 byte order mark first',
    serve: () => startServer(replay(withBom(fixtures().recorded))),
    expected: { code: 'ok', calls: 1, turn: { text: MULTIBYTE } },
  },
  {
    name: 'data without event: lines',
    serve: () => startServer(replay(withoutEventLines(fixtures().recorded))),
    expected: { code: 'connection', calls: 2, says: /ended before its first event/ },
  },
  {
    name: 'a body cut before its last blank line',
    serve: () => startServer(replay(fixtures().recorded.subarray(0, -1))),
    expected: { code: 'connection', calls: 2, says: /ended before message_stop/ },
  },
  {
    name: 'an error event whose data is not JSON',
    serve: () =>
      startServer(replay(eventsThen(fixtures().recorded, 3, 'event: error\ndata: boom\n\n'))),
    expected: { code: 'server_error', calls: 2, says: /error event mid-stream: "boom"/ },
  },
  {
    name: 'a chunked body whose framing breaks after 3 events',
    serve: () => startServer(brokenChunkAfterEvents(fixtures().recorded, 3)),
    expected: { code: 'connection', calls: 2, says: /the connection to .* broke/ },
  },
  {
    name: 'more content-encodings than fetch allows',
    serve: () =>
      startServer(
        replay(fixtures().recorded, { headers: coded('gzip, gzip, gzip, gzip, gzip, gzip') }),
      ),
    expected: { code: 'connection', calls: 2, says: /too many content-encodings/ },
  },
  {
    name: 'redirects that never end',
    serve: () => startServer(redirectForever),
    expected: { code: 'connection', calls: 2, requests: 42, says: /redirect count exceeded/ },
  },
  {
    name: 'the caller aborts while waiting for headers',
    serve: scripted,
    steps: [{ text: 'Too late.', delayMs: 30_000 }],
    abortWhen: 'request',
    expected: { code: 'aborted', calls: 1, says: /^aborted: the caller gave up$/ },
  },
  {
    // 1-byte writes: when the caller aborts, no later event has arrived to be delivered still.
    name: 'the caller aborts at the first delta',
    serve: () => startServer(replay(fixtures().recorded, BYTE)),
    abortWhen: 'first-delta',
    expected: { code: 'aborted', calls: 1, says: /^aborted: the caller gave up$/ },
  },
];
