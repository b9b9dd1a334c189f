import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: the fixture is plain JavaScript, without types.
import { fixtureServer } from './fixtures/mcp-server.mjs';
import { type Rig, readTranscript, scripted, startRig } from './helpers.js';
import { allText, resultText, toolResults } from './mcp-helpers.js';

const HEADER_SECRET = 'http-header-secret-9d81c0';

/**
 * The fixture server over Streamable HTTP, stateless: each request gets a server and a transport
 * of its own, as the SDK's stateless example does. Requests without the right header are refused.
 */
let server: http.Server;
let rig: Rig;

beforeAll(async () => {
  server = http.createServer(async (request, response) => {
    if (request.headers.authorization !== `Bearer ${HEADER_SECRET}`) {
      response.writeHead(401).end();
      return;
    }
    const transport = new StreamableHTTPServerTransport({});
    const mcp = fixtureServer() as {
      connect(transport: unknown): Promise<void>;
      close(): Promise<void>;
    };
    response.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  rig = await startRig({
    threads: 1,
    mcpServers: {
      web: {
        type: 'http',
        url: `http://127.0.0.1:${port}/mcp`,
        headers: { Authorization: `Bearer ${HEADER_SECRET}` },
      },
    },
  });
});

afterAll(async () => {
  await rig?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('an MCP server over Streamable HTTP', () => {
  it('serves its tools with the entry’s headers, which never show in a result or the journal', async () => {
    const result = await rig.engine.run({
      prompt: scripted([
        {
          calls: [
            { name: 'mcp__web__echo', input: { text: 'over http' } },
            { name: 'mcp__web__add', input: { a: 1, b: 1 } },
            { name: 'mcp__web__header', input: {} },
          ],
        },
        { reply: 'done' },
      ]),
    });
    expect(result.outcome).toBe('complete');
    const [echo, add, header] = toolResults(readTranscript(result)).map(resultText);
    expect(echo).toBe('over http');
    expect(JSON.parse(add!)).toEqual({ sum: 2 });
    expect(header).toBe('authorization: [redacted]');
    expect(allText(rig.logDir)).not.toContain(HEADER_SECRET);
  });
});
