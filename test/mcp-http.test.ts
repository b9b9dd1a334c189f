import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
// @ts-expect-error: the fixture is plain JavaScript, without types.
import { fixtureServer } from './fixtures/mcp-server.mjs';
import { type Rig, readTranscript, scripted, startRig } from './helpers.js';
import { allText, PATIENCE, resultText, toolResults } from './mcp-helpers.js';

const HEADER_SECRET = 'http-header-secret-9d81c0';

/**
 * The fixture server over Streamable HTTP, stateless: each request gets a server and a transport
 * of its own, as the SDK's stateless example does. Requests without the right header are refused.
 */
let server: http.Server;
let rig: Rig;

/**
 * The fixture server again, stateful: a session per client, kept in `sessions`. Clearing it is a
 * restart as the client sees it: its session id is answered 404.
 */
const sessions = new Map<string, StreamableHTTPServerTransport>();
let stateful: http.Server;

/**
 * The stateless fixture server again, for a server that dies mid-call: its connections cut while
 * a call's answer is awaited, as when its process is killed. `open` holds its POSTs unanswered.
 */
let flaky: http.Server;
const open = new Set<http.ServerResponse>();

/** A request served by a fixture server of its own, stateless. */
async function serveStateless(request: http.IncomingMessage, response: http.ServerResponse) {
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
}

beforeAll(async () => {
  flaky = http.createServer((request, response) => {
    if (request.method === 'POST') {
      open.add(response);
      response.on('close', () => open.delete(response));
    }
    void serveStateless(request, response);
  });
  await new Promise<void>((resolve) => flaky.listen(0, '127.0.0.1', resolve));
  server = http.createServer(async (request, response) => {
    if (request.headers.authorization !== `Bearer ${HEADER_SECRET}`) {
      response.writeHead(401).end();
      return;
    }
    await serveStateless(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  stateful = http.createServer(async (request, response) => {
    const id = request.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? sessions.get(id) : undefined;
    if (!transport) {
      if (id !== undefined) {
        response.writeHead(404).end();
        return;
      }
      const fresh = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (session) => {
          sessions.set(session, fresh);
        },
      });
      await (fixtureServer() as { connect(transport: unknown): Promise<void> }).connect(fresh);
      transport = fresh;
    }
    await transport.handleRequest(request, response);
  });
  await new Promise<void>((resolve) => stateful.listen(0, '127.0.0.1', resolve));
  process.env.COHORT_TEST_KEPT_PORT = String((stateful.address() as AddressInfo).port);
  rig = await startRig({
    threads: 1,
    mcpServers: {
      web: {
        type: 'http',
        url: `http://127.0.0.1:${port}/mcp`,
        headers: { Authorization: `Bearer ${HEADER_SECRET}` },
      },
      // No `type`: a `url` makes it an HTTP server, as in a file; `${VAR}` is expanded.
      kept: { url: `http://127.0.0.1:\${COHORT_TEST_KEPT_PORT}/mcp` } as never,
      flaky: { type: 'http', url: `http://127.0.0.1:${(flaky.address() as AddressInfo).port}/mcp` },
    },
  });
});

afterAll(async () => {
  delete process.env.COHORT_TEST_KEPT_PORT;
  await rig?.close();
  await new Promise((resolve) => server?.close(resolve));
  stateful?.closeAllConnections();
  await new Promise((resolve) => stateful?.close(resolve));
  flaky?.closeAllConnections();
  await new Promise((resolve) => flaky?.close(resolve));
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

  it('starts a new session when the server forgot its own, failing only the calls between', async () => {
    const echo = async (text: string) => {
      const result = await rig.engine.run({
        prompt: scripted([
          { calls: [{ name: 'mcp__kept__echo', input: { text } }] },
          { reply: 'x' },
        ]),
      });
      return toolResults(readTranscript(result))[0]!;
    };
    expect(await echo('before')).toMatchObject({ content: 'before' });
    sessions.clear();
    const lost = await echo('lost');
    expect(lost).toMatchObject({ is_error: true });
    expect(resultText(lost)).toMatch(/the call to MCP server `kept` failed: Streamable HTTP error/);
    await vi.waitFor(
      async () => expect(await echo('after')).toMatchObject({ content: 'after' }),
      PATIENCE,
    );
  });

  it('fails a call whose server died mid-call as a tool error naming it, and recovers', async () => {
    const held = rig.engine.run({
      prompt: scripted([{ calls: [{ name: 'mcp__flaky__hold', input: {} }] }, { reply: 'x' }]),
    });
    // The call's answer is awaited on an open stream: the server now goes, mid-call.
    await vi.waitFor(() => expect(open.size).toBe(1), PATIENCE);
    flaky.closeAllConnections();
    const result = await held;
    expect(result.outcome).toBe('complete');
    const [lost] = toolResults(readTranscript(result));
    expect(lost).toMatchObject({ is_error: true });
    expect(resultText(lost!)).toMatch(/the call to MCP server `flaky` failed/);
    await vi.waitFor(async () => {
      const again = await rig.engine.run({
        prompt: scripted([
          { calls: [{ name: 'mcp__flaky__echo', input: { text: 'back' } }] },
          { reply: 'x' },
        ]),
      });
      expect(toolResults(readTranscript(again))[0]).toMatchObject({ content: 'back' });
    }, PATIENCE);
  });
});
