import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Dashboard, serveDashboard } from '../src/main/dashboard/dashboard.js';
import { EventStream } from '../src/main/dashboard/event-stream.js';
import { UsageError } from '../src/shared/errors.js';
import { type Rig, scripted, startRig, syncAgent } from './helpers.js';

// The dashboard's server against a real engine, real workers and the scripted model: the token,
// the routes' refusals, the tree the state holds, the event stream, transcripts and cancel.

let rig: Rig | undefined;
let dashboard: Dashboard | undefined;

afterEach(async () => {
  await dashboard?.close();
  dashboard = undefined;
  await rig?.close();
  rig = undefined;
});

async function start(): Promise<{ rig: Rig; dashboard: Dashboard; base: string }> {
  rig = await startRig({ threads: 1, maxDepth: 2 });
  dashboard = await serveDashboard(rig.engine, { updateMs: 50 });
  return { rig, dashboard, base: `http://127.0.0.1:${dashboard.port}` };
}

function authed(token: string, init: RequestInit = {}): RequestInit {
  return { ...init, headers: { ...init.headers, authorization: `Bearer ${token}` } };
}

interface Row {
  id: string;
  title: string;
  parent: string | null;
  depth: number;
  status: string;
  outcome?: string;
  reason?: string;
  code?: string;
  usage: { inputTokens: number; outputTokens: number; steps: number; providerCalls: number };
  subtree: { agents: number; tokens: number };
}

interface State {
  agents: Row[];
  governor: { label: string; limit: number; inFlight: number }[];
  totals: { agents: number; running: number; settled: number; outcomes: Record<string, number> };
  failures: { code: string; count: number; reasons: { reason: string; agents: string[] }[] }[];
  run: { cancel: boolean };
}

async function stateOf(base: string, token: string): Promise<State> {
  const response = await fetch(`${base}/api/state`, authed(token));
  expect(response.status).toBe(200);
  return (await response.json()) as State;
}

/** Polls the state until `ready` holds of it (the engine's threads answer when they answer). */
async function stateWhen(
  base: string,
  token: string,
  ready: (state: State) => boolean,
): Promise<State> {
  for (let tries = 0; tries < 400; tries++) {
    const state = await stateOf(base, token);
    if (ready(state)) return state;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('Expected the dashboard state to reach the condition within 10 s');
}

/** A parent that starts one sync child which sleeps a minute. */
const parentOfSleeper = {
  title: 'parent',
  prompt: scripted([
    {
      calls: [
        syncAgent('sleeper', [
          { calls: [{ name: 'sleep', input: { ms: 60_000 } }] },
          { reply: 'woke' },
        ]),
      ],
    },
    { reply: 'done' },
  ]),
};

describe('the token', () => {
  it('refuses every route without it or with a wrong one, and takes it from a header, X-Cohort-Token or the query', async () => {
    const { dashboard, base } = await start();
    const token = dashboard.token;
    expect(dashboard.url).toBe(`http://127.0.0.1:${dashboard.port}/?token=${token}`);
    for (const pathname of [
      '/',
      '/api/state',
      '/api/events',
      '/api/agents/ag_x',
      `/s/${'0'.repeat(32)}/app.js`,
      '/nowhere',
    ]) {
      const none = await fetch(`${base}${pathname}`);
      expect(none.status, pathname).toBe(401);
      expect(await none.text()).not.toContain(token);
      const wrong = await fetch(`${base}${pathname}`, authed(`${token.slice(1)}0`));
      expect(wrong.status, pathname).toBe(401);
    }
    expect((await fetch(`${base}/api/state`, authed(token))).status).toBe(200);
    expect(
      (await fetch(`${base}/api/state`, { headers: { 'x-cohort-token': token } })).status,
    ).toBe(200);
    expect((await fetch(`${base}/api/state?token=${token}`)).status).toBe(200);
  });

  it('serves the page with the token and sets no cookie, which any server on this host would be sent', async () => {
    const { dashboard, base } = await start();
    const page = await fetch(`${base}/?token=${dashboard.token}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('set-cookie')).toBeNull();
    const html = await page.text();
    expect(html).toContain(`src="/s/${dashboard.token}/app.js"`);
    expect(html).not.toContain('__TOKEN_PATH__');
    expect((await fetch(`${base}/s/${dashboard.token}/app.js`)).status).toBe(200);
    expect((await fetch(`${base}/s/${dashboard.token}/..%2Fdashboard.ts`)).status).toBe(404);
  });

  it('serves JSON with a strict CSP and no caching, and names what it expected on a wrong route or method', async () => {
    const { dashboard, base } = await start();
    const response = await fetch(`${base}/api/state`, authed(dashboard.token));
    expect(response.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('cache-control')).toBe('no-store');
    const missing = await fetch(`${base}/api/nothing`, authed(dashboard.token));
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: string }).error).toMatch(
      /^Expected .*, got "\/api\/nothing"$/,
    );
    const posted = await fetch(`${base}/api/state`, authed(dashboard.token, { method: 'POST' }));
    expect(posted.status).toBe(405);
    expect(posted.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('requests that name nothing it knows', () => {
  it('answers 404 for an id that is not percent-encoded right, and 403 for a Host that is not this machine’s', async () => {
    const { dashboard, base } = await start();
    for (const [method, pathname] of [
      ['GET', '/api/agents/%E0%A4%A'],
      ['POST', '/api/agents/%ZZ/cancel'],
    ] as const) {
      const response = await fetch(`${base}${pathname}`, authed(dashboard.token, { method }));
      expect(response.status, pathname).toBe(404);
      expect(((await response.json()) as { error: string }).error).toMatch(
        /^Expected the id of an agent/,
      );
    }
    // fetch sets Host itself; a raw request names another.
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const socket = connect(dashboard.port, '127.0.0.1', () => {
        socket.write(
          `GET /api/state HTTP/1.1\r\nHost: rebound.example:${dashboard.port}\r\nAuthorization: Bearer ${dashboard.token}\r\nConnection: close\r\n\r\n`,
        );
      });
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
      });
      socket.on('end', () => resolve({ status: Number(text.split(' ')[1]), body: text }));
      socket.on('error', reject);
    });
    expect(answer.status).toBe(403);
    expect(answer.body).toContain("Expected a request to this machine's dashboard");
  });
});

describe('an observer that throws', () => {
  it('costs the spawn nothing: the caller gets its handle and the child runs', async () => {
    rig = await startRig({ threads: 1 });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      rig.engine.observe({
        spawned: () => {
          throw new Error('the view broke');
        },
      });
      const handle = rig.engine.spawn({ prompt: scripted([{ reply: 'fine' }]) });
      expect((await handle.result).outcome).toBe('complete');
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toContain('a spawn observer threw: the view broke');
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('the state', () => {
  it('shows a parent and its running child as a tree, and the subtree sums once the child settles', async () => {
    const { rig, dashboard, base } = await start();
    const handle = rig.engine.spawn({
      title: 'parent',
      prompt: scripted([
        { calls: [syncAgent('child', [{ text: 'working' }, { reply: 'child done' }])] },
        { calls: [{ name: 'sleep', input: { ms: 60_000 } }] },
        { reply: 'done' },
      ]),
    });
    // The parent's first step ends once its child has answered; it then sleeps a minute, so
    // its counted step can only have come from the step's own event, not from a result.
    const state = await stateWhen(
      base,
      dashboard.token,
      (state) =>
        state.agents.some((row) => row.title === 'child' && row.status === 'settled') &&
        state.agents.some((row) => row.id === handle.id && row.usage.steps >= 1),
    );
    const parent = state.agents.find((row) => row.id === handle.id)!;
    const child = state.agents.find((row) => row.title === 'child')!;
    expect(parent).toMatchObject({ parent: null, depth: 1, status: 'running' });
    expect(child).toMatchObject({ parent: handle.id, depth: 2, outcome: 'complete' });
    expect(child.usage.steps).toBe(2);
    expect(child.usage.inputTokens).toBeGreaterThan(0);
    expect(parent.status).toBe('running');
    expect(parent.usage.steps).toBe(1);
    const childTokens = child.usage.inputTokens + child.usage.outputTokens;
    expect(child.subtree).toMatchObject({ agents: 1, tokens: childTokens });
    expect(parent.subtree.agents).toBe(2);
    expect(parent.subtree.tokens).toBe(
      childTokens + parent.usage.inputTokens + parent.usage.outputTokens,
    );
    expect(state.totals).toMatchObject({
      agents: 2,
      running: 1,
      settled: 1,
      outcomes: { complete: 1 },
    });
    expect(state.governor).toHaveLength(1);
    expect(state.governor[0]!.label).toContain('cohort-scripted');
    expect(state.run.cancel).toBe(true);
    handle.cancel();
    await handle.result;
  });

  it('groups failures by code and reason, with the agents that failed', async () => {
    const { rig, dashboard, base } = await start();
    const failing = (index: number) =>
      rig.engine.spawn({
        title: `failing ${index}`,
        prompt: scripted([{ error: { status: 400, message: 'the request was refused here' } }]),
      });
    const results = await Promise.all([0, 1, 2].map((index) => failing(index).result));
    expect(results.map((result) => result.outcome)).toEqual(['failed', 'failed', 'failed']);
    const state = await stateOf(base, dashboard.token);
    expect(state.failures).toHaveLength(1);
    const [group] = state.failures;
    expect(group!.code).toBe(results[0]!.code);
    expect(group!.count).toBe(3);
    expect(group!.reasons).toHaveLength(1);
    expect(group!.reasons[0]!.reason).toContain('the request was refused here');
    expect(new Set(group!.reasons[0]!.agents)).toEqual(new Set(results.map((result) => result.id)));
    expect(state.totals.outcomes).toEqual({ failed: 3 });
  });

  it('serves an agent’s transcript from the journal, and 404 for an id the run does not know', async () => {
    const { rig, dashboard, base } = await start();
    const result = await rig.engine.run({
      title: 'reader',
      prompt: scripted([{ text: 'reading now' }, { reply: 'the answer' }], 'Read the file.'),
    });
    const response = await fetch(`${base}/api/agents/${result.id}`, authed(dashboard.token));
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      agent: Row;
      transcript: { messages: { role: string; content: unknown }[]; result: { outcome: string } };
    };
    expect(body.agent).toMatchObject({ id: result.id, outcome: 'complete' });
    expect(JSON.stringify(body.transcript.messages[0])).toContain('Read the file.');
    expect(JSON.stringify(body.transcript.messages)).toContain('reading now');
    expect(body.transcript.result.outcome).toBe('complete');
    const unknown = await fetch(`${base}/api/agents/ag_nobody`, authed(dashboard.token));
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: 'Expected the id of an agent of this run, got "ag_nobody"',
    });
  });

  it('serves no API key, even when a title, a reason and a transcript carry one', async () => {
    const secret = `sk-ant-api03-${'K'.repeat(40)}`;
    const { rig, dashboard, base } = await start();
    const result = await rig.engine.run({
      title: `leaky ${secret}`,
      prompt: scripted(
        [{ text: `echo ${secret}` }, { error: { status: 400, message: `bad ${secret}` } }],
        `Use ${secret}.`,
      ),
    });
    expect(result.outcome).toBe('failed');
    const state = await (await fetch(`${base}/api/state`, authed(dashboard.token))).text();
    const agent = await (
      await fetch(`${base}/api/agents/${result.id}`, authed(dashboard.token))
    ).text();
    expect(state).toContain('leaky [redacted]');
    expect(agent).toContain('[redacted]');
    for (const text of [state, agent]) expect(text).not.toContain(secret);
  });
});

describe('cancel', () => {
  it('cancels an agent and its subtree by POST; its result says cancelled with the dashboard as reason', async () => {
    const { rig, dashboard, base } = await start();
    const handle = rig.engine.spawn(parentOfSleeper);
    const state = await stateWhen(base, dashboard.token, (state) =>
      state.agents.some((row) => row.title === 'sleeper' && row.status === 'running'),
    );
    const child = state.agents.find((row) => row.title === 'sleeper')!;
    const response = await fetch(
      `${base}/api/agents/${handle.id}/cancel`,
      authed(dashboard.token, { method: 'POST' }),
    );
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ id: handle.id, cancelled: true });
    const result = await handle.result;
    expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'dashboard' });
    const after = await stateWhen(base, dashboard.token, (state) =>
      state.agents.every((row) => row.status === 'settled'),
    );
    expect(after.agents.find((row) => row.id === child.id)).toMatchObject({ outcome: 'cancelled' });
    const again = await fetch(
      `${base}/api/agents/${handle.id}/cancel`,
      authed(dashboard.token, { method: 'POST' }),
    );
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: string }).error).toContain(
      'which has settled (cancelled)',
    );
  });

  it('cancels nothing for a GET, a POST without the token, a POST from another origin or an unknown id', async () => {
    const { rig, dashboard, base } = await start();
    const handle = rig.engine.spawn(parentOfSleeper);
    await stateWhen(base, dashboard.token, (state) => state.agents.length === 2);
    const url = `${base}/api/agents/${handle.id}/cancel`;
    const get = await fetch(url, authed(dashboard.token));
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect((await fetch(url, { method: 'POST' })).status).toBe(401);
    const foreign = await fetch(
      url,
      authed(dashboard.token, { method: 'POST', headers: { origin: 'http://evil.example' } }),
    );
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { error: string }).error).toMatch(
      /^Expected a request from the dashboard page itself/,
    );
    // Its own origin is let through (the page's own POST).
    const unknown = await fetch(
      `${base}/api/agents/ag_nobody/cancel`,
      authed(dashboard.token, { method: 'POST', headers: { origin: base } }),
    );
    expect(unknown.status).toBe(404);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(handle.status).not.toBe('settled');
    const state = await stateOf(base, dashboard.token);
    expect(state.agents.every((row) => row.status !== 'settled')).toBe(true);
    handle.cancel();
    expect((await handle.result).cancelReason).toBe('user');
  });
});

describe('the event stream', () => {
  it('starts with a whole state, sends the rows that change as deltas, and ends with `end` when closed', async () => {
    const { rig, dashboard, base } = await start();
    const response = await fetch(`${base}/api/events?token=${dashboard.token}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const events = sseReader(response.body!);
    const first = await events.next();
    expect(first.name).toBe('state');
    expect((first.data as State).agents).toEqual([]);
    const result = await rig.engine.run({ title: 'streamed', prompt: scripted([{ reply: 'hi' }]) });
    let settledRow: Row | undefined;
    while (!settledRow) {
      const event = await events.next();
      expect(event.name).toBe('delta');
      settledRow = (event.data as { agents: Row[] }).agents.find(
        (row) => row.id === result.id && row.status === 'settled',
      );
    }
    expect(settledRow).toMatchObject({ title: 'streamed', outcome: 'complete' });
    await dashboard.close();
    let last = await events.next();
    while (last.name === 'delta') last = await events.next();
    expect(last.name).toBe('end');
    expect((await events.next()).name).toBe('closed');
  });
});

describe('a large first snapshot', () => {
  it('reaches a client that reads it slowly, with the deltas sent meanwhile after it', async () => {
    const stream = new EventStream();
    // 20 MB of rows, more than a client may have unread, sent as the first event.
    const rows = Array.from({ length: 40_000 }, (_, index) => ({
      id: `ag_${index}`,
      pad: 'x'.repeat(480),
    }));
    const server = createHttpServer((_request, response) => {
      stream.open(response, {}, { agents: rows });
      setTimeout(() => stream.send('delta', { agents: [{ id: 'ag_late' }] }), 200);
      setTimeout(() => stream.close(), 400);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const response = await fetch(`http://127.0.0.1:${port}/`);
      // Nothing is read for a second: the server's writes pile up.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const events = sseReader(response.body!);
      const first = await events.next();
      expect(first.name).toBe('state');
      expect((first.data as { agents: unknown[] }).agents).toHaveLength(40_000);
      expect(await events.next()).toEqual({ name: 'delta', data: { agents: [{ id: 'ag_late' }] } });
      expect((await events.next()).name).toBe('end');
    } finally {
      server.close();
    }
  });
});

describe('a client that stops reading', () => {
  it('is dropped once more than 16 MB wait for it past its first snapshot, and the others go on', async () => {
    const stream = new EventStream();
    const server = createHttpServer((_request, response) => {
      stream.open(response, {}, { agents: [] });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const stalled = await fetch(`http://127.0.0.1:${port}/`);
      const reading = await fetch(`http://127.0.0.1:${port}/`);
      const readingEvents = sseReader(reading.body!);
      expect((await readingEvents.next()).name).toBe('state');
      // 24 deltas of 1 MB while the first client reads nothing.
      const big = 'x'.repeat(1024 * 1024);
      for (let index = 0; index < 24; index++) {
        stream.send('delta', { index, big });
        expect(((await readingEvents.next()).data as { index: number }).index).toBe(index);
      }
      expect(stream.size).toBe(1);
      const stalledEvents = sseReader(stalled.body!);
      let last: { name: string } = { name: '' };
      let deltas = 0;
      try {
        for (
          last = await stalledEvents.next();
          last.name !== 'closed';
          last = await stalledEvents.next()
        ) {
          if (last.name === 'delta') deltas++;
        }
      } catch {
        last = { name: 'cut' };
      }
      expect(deltas).toBeLessThan(24);
      stream.close();
      expect((await readingEvents.next()).name).toBe('end');
    } finally {
      server.close();
    }
  });
});

describe('bad options', () => {
  it('refuses a port out of range and a port in use with what it expected', async () => {
    rig = await startRig({ threads: 1 });
    await expect(serveDashboard(rig.engine, { port: 70_000 })).rejects.toThrow(
      /^Expected `port` to be a whole number from 0 to 65535, got `70000`/,
    );
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      const error = await serveDashboard(rig.engine, { port }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toBe(
        `Expected a free port for the dashboard, got ${port}, which is in use on 127.0.0.1`,
      );
    } finally {
      holder.close();
    }
  });
});

/** Reads Server-Sent Events off a response body: `closed` once the stream ends. */
function sseReader(body: ReadableStream<Uint8Array>): {
  next(): Promise<{ name: string; data: unknown }>;
} {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  return {
    async next() {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const name = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (name && data !== undefined) return { name, data: JSON.parse(data) };
          continue;
        }
        const chunk = await reader.read();
        if (chunk.done) return { name: 'closed', data: null };
        buffer += chunk.value;
      }
    },
  };
}
