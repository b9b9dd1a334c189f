import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { endToEndHeaders } from './recording-proxy.js';

// A proxy in front of the scripted model that stands in for a server with a prompt cache, whose
// figures a test knows in advance: it rewrites the usage of each Messages response as such a
// server would report it. The first request it passes writes a prefix of `prefixTokens` to the
// cache; every later one reads that prefix back. The request's whole input stays what the
// scripted model counted (cached or not): `input_tokens` becomes what is left of it uncached.
// With `prefixTokens: 0` it is a server that does not cache: every cache count is 0.

/** What the proxy reported, added up over every response it rewrote. */
export interface CacheReport {
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  responses: number;
}

export interface CachingProxy {
  readonly url: string;
  readonly reported: CacheReport;
  close(): Promise<void>;
}

export async function cachingProxy(
  target: string,
  options: { prefixTokens: number },
): Promise<CachingProxy> {
  const reported: CacheReport = {
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    responses: 0,
  };
  let written = false;
  /** The usage a caching server would report for a request of `whole` input tokens. */
  const split = (whole: number) => {
    const prefix = Math.min(whole, options.prefixTokens);
    const read = written ? prefix : 0;
    const write = written ? 0 : prefix;
    written = true;
    reported.inputTokens += whole - prefix;
    reported.cacheReadTokens += read;
    reported.cacheWriteTokens += write;
    reported.responses++;
    return {
      input_tokens: whole - prefix,
      cache_read_input_tokens: read,
      cache_creation_input_tokens: write,
      // Written with the 5-minute lifetime, whatever the upstream said of its own writes.
      cache_creation: { ephemeral_5m_input_tokens: write, ephemeral_1h_input_tokens: 0 },
    };
  };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', target);
      const rewrite = request.method === 'POST' && url.pathname === '/v1/messages';
      const upstream = http.request(
        url,
        { method: request.method, headers: request.headers, agent: false },
        (answer) => {
          const headers = endToEndHeaders(answer.headers, { rewritten: true });
          const body: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => body.push(chunk));
          answer.on('end', () => {
            let text = Buffer.concat(body).toString('utf8');
            if (rewrite && answer.statusCode === 200) {
              text = String(answer.headers['content-type']).startsWith('text/event-stream')
                ? rewriteStream(text, split)
                : rewriteJson(text, split);
            }
            response.writeHead(answer.statusCode ?? 502, headers);
            response.end(text);
          });
        },
      );
      upstream.on('error', () => response.destroy());
      upstream.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    reported,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Split = (whole: number) => Record<string, unknown>;

interface WireUsage {
  input_tokens: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

/** A request's whole input as the upstream counted it, whatever it said of its own cache. */
function wholeInput(usage: WireUsage): number {
  return (
    usage.input_tokens +
    (usage.cache_read_input_tokens ?? 0) +
    (usage.cache_creation_input_tokens ?? 0)
  );
}

/** The stream with `message_start`'s usage split, and `message_delta`'s cumulative counts alike. */
function rewriteStream(text: string, split: Split): string {
  let counts: Record<string, unknown> | undefined;
  return text
    .split('\n')
    .map((line) => {
      if (!line.startsWith('data: ')) return line;
      const data = JSON.parse(line.slice('data: '.length));
      if (data.type === 'message_start') {
        counts = split(wholeInput(data.message.usage));
        Object.assign(data.message.usage, counts);
      } else if (data.type === 'message_delta' && counts !== undefined) {
        Object.assign(data.usage, counts);
      } else return line;
      return `data: ${JSON.stringify(data)}`;
    })
    .join('\n');
}

function rewriteJson(text: string, split: Split): string {
  const data = JSON.parse(text);
  if (data.type !== 'message') return text;
  Object.assign(data.usage, split(wholeInput(data.usage)));
  return JSON.stringify(data);
}
