import { AsyncLocalStorage } from 'node:async_hooks';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import {
  type Context,
  type ContextManager,
  context as contexts,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EngineOptions } from '../src/main/engine.js';
import { ChildPool } from '../src/main/runners/local/pool.js';
import { RunningChild } from '../src/main/runners/local/running-child.js';
import { Session } from '../src/main/session.js';
import type { ChildSpec } from '../src/shared/child-spec.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import { runCli } from './cli-helpers.js';
import {
  asyncAgent,
  contentBlocks,
  eventLog,
  hostGate,
  type Rig,
  readTranscript,
  scripted,
  startRig,
  syncAgent,
  tempDir,
} from './helpers.js';
import type { OtlpLine } from './recording-proxy.js';

const MODEL = 'cohort-scripted';
const TIMEOUT_MS = 30_000;

/** A real SDK provider whose spans land in memory, as the task's users would wire one. */
function memoryProvider(): { provider: TracerProvider; spans(): Promise<ReadableSpan[]> } {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  return {
    provider,
    spans: async () => {
      await provider.forceFlush();
      return exporter.getFinishedSpans();
    },
  };
}

let rig: Rig | undefined;
let session: Session | undefined;
const cleanups: (() => void | Promise<void>)[] = [];

afterEach(async () => {
  await session?.close();
  await rig?.close();
  session = undefined;
  rig = undefined;
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  vi.restoreAllMocks();
});

/** One thread unless a test says: spans are main's, and every thread costs a start-up. */
async function openRig(options: EngineOptions): Promise<Rig> {
  rig = await startRig({ threads: 1, ...options });
  return rig;
}

const idOf = (span: ReadableSpan) => span.spanContext().spanId;
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const startMs = (span: ReadableSpan) => span.startTime[0] * 1e3 + span.startTime[1] / 1e6;

function childrenOf(spans: ReadableSpan[], parent: ReadableSpan): ReadableSpan[] {
  // Calls of one batch open their spans in the same millisecond, which the clock may not tell
  // apart: then their names (a tool call's names its call id, in call order) decide.
  return spans
    .filter((span) => parentOf(span) === idOf(parent))
    .sort((a, b) => startMs(a) - startMs(b) || a.name.localeCompare(b.name));
}

/**
 * The tree under `top`, one line per span, indented by depth, children in start order. A tool
 * call's line names its call id; a span that ended ERROR shows its `error.type`.
 */
function outline(spans: ReadableSpan[], top: ReadableSpan, depth = 0): string[] {
  const callId = top.attributes['gen_ai.tool.call.id'];
  const error = top.status.code === SpanStatusCode.ERROR ? ` !${top.attributes['error.type']}` : '';
  const line = `${'  '.repeat(depth)}${top.name}${callId === undefined ? '' : ` #${callId}`}${error}`;
  return [line, ...childrenOf(spans, top).flatMap((child) => outline(spans, child, depth + 1))];
}

/** The one `invoke_agent` span of agent `id`; fails when there are none or several. */
function agentSpan(spans: ReadableSpan[], id: string): ReadableSpan {
  const found = spans.filter(
    (span) => span.name.startsWith('invoke_agent ') && span.attributes['gen_ai.agent.id'] === id,
  );
  expect(found, `invoke_agent spans of ${id}`).toHaveLength(1);
  return found[0]!;
}

/** The `agent` tool calls of one assistant message: the call id by the child's title. */
function agentCalls(message: MessageParam | undefined): Map<string, string> {
  const calls = new Map<string, string>();
  for (const block of message ? contentBlocks(message) : []) {
    if (block.type === 'tool_use' && block.name === 'agent') {
      calls.set((block.input as { title: string }).title, block.id);
    }
  }
  return calls;
}

/** Every tool_use id of a transcript, in order. */
function toolUseIds(transcript: MessageParam[]): string[] {
  return transcript.flatMap((message) =>
    message.role === 'assistant'
      ? contentBlocks(message).flatMap((block) => (block.type === 'tool_use' ? [block.id] : []))
      : [],
  );
}

/**
 * Checks what every span of one agent carries: its `invoke_agent` attributes against its result,
 * each chat attempt's and each tool call's attributes, and that its chat spans add up to its usage.
 */
function expectAgentAttributes(
  spans: ReadableSpan[],
  agent: ReadableSpan,
  expected: { name: string; id: string; depth: number; mode?: string; usage: AgentResult['usage'] },
): void {
  const wholeInput = (usage: AgentResult['usage']) =>
    usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
  expect(agent.kind).toBe(SpanKind.INTERNAL);
  expect(agent.status.code).toBe(SpanStatusCode.UNSET);
  expect(agent.attributes).toMatchObject({
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.provider.name': 'anthropic',
    'gen_ai.agent.name': expected.name,
    'gen_ai.agent.id': expected.id,
    'gen_ai.request.model': MODEL,
    // The convention's input tokens include cached ones: the whole input of its requests.
    'gen_ai.usage.input_tokens': wholeInput(expected.usage),
    'gen_ai.usage.output_tokens': expected.usage.outputTokens,
    'cohort.depth': expected.depth,
    'cohort.outcome': 'complete',
  });
  if (expected.mode === undefined) expect(agent.attributes).not.toHaveProperty('cohort.mode');
  else expect(agent.attributes['cohort.mode']).toBe(expected.mode);
  const own = childrenOf(spans, agent);
  const chats = own.filter((span) => span.name.startsWith('chat '));
  let input = 0;
  let output = 0;
  for (const chat of chats) {
    expect(chat.name).toBe(`chat ${MODEL}`);
    expect(chat.kind).toBe(SpanKind.CLIENT);
    expect(chat.status.code).toBe(SpanStatusCode.UNSET);
    expect(chat.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': MODEL,
    });
    expect(chat.attributes['gen_ai.response.finish_reasons']).toEqual([
      expect.stringMatching(/^(tool_use|end_turn)$/),
    ]);
    input += chat.attributes['gen_ai.usage.input_tokens'] as number;
    output += chat.attributes['gen_ai.usage.output_tokens'] as number;
  }
  // One attempt per step here (nothing is retried): the attempts add up to the agent's usage.
  expect(chats).toHaveLength(expected.usage.providerCalls);
  expect([input, output]).toEqual([wholeInput(expected.usage), expected.usage.outputTokens]);
  expect(input).toBeGreaterThan(0);
  for (const tool of own.filter((span) => span.name.startsWith('execute_tool '))) {
    expect(tool.kind).toBe(SpanKind.INTERNAL);
    expect(tool.status.code).toBe(SpanStatusCode.UNSET);
    expect(tool.attributes).toEqual({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': tool.name.slice('execute_tool '.length),
      'gen_ai.tool.call.id': expect.any(String),
    });
  }
}

/** Records every `agent-settle` result of a session's events, by title, until it closes. */
function collectResults(of: Session): { byTitle: Map<string, AgentResult>; done: Promise<void> } {
  const byTitle = new Map<string, AgentResult>();
  const done = (async () => {
    for await (const event of of.events()) {
      if (event.type === 'agent-settle') byTitle.set(event.result.title, event.result);
    }
  })();
  return { byTitle, done };
}

describe('a traced session', () => {
  it(
    'hangs every agent under the tool call that spawned it, in one trace, with the GenAI attributes the results report',
    async () => {
      const memory = memoryProvider();
      const { engine } = await openRig({ maxDepth: 2, tracerProvider: memory.provider });
      session = new Session(engine, { autoWake: false });
      const results = collectResults(session);
      const turn = await session.send(
        scripted([
          {
            calls: [
              syncAgent('mid', [
                { calls: [syncAgent('leaf', [{ reply: 'leaf done' }])] },
                { reply: 'mid done' },
              ]),
              asyncAgent('bg', [{ reply: 'bg done' }]),
            ],
          },
          { text: 'Started both.' },
        ]),
      );
      expect(turn.outcome).toBe('ready');
      await session.waitIdle();
      const rootTranscript = session.transcript;
      await session.close();
      await results.done;
      await engine.close();
      const spans = await memory.spans();

      const [mid, leaf, bg] = ['mid', 'leaf', 'bg'].map((title) => {
        const result = results.byTitle.get(title);
        if (!result) throw new Error(`Expected a result for ${title}, got none`);
        expect(result.outcome).toBe('complete');
        return result;
      }) as [AgentResult, AgentResult, AgentResult];
      const roots = spans.filter((span) => span.name === 'invoke_agent root');
      expect(roots).toHaveLength(1);
      const root = roots[0]!;
      expect(root.parentSpanContext).toBeUndefined();

      const rootCalls = agentCalls(rootTranscript[1]);
      const midCalls = agentCalls(readTranscript(mid)[1]);
      const [midReply] = toolUseIds(readTranscript(mid)).slice(-1);
      const [leafReply] = toolUseIds(readTranscript(leaf));
      const [bgReply] = toolUseIds(readTranscript(bg));
      const chat = `chat ${MODEL}`;
      expect(outline(spans, root)).toEqual([
        'invoke_agent root',
        `  ${chat}`,
        `  execute_tool agent #${rootCalls.get('mid')}`,
        '    invoke_agent mid',
        `      ${chat}`,
        `      execute_tool agent #${midCalls.get('leaf')}`,
        '        invoke_agent leaf',
        `          ${chat}`,
        `          execute_tool reply #${leafReply}`,
        `      ${chat}`,
        `      execute_tool reply #${midReply}`,
        `  execute_tool agent #${rootCalls.get('bg')}`,
        '    invoke_agent bg',
        `      ${chat}`,
        `      execute_tool reply #${bgReply}`,
        `  ${chat}`,
      ]);
      // Nothing outside that tree, one trace, every span ended.
      expect(spans).toHaveLength(16);
      expect(new Set(spans.map((span) => span.spanContext().traceId)).size).toBe(1);
      for (const span of spans) {
        expect(span.ended).toBe(true);
        expect(startMs(span)).toBeLessThanOrEqual(
          span.endTime[0] * 1e3 + span.endTime[1] / 1e6 + 1e-3,
        );
      }

      expectAgentAttributes(spans, root, { name: 'root', id: 'root', depth: 0, usage: turn.usage });
      for (const [result, depth, mode] of [
        [mid, 1, 'sync'],
        [leaf, 2, 'sync'],
        [bg, 1, 'async'],
      ] as const) {
        const span = agentSpan(spans, result.id);
        expect(span.name).toBe(`invoke_agent ${result.title}`);
        expectAgentAttributes(spans, span, {
          name: result.title,
          id: result.id,
          depth,
          mode,
          usage: result.usage,
        });
      }
      // The root's last step was text only: its attempt finished `end_turn`.
      const rootChats = childrenOf(spans, root).filter((span) => span.name === chat);
      expect(rootChats.map((span) => span.attributes['gen_ai.response.finish_reasons'])).toEqual([
        ['tool_use'],
        ['end_turn'],
      ]);
    },
    TIMEOUT_MS,
  );
});

/**
 * A context manager over AsyncLocalStorage, so `context.with` makes a span active: cohort needs
 * none, a user who wants spawns under their own span brings one (this is what such a user has).
 */
class StorageContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(context, () => fn.apply(thisArg, args));
  }

  bind<T>(context: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (...args: unknown[]) => this.with(context, target as never, undefined, ...args);
    return run as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#storage.disable();
    return this;
  }
}

describe('an agent spawned by the user’s code', () => {
  it(
    'hangs under the user’s active span, and starts a trace of its own outside one',
    async () => {
      contexts.setGlobalContextManager(new StorageContextManager());
      cleanups.push(() => contexts.disable());
      const memory = memoryProvider();
      const { engine } = await openRig({ tracerProvider: memory.provider });
      const userSpan = memory.provider.getTracer('app').startSpan('user work');
      const inside = contexts.with(trace.setSpan(contexts.active(), userSpan), () =>
        engine.spawn({ title: 'inside', prompt: scripted([{ reply: 'in' }]) }),
      );
      const outside = engine.spawn({ title: 'outside', prompt: scripted([{ reply: 'out' }]) });
      const [insideResult, outsideResult] = await Promise.all([inside.result, outside.result]);
      userSpan.end();
      const spans = await memory.spans();

      const insideSpan = agentSpan(spans, insideResult.id);
      expect(parentOf(insideSpan)).toBe(userSpan.spanContext().spanId);
      expect(insideSpan.spanContext().traceId).toBe(userSpan.spanContext().traceId);
      expect(outline(spans, insideSpan)).toEqual([
        'invoke_agent inside',
        `  chat ${MODEL}`,
        `  execute_tool reply #${toolUseIds(readTranscript(insideResult))[0]}`,
      ]);
      const outsideSpan = agentSpan(spans, outsideResult.id);
      expect(outsideSpan.parentSpanContext).toBeUndefined();
      expect(outsideSpan.spanContext().traceId).not.toBe(userSpan.spanContext().traceId);
    },
    TIMEOUT_MS,
  );
});

describe('how an agent ended shows on its spans', () => {
  it(
    'a provider refusal fails it ERROR with its code; a cancel keeps the status unset with the reason; a failed tool is a tool_error',
    async () => {
      const memory = memoryProvider();
      const { engine } = await openRig({ tracerProvider: memory.provider });
      const failing = engine.spawn({
        title: 'refused',
        prompt: scripted([{ error: { status: 400, message: 'no such thing' } }]),
      });
      const log = eventLog();
      const waiting = engine.spawn({
        title: 'waiting',
        prompt: scripted([{ calls: [{ name: 'wait' }] }, { reply: 'never' }]),
        onEvent: log.onEvent,
      });
      const throwing = engine.spawn({
        title: 'throwing',
        prompt: scripted([{ calls: [{ name: 'throw' }] }, { reply: 'went on' }]),
      });
      await log.waitFor((event) => event.type === 'tool-call' && event.name === 'wait');
      waiting.cancel('user');
      const [failed, cancelled, thrown] = await Promise.all([
        failing.result,
        waiting.result,
        throwing.result,
      ]);
      await engine.close();
      const spans = await memory.spans();

      expect(failed).toMatchObject({ outcome: 'failed', code: expect.any(String) });
      const failedSpan = agentSpan(spans, failed.id);
      expect(failedSpan.status.code).toBe(SpanStatusCode.ERROR);
      expect(failedSpan.attributes).toMatchObject({
        'error.type': failed.code,
        'cohort.outcome': 'failed',
      });
      const [attempt, ...more] = childrenOf(spans, failedSpan);
      expect(more).toEqual([]);
      expect(attempt?.name).toBe(`chat ${MODEL}`);
      expect(attempt?.status.code).toBe(SpanStatusCode.ERROR);
      expect(attempt?.attributes).toMatchObject({
        'error.type': 'bad_request',
        'http.response.status_code': 400,
      });

      expect(cancelled).toMatchObject({ outcome: 'cancelled', reason: 'user' });
      const cancelledSpan = agentSpan(spans, cancelled.id);
      expect(cancelledSpan.status.code).toBe(SpanStatusCode.UNSET);
      expect(cancelledSpan.attributes).toMatchObject({
        'cohort.outcome': 'cancelled',
        'cohort.cancel_reason': 'user',
      });
      expect(cancelledSpan.attributes).not.toHaveProperty('error.type');
      expect(childrenOf(spans, cancelledSpan).map((span) => span.name)).toEqual([
        `chat ${MODEL}`,
        'execute_tool wait',
      ]);

      expect(thrown).toMatchObject({ outcome: 'complete', text: 'went on' });
      const thrownSpan = agentSpan(spans, thrown.id);
      expect(thrownSpan.status.code).toBe(SpanStatusCode.UNSET);
      const tool = childrenOf(spans, thrownSpan).find((span) => span.name === 'execute_tool throw');
      expect(tool?.status.code).toBe(SpanStatusCode.ERROR);
      expect(tool?.attributes['error.type']).toBe('tool_error');
      for (const span of spans) expect(span.ended).toBe(true);
    },
    TIMEOUT_MS,
  );
});

describe('a worker that dies mid-run', () => {
  it(
    'a resumed agent keeps one invoke_agent span; the dead run’s open spans end ERROR worker_lost',
    async () => {
      const memory = memoryProvider();
      const gate = hostGate('sibling_gate');
      const { engine } = await openRig({
        threads: 1,
        maxCrashes: 1,
        hostTools: [gate.tool],
        tracerProvider: memory.provider,
      });
      // The sibling waits on main, in a host tool, while its worker dies under it.
      const log = eventLog();
      const sibling = engine.spawn({
        title: 'sibling',
        prompt: scripted([{ calls: [{ name: 'sibling_gate' }] }, { reply: 'sibling done' }]),
        onEvent: log.onEvent,
      });
      await gate.entered(1);
      const culprit = engine.spawn({
        title: 'culprit',
        prompt: scripted([{ calls: [{ name: 'crash' }] }]),
      });
      const culpritResult = await culprit.result;
      gate.open();
      const siblingResult = await sibling.result;
      await engine.close();
      const spans = await memory.spans();

      expect(culpritResult).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });
      expect(siblingResult).toMatchObject({ outcome: 'complete', text: 'sibling done' });
      expect(log.resumed()).toEqual([sibling.id]);

      // The resumed run runs its first step's tool again (its response was committed, so not its
      // request): a fresh span under the same invoke_agent.
      const siblingSpan = agentSpan(spans, siblingResult.id);
      expect(siblingSpan.status.code).toBe(SpanStatusCode.UNSET);
      const calls = toolUseIds(readTranscript(siblingResult));
      expect(outline(spans, siblingSpan)).toEqual([
        'invoke_agent sibling',
        `  chat ${MODEL}`,
        `  execute_tool sibling_gate #${calls[0]} !worker_lost`,
        `  execute_tool sibling_gate #${calls[0]}`,
        `  chat ${MODEL}`,
        `  execute_tool reply #${calls[1]}`,
      ]);
      for (const span of spans) expect(span.ended).toBe(true);
    },
    TIMEOUT_MS,
  );

  it(
    'an agent that fails with its worker: one invoke_agent span, ERROR worker_crashed; its open spans end ERROR worker_lost',
    async () => {
      const memory = memoryProvider();
      const { engine } = await openRig({
        threads: 1,
        maxCrashes: 1,
        tracerProvider: memory.provider,
      });
      const culprit = engine.spawn({
        title: 'culprit',
        prompt: scripted([{ calls: [{ name: 'crash' }] }]),
      });
      const result = await culprit.result;
      await engine.close();
      const spans = await memory.spans();

      expect(result).toMatchObject({ outcome: 'failed', code: 'worker_crashed' });
      const span = agentSpan(spans, result.id);
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.attributes['error.type']).toBe('worker_crashed');
      // The crash tool was running when its worker died (docs/TRACING.md: worker_lost).
      expect(outline(spans, span)).toEqual([
        'invoke_agent culprit !worker_crashed',
        `  chat ${MODEL}`,
        '  execute_tool crash #toolu_cohort_0_0 !worker_lost',
      ]);
      for (const each of spans) expect(each.ended).toBe(true);
    },
    TIMEOUT_MS,
  );
});

describe('without a tracerProvider', () => {
  it(
    'records nothing: no spec is traced, no span op crosses, a global provider gets no span',
    async () => {
      const global = memoryProvider();
      expect(trace.setGlobalTracerProvider(global.provider)).toBe(true);
      cleanups.push(() => trace.disable());
      // Pass-through spies: they only watch what main hands the pool and hears from workers.
      const spawns = vi.spyOn(ChildPool.prototype, 'spawn');
      const heard = vi.spyOn(RunningChild.prototype, 'receive');
      const { engine } = await openRig({ maxDepth: 2 });
      session = new Session(engine, { autoWake: false });
      const results = collectResults(session);
      await session.send(
        scripted([
          {
            calls: [
              syncAgent('mid', [
                { calls: [syncAgent('leaf', [{ calls: [{ name: 'echo' }] }, { reply: 'x' }])] },
                { reply: 'y' },
              ]),
              asyncAgent('bg', [{ reply: 'z' }]),
            ],
          },
          { text: 'Done.' },
        ]),
      );
      await session.waitIdle();
      await session.close();
      await results.done;
      await engine.close();

      expect([...results.byTitle.values()].map((result) => result.outcome)).toEqual([
        'complete',
        'complete',
        'complete',
      ]);
      const specs = spawns.mock.calls.map(([spec]) => spec as ChildSpec);
      expect(specs.map((spec) => spec.title).sort()).toEqual(['bg', 'leaf', 'mid']);
      for (const spec of specs) expect(spec).not.toHaveProperty('traced');
      const types = heard.mock.calls.map(([, message]) => message.type);
      expect(types.filter((type) => type === 'result')).toHaveLength(3);
      expect(types).not.toContain('trace');
      expect(await global.spans()).toEqual([]);
      // The global provider does record: the emptiness above is cohort's.
      trace.getTracer('probe').startSpan('probe').end();
      expect((await global.spans()).map((span) => span.name)).toEqual(['probe']);
    },
    TIMEOUT_MS,
  );
});

describe('the CLI', () => {
  it(
    '--trace-file writes one OTLP/JSON span per line, a whole tree; --otel-endpoint posts to /v1/traces',
    async () => {
      const posts: { method: string | undefined; url: string | undefined; body: string }[] = [];
      const collector = createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          posts.push({
            method: request.method,
            url: request.url,
            body: Buffer.concat(chunks).toString('utf8'),
          });
          response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        });
      });
      await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
      cleanups.push(() => new Promise<void>((resolve) => collector.close(() => resolve())));
      const { port } = collector.address() as AddressInfo;
      const file = path.join(tempDir('cohort-trace-'), 'trace.jsonl');

      // No provider in the environment: the built-in scripted model answers.
      const run = runCli([
        'run',
        scripted([{ calls: [syncAgent('helper', [{ reply: 'helped' }])] }, { text: 'All done.' }]),
        '--max-depth',
        '2',
        '--log-dir',
        tempDir(),
        '--trace-file',
        file,
        '--otel-endpoint',
        `http://127.0.0.1:${port}`,
      ]);
      const exit = await run.exit;
      expect(run.stderr()).not.toMatch(/could not|did not shut down/);
      expect(exit.code).toBe(0);

      const lines = readFileSync(file, 'utf8')
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as OtlpLine);
      for (const line of lines) {
        expect(line.traceId).toMatch(/^[0-9a-f]{32}$/);
        expect(line.spanId).toMatch(/^[0-9a-f]{16}$/);
        expect(typeof line.name).toBe('string');
        expect([1, 3]).toContain(line.kind);
        expect(line.startTimeUnixNano).toMatch(/^\d+$/);
        expect(line.endTimeUnixNano).toMatch(/^\d+$/);
        expect(BigInt(line.endTimeUnixNano) >= BigInt(line.startTimeUnixNano)).toBe(true);
        expect(Array.isArray(line.attributes)).toBe(true);
        for (const attribute of line.attributes) {
          expect(typeof attribute.key).toBe('string');
          expect(Object.keys(attribute.value)).toHaveLength(1);
        }
        expect(line.status).toBeTypeOf('object');
      }
      const ids = new Set(lines.map((line) => line.spanId));
      expect(ids.size).toBe(lines.length);
      const orphans = lines.filter(
        (line) => line.parentSpanId === undefined || !ids.has(line.parentSpanId),
      );
      expect(orphans.map((line) => line.name)).toEqual(['invoke_agent root']);
      expect(orphans[0]).not.toHaveProperty('parentSpanId');
      expect(new Set(lines.map((line) => line.traceId)).size).toBe(1);
      const names = lines.map((line) => line.name);
      expect(names.filter((name) => name.startsWith('invoke_agent')).sort()).toEqual([
        'invoke_agent helper',
        'invoke_agent root',
      ]);
      const helper = lines.find((line) => line.name === 'invoke_agent helper');
      expect(lines.find((line) => line.spanId === helper?.parentSpanId)?.name).toBe(
        'execute_tool agent',
      );

      expect(posts.length).toBeGreaterThan(0);
      for (const post of posts) expect([post.method, post.url]).toEqual(['POST', '/v1/traces']);
      const posted = posts.flatMap((post) =>
        (
          JSON.parse(post.body) as {
            resourceSpans: { scopeSpans: { spans: { spanId: string }[] }[] }[];
          }
        ).resourceSpans.flatMap((resource) =>
          resource.scopeSpans.flatMap((scope) => scope.spans.map((span) => span.spanId)),
        ),
      );
      expect(new Set(posted)).toEqual(ids);
    },
    TIMEOUT_MS,
  );
});
