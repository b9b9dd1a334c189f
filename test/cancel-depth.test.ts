import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EngineOptions } from '../src/main/engine.js';
import type { ChildHandle } from '../src/main/runners/local/pool.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AnyTool } from '../src/shared/tools/types.js';
import {
  assertToolUsesAnswered,
  asyncAgent,
  contentBlocks,
  type EventLog,
  eventLog,
  expectResultsExactlyOnce,
  type HostGate,
  hostGate,
  type Rig,
  readResult,
  readTranscript,
  scripted,
  startRig,
  syncAgent,
  tempDir,
} from './helpers.js';

// Cancels must settle through the child's own worker, never through the grace timer that
// terminates a worker. The grace is set far beyond the test timeout: a cancel that hangs until
// the grace shows up as this test's own timeout, and a worker is never terminated behind our back.
const GRACE_MS = 600_000;
const TIMEOUT_MS = 30_000;

/** One thread (siblings share the worker), a grace far past the test timeout, these host tools. */
function openRig(maxDepth: number, hostTools: AnyTool[], extra: EngineOptions = {}): Promise<Rig> {
  return startRig({ threads: 1, maxDepth, cancelGraceMs: GRACE_MS, hostTools, ...extra });
}

let rig: Rig | undefined;
let proxy: RewritingProxy | undefined;

afterEach(async () => {
  await rig?.close();
  await proxy?.close();
  rig = undefined;
  proxy = undefined;
});

function toolResults(transcript: MessageParam[]): { content: string; isError: boolean }[] {
  return transcript.flatMap((message) =>
    message.role !== 'user'
      ? []
      : contentBlocks(message).flatMap((block) =>
          block.type === 'tool_result'
            ? [{ content: String(block.content), isError: block.is_error === true }]
            : [],
        ),
  );
}

function inboxHeaders(transcript: MessageParam[]): Record<string, unknown>[] {
  return transcript.flatMap((message) =>
    message.role !== 'user'
      ? []
      : contentBlocks(message).flatMap((block) => {
          if (block.type !== 'text') return [];
          try {
            const header = JSON.parse(block.text.split('\n')[0]!) as Record<string, unknown>;
            return header.kind === 'agent_result' ? [header] : [];
          } catch {
            return [];
          }
        }),
  );
}

/** The id in the `agent` receipt (async) for `title`, from a transcript's tool results. */
function receiptId(messages: MessageParam[], title: string): string | undefined {
  for (const result of toolResults(messages)) {
    try {
      const receipt = JSON.parse(result.content) as {
        id?: string;
        title?: string;
        status?: string;
      };
      if (receipt.title === title && receipt.status === 'started') return receipt.id;
    } catch {
      // Not a receipt.
    }
  }
  return undefined;
}

/**
 * An `onEvent` that records into `log` and cancels the child as soon as it has streamed the text of
 * step `step`. A step that is text only is then past its provider request and about to wait for
 * the child's own agents: the rest of a short unpaced response arrives in the same read and is
 * parsed before the cancel message is handled, so the cancel lands in the wait (every run on
 * 218f820 ended `empty` there). Wherever it lands, the child must settle `cancelled`.
 */
function cancellingAfterTextOf(
  step: number,
  log: EventLog,
  handle: () => ChildHandle,
): (event: AgentEvent) => void {
  let current = 0;
  let sent = false;
  return (event) => {
    log.onEvent(event);
    if (event.type === 'step-start') current = event.step;
    else if (event.type === 'text-delta' && current === step && !sent) {
      sent = true;
      handle().cancel('user');
    }
  };
}

/**
 * A sibling parked on the worker (every test here runs one thread) inside a host tool until the
 * test opens `gate`. A terminated worker would resume it: its `agent-resume` events tell.
 */
async function parkSibling(
  engine: Rig['engine'],
  gate: HostGate,
): Promise<{ handle: ChildHandle; log: EventLog }> {
  const log = eventLog();
  const handle = engine.spawn({
    title: 'sibling',
    prompt: scripted([{ calls: [{ name: gate.tool.name, input: {} }] }, { reply: 'sibling done' }]),
    onEvent: log.onEvent,
  });
  await gate.entered();
  return { handle, log };
}

/** Events of one agent (the log also holds its children's). */
function of(events: AgentEvent[], agentId: string): AgentEvent[] {
  return events.filter((event) => event.agentId === agentId);
}

describe('cancelling a child at maxDepth 2', () => {
  it(
    'blocked in a sync agent call: settles cancelled through its worker; the grandchild is cancelled parent; a sibling on that worker is not resumed',
    async () => {
      const hold = hostGate('hold');
      const siblingGate = hostGate('sibling_gate');
      rig = await openRig(2, [hold.tool, siblingGate.tool]);
      const sibling = await parkSibling(rig.engine, siblingGate);
      const log = eventLog();
      const child = rig.engine.spawn({
        title: 'child',
        prompt: scripted([
          { calls: [syncAgent('gc', [{ calls: [{ name: 'hold', input: {} }] }, { reply: 'x' }])] },
          { reply: 'never' },
        ]),
        onEvent: log.onEvent,
      });
      // The grandchild is inside its host tool; the child waits in its `agent` call.
      await hold.entered();
      expect(child.cancel('user')).toBe(true);
      const result = await child.result;
      expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user', text: '' });
      expect(await log.settled('gc')).toMatchObject({ outcome: 'cancelled', reason: 'parent' });
      // The grandchild's host work was aborted, not left running.
      await hold.aborted();
      siblingGate.open();
      expect(await sibling.handle.result).toMatchObject({
        outcome: 'complete',
        text: 'sibling done',
      });
      // Nobody lost their worker: no resume, and every result came from a worker.
      expect([...sibling.log.resumed(), ...log.resumed()]).toEqual([]);
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
      const transcript = readTranscript(result);
      assertToolUsesAnswered(transcript);
      expect(toolResults(transcript)).toEqual([{ content: expect.any(String), isError: true }]);
    },
    TIMEOUT_MS,
  );

  it(
    'blocked in a host tool: settles cancelled, the host call is aborted, a sibling on that worker is not resumed',
    async () => {
      const hold = hostGate('hold');
      const siblingGate = hostGate('sibling_gate');
      rig = await openRig(2, [hold.tool, siblingGate.tool]);
      const sibling = await parkSibling(rig.engine, siblingGate);
      const log = eventLog();
      const child = rig.engine.spawn({
        title: 'child',
        prompt: scripted([{ calls: [{ name: 'hold', input: {} }] }, { reply: 'never' }]),
        onEvent: log.onEvent,
      });
      await hold.entered();
      child.cancel('user');
      const result = await child.result;
      expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      await hold.aborted();
      siblingGate.open();
      expect(await sibling.handle.result).toMatchObject({
        outcome: 'complete',
        text: 'sibling done',
      });
      expect([...sibling.log.resumed(), ...log.resumed()]).toEqual([]);
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
      assertToolUsesAnswered(readTranscript(result));
    },
    TIMEOUT_MS,
  );

  it(
    'in a tool that runs in its worker: the step ends without waiting on the host for its inbox',
    async () => {
      const siblingGate = hostGate('sibling_gate');
      rig = await openRig(2, [siblingGate.tool]);
      const sibling = await parkSibling(rig.engine, siblingGate);
      const log = eventLog();
      const child = rig.engine.spawn({
        title: 'child',
        prompt: scripted([{ calls: [{ name: 'wait', input: {} }] }, { reply: 'never' }]),
        onEvent: log.onEvent,
      });
      await log.waitFor((event) => event.type === 'tool-call' && event.name === 'wait');
      child.cancel('user');
      const result = await child.result;
      expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      siblingGate.open();
      expect(await sibling.handle.result).toMatchObject({ outcome: 'complete' });
      expect([...sibling.log.resumed(), ...log.resumed()]).toEqual([]);
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
      const transcript = readTranscript(result);
      assertToolUsesAnswered(transcript);
      // The step committed with only its tool result: no inbox was taken in after the cancel.
      expect(transcript).toHaveLength(3);
    },
    TIMEOUT_MS,
  );

  it(
    'waiting for its own async agent (waitForResult): settles cancelled; the grandchild is cancelled parent',
    async () => {
      const hold = hostGate('hold');
      rig = await openRig(2, [hold.tool]);
      const log = eventLog();
      const child: ChildHandle = rig.engine.spawn({
        title: 'child',
        prompt: scripted([
          { calls: [asyncAgent('gc', [{ calls: [{ name: 'hold', input: {} }] }, { reply: 'x' }])] },
          { text: 'Waiting for gc.' },
          { reply: 'never' },
        ]),
        onEvent: cancellingAfterTextOf(2, log, () => child),
      });
      const result = await child.result;
      expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      expect(log.resumed()).toEqual([]);
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
      const transcript = readTranscript(result);
      assertToolUsesAnswered(transcript);
      const gcId = receiptId(transcript, 'gc')!;
      // Every result is in once the engine has closed; the grandchild went with its parent.
      await rig.engine.close();
      expect(readResult(rig.logDir, gcId)).toMatchObject({
        outcome: 'cancelled',
        reason: 'parent',
      });
    },
    TIMEOUT_MS,
  );

  it(
    'nudged, then waiting on its own async agent: settles cancelled, never empty',
    async () => {
      const hold = hostGate('hold');
      rig = await openRig(2, [hold.tool]);
      const log = eventLog();
      // Step 1 ends with text only and nothing to wait for: the one nudge. Step 2 starts an async
      // grandchild that never finishes by itself; step 3 ends with text only again, so the child
      // now waits for that grandchild, and is cancelled there.
      const child: ChildHandle = rig.engine.spawn({
        title: 'child',
        prompt: scripted([
          { text: 'Some prose, no reply.' },
          { calls: [asyncAgent('gc', [{ calls: [{ name: 'hold', input: {} }] }, { reply: 'x' }])] },
          { text: 'Waiting for gc.' },
          { reply: 'never' },
        ]),
        onEvent: cancellingAfterTextOf(3, log, () => child),
      });
      const result = await child.result;
      expect(result.outcome).toBe('cancelled');
      expect(result.reason).toBe('user');
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
      const transcript = readTranscript(result);
      assertToolUsesAnswered(transcript);
      // It had been nudged before it waited.
      expect(transcript.filter((message) => message.role === 'user')).toHaveLength(3);
    },
    TIMEOUT_MS,
  );

  it(
    'agent (async), agents and agent_cancel work over the bridge: the list shows the grandchild, the cancel is delivered into the next step',
    async () => {
      const hold = hostGate('hold');
      // Holds the child's second step until its grandchild is surely running (inside `hold`).
      const listGate = hostGate('list_gate');
      // The child's script cannot know its grandchild's id in advance: a proxy in front of the
      // scripted model puts the id from the receipt in place of a placeholder.
      const placeholder = 'ag_placeholder';
      proxy = await startRewritingProxy((body) => {
        if (!body.includes(placeholder)) return body;
        const id = receiptId((JSON.parse(body) as { messages: MessageParam[] }).messages, 'gc');
        return id === undefined ? body : body.replaceAll(placeholder, id);
      });
      rig = await openRig(2, [hold.tool, listGate.tool], { provider: { baseURL: proxy.url } });
      proxy.target = rig.model.url;
      const child = rig.engine.spawn({
        title: 'child',
        prompt: scripted([
          { calls: [asyncAgent('gc', [{ calls: [{ name: 'hold', input: {} }] }, { reply: 'x' }])] },
          {
            calls: [
              { name: 'list_gate', input: {} },
              { name: 'agents', input: {} },
            ],
          },
          { calls: [{ name: 'agent_cancel', input: { id: placeholder } }] },
          // Whether gc's result came with the cancel's step or is waited for, the next is a reply.
          { text: 'Waiting for gc.' },
          { reply: 'child done' },
        ]),
      });
      await hold.entered();
      listGate.open();
      const result = await child.result;
      expect(result).toMatchObject({ outcome: 'complete', text: 'child done' });
      const transcript = readTranscript(result);
      assertToolUsesAnswered(transcript);
      const gcId = receiptId(transcript, 'gc')!;
      expect(gcId).toMatch(/^ag_[a-z2-7]{12}$/);
      const [, , listed, cancelled] = toolResults(transcript);
      expect(JSON.parse(listed!.content)).toEqual([
        expect.objectContaining({ id: gcId, title: 'gc', status: 'running' }),
      ]);
      expect(JSON.parse(cancelled!.content)).toEqual({ id: gcId, wasLive: true });
      expect(inboxHeaders(transcript)).toEqual([
        expect.objectContaining({ id: gcId, title: 'gc', outcome: 'cancelled', reason: 'user' }),
      ]);
      await hold.aborted();
      expect(readResult(rig.logDir, gcId)).toMatchObject({
        outcome: 'cancelled',
        reason: 'user',
      });
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
    },
    TIMEOUT_MS,
  );
});

describe('cancelling at maxDepth 3', () => {
  it(
    'a cancel at the top reaches the great-grandchild (parent), through every level, without terminating a worker',
    async () => {
      const hold = hostGate('hold');
      const siblingGate = hostGate('sibling_gate');
      rig = await openRig(3, [hold.tool, siblingGate.tool]);
      const sibling = await parkSibling(rig.engine, siblingGate);
      const log = eventLog();
      const leaf = [{ calls: [{ name: 'hold', input: {} }] }, { reply: 'x' }];
      const mid = [{ calls: [syncAgent('leaf', leaf)] }, { reply: 'x' }];
      const top = rig.engine.spawn({
        title: 'top',
        prompt: scripted([{ calls: [syncAgent('mid', mid)] }, { reply: 'never' }]),
        onEvent: log.onEvent,
      });
      await hold.entered();
      top.cancel('user');
      expect(await top.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      expect(await log.settled('mid')).toMatchObject({ outcome: 'cancelled', reason: 'parent' });
      expect(await log.settled('leaf')).toMatchObject({ outcome: 'cancelled', reason: 'parent' });
      await hold.aborted();
      siblingGate.open();
      expect(await sibling.handle.result).toMatchObject({ outcome: 'complete' });
      expect([...sibling.log.resumed(), ...log.resumed()]).toEqual([]);
      expect(of(log.events, top.id).filter((event) => event.type === 'agent-settle')).toHaveLength(
        1,
      );
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
    },
    TIMEOUT_MS,
  );
});

describe('a cancel stops the rest of a tool batch', () => {
  it(
    'the call after the one the cancel interrupted is answered "was not run", and its effect never lands',
    async () => {
      const hold = hostGate('hold');
      rig = await openRig(1, [hold.tool]);
      const marker = path.join(tempDir(), 'marker.txt');
      const child = rig.engine.spawn({
        title: 'batch',
        prompt: scripted([
          {
            calls: [
              { name: 'hold', input: {} },
              { name: 'cleanup', input: { marker } },
            ],
          },
          { reply: 'never' },
        ]),
      });
      await hold.entered();
      child.cancel('user');
      const result = await child.result;
      expect(result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      expect(existsSync(marker)).toBe(false);
      const transcript = readTranscript(result);
      assertToolUsesAnswered(transcript);
      const [interrupted, skipped] = toolResults(transcript);
      expect(interrupted).toMatchObject({ isError: true });
      expect(skipped).toMatchObject({ isError: true });
      expect(skipped!.content).toMatch(/^`cleanup` was not run/);
      expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
    },
    TIMEOUT_MS,
  );
});

interface RewritingProxy {
  readonly url: string;
  /** Where requests go, e.g. the scripted model's url; set before the first request. */
  target: string | undefined;
  close(): Promise<void>;
}

/** A real HTTP proxy that passes each request body through `rewrite` on its way to `target`. */
async function startRewritingProxy(rewrite: (body: string) => string): Promise<RewritingProxy> {
  const state: { target: string | undefined } = { target: undefined };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = rewrite(Buffer.concat(chunks).toString('utf8'));
      const target = new URL(request.url ?? '/', state.target);
      const headers = { ...request.headers, host: target.host };
      delete headers.connection;
      delete headers['transfer-encoding'];
      headers['content-length'] = String(Buffer.byteLength(body));
      const upstream = http.request(target, { method: request.method, headers }, (reply) => {
        response.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(response);
      });
      upstream.on('error', () => response.destroy());
      // A client that aborts its request aborts the upstream one too.
      response.on('close', () => {
        if (!response.writableFinished) upstream.destroy();
      });
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get target() {
      return state.target;
    },
    set target(value) {
      state.target = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
