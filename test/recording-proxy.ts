import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MessageParam } from '../src/shared/provider/types.js';
import { apiKeyOf } from '../src/testing/requests.js';
import { contentBlocks } from './helpers.js';

// A recording proxy in front of the scripted model: a test reads the very requests the model
// received (the system prompt, the tools offered, the reply tool's schema), still over real HTTP.

/** One Messages request as the scripted model received it. */
export interface SeenRequest {
  model: string;
  system?: string;
  messages: MessageParam[];
  tools?: { name: string; description: string; input_schema: Record<string, unknown> }[];
  /** The credential the request carried (its bearer token or `x-api-key`): set by the proxy. */
  credential?: string;
}

export interface RecordingProxy {
  readonly url: string;
  readonly requests: SeenRequest[];
  /** The requests of the agent whose prompt starts with `lead` (a marker unique to a test). */
  requestsOf(lead: string): SeenRequest[];
  close(): Promise<void>;
}

/** A plain HTTP proxy that keeps every `POST /v1/messages` body and passes it on unchanged. */
export async function recordingProxy(target: string): Promise<RecordingProxy> {
  const requests: SeenRequest[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const url = new URL(request.url ?? '/', target);
      if (request.method === 'POST' && url.pathname === '/v1/messages') {
        const seen = JSON.parse(body.toString('utf8')) as SeenRequest;
        seen.credential = apiKeyOf(request.headers);
        requests.push(seen);
      }
      const upstream = http.request(
        url,
        { method: request.method, headers: request.headers, agent: false },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, endToEndHeaders(answer.headers));
          answer.pipe(response);
        },
      );
      upstream.on('error', () => response.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    requestsOf: (lead) => requests.filter((request) => promptOf(request).startsWith(lead)),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A proxied response's headers without the hop-by-hop ones: those describe the proxy's own
 * connection upstream (opened per request, so `connection: close`), not the client's; passed
 * on, they would end the client's kept-alive connection under it, racing its next request.
 * `content-length` goes too when the proxy rewrites the body.
 */
export function endToEndHeaders(
  headers: http.IncomingHttpHeaders,
  { rewritten = false } = {},
): http.OutgoingHttpHeaders {
  const { connection: _c, 'keep-alive': _k, 'transfer-encoding': _t, ...rest } = headers;
  if (rewritten) delete rest['content-length'];
  return rest;
}

/** The text of a request's first user message: the prompt, which carries a test's marker. */
export function promptOf(request: SeenRequest): string {
  const first = request.messages[0];
  if (!first) return '';
  return contentBlocks(first)
    .map((block) => (block.type === 'text' ? block.text : ''))
    .join('\n');
}

/** One span line of a `--trace-file`, as the tests read it. */
export interface OtlpLine {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: Record<string, unknown> }[];
  status: { code?: number };
}
