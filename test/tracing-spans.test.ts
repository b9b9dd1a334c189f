import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  type Context,
  context as contexts,
  type HrTime,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FileSpanExporter } from '../src/cli/tracing/trace-file.js';
import { startCliTracing } from '../src/cli/tracing/tracing.js';
import { cohortTracer, OtelSpans, openAgentSpan } from '../src/main/tracing/otel-spans.js';
import { closeChatSpan, openChatSpan } from '../src/shared/provider/chat-span.js';
import { type AssistantTurn, noUsage, type ProviderUsage } from '../src/shared/provider/types.js';
import { type AgentResult, emptyUsage } from '../src/shared/result.js';
import { TraceRecorder } from '../src/shared/trace/recorder.js';
import type { TraceOp, TraceSink } from '../src/shared/trace/types.js';
import type { OtlpLine } from './recording-proxy.js';

const AGENT = { id: 'a1', name: 'scout', model: 'claude-test', depth: 1 };

function memoryTracer(): { tracer: Tracer; spans(): ReadableSpan[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  return { tracer: cohortTracer(provider), spans: () => exporter.getFinishedSpans() };
}

function tempFile(name: string): string {
  return path.join(mkdtempSync(path.join(os.tmpdir(), 'cohort-trace-')), name);
}

function result(overrides: Partial<AgentResult>): AgentResult {
  return {
    id: 'a1',
    title: 'scout',
    outcome: 'complete',
    text: '',
    truncated: false,
    elapsedMs: 5,
    generation: 0,
    usage: { ...emptyUsage(), inputTokens: 120, outputTokens: 30 },
    ...overrides,
  };
}

function ms(time: HrTime): number {
  return time[0] * 1000 + time[1] / 1e6;
}

/** What a loop does with its sink in one step: a provider attempt, a tool, a nested span. */
function driveStep(sink: TraceSink): void {
  const chat = sink.open('chat claude-test', 'client', { 'gen_ai.operation.name': 'chat' });
  sink.close(chat, { 'gen_ai.usage.input_tokens': 10, 'gen_ai.response.finish_reasons': ['x'] });
  const tool = sink.open('execute_tool agent', 'internal', { 'gen_ai.tool.name': 'agent' });
  const inner = sink.open('execute_tool grep', 'internal', { 'gen_ai.tool.name': 'grep' }, tool);
  sink.close(inner, {}, 'tool_error');
  sink.close(tool);
}

/** Each span as comparable data, its parent by name (ids differ between two runs). */
function shape(spans: ReadableSpan[]) {
  const names = new Map(spans.map((span) => [span.spanContext().spanId, span.name]));
  return spans
    .map((span) => ({
      name: span.name,
      kind: span.kind,
      parent: names.get(span.parentSpanContext?.spanId ?? '') ?? null,
      attributes: span.attributes,
      status: span.status,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

describe('TraceRecorder → OtelSpans.apply', () => {
  it('reproduces the tree that direct open/close makes, with the ops’ times', () => {
    const direct = memoryTracer();
    const agentA = openAgentSpan(direct.tracer, contexts.active(), AGENT);
    driveStep(new OtelSpans(direct.tracer, agentA.context));
    agentA.end(result({}));

    const replayed = memoryTracer();
    const ops: TraceOp[] = [];
    driveStep(new TraceRecorder((op) => ops.push(op)));
    const agentB = openAgentSpan(replayed.tracer, contexts.active(), AGENT);
    const sink = new OtelSpans(replayed.tracer, agentB.context);
    for (const op of ops) sink.apply(op);
    agentB.end(result({}));

    expect(ops.map((op) => `${op.op} ${op.id}`)).toEqual([
      'open 1',
      'close 1',
      'open 2',
      'open 3',
      'close 3',
      'close 2',
    ]);
    const expected = shape(direct.spans());
    expect(expected.find((span) => span.name === 'execute_tool grep')).toMatchObject({
      parent: 'execute_tool agent',
      status: { code: SpanStatusCode.ERROR },
      attributes: { 'error.type': 'tool_error' },
    });
    expect(expected.find((span) => span.name === 'chat claude-test')).toMatchObject({
      kind: SpanKind.CLIENT,
      parent: 'invoke_agent scout',
    });
    expect(shape(replayed.spans())).toEqual(expected);

    for (const span of replayed.spans().filter((each) => !each.name.startsWith('invoke'))) {
      const id = ops.find((op) => op.op === 'open' && op.name === span.name)?.id;
      const open = ops.find((op) => op.op === 'open' && op.id === id);
      const close = ops.find((op) => op.op === 'close' && op.id === id);
      expect(ms(span.startTime)).toBeCloseTo(open?.time ?? Number.NaN, 3);
      expect(ms(span.endTime)).toBeCloseTo(close?.time ?? Number.NaN, 3);
    }
  });

  it('ignores ops for unknown ids, a second close and malformed ops', () => {
    const { tracer, spans } = memoryTracer();
    const sink = new OtelSpans(tracer, contexts.active());
    sink.apply({ op: 'close', id: 42, time: Date.now() });
    sink.close(7, { a: 1 }, 'boom');
    const id = sink.open('execute_tool x', 'internal', {});
    sink.close(id);
    sink.close(id, { late: true }, 'late');
    sink.apply({ op: 'close', id, error: 'late', time: Date.now() });
    // What a broken worker could post: the uplink checks only that `id` is a number.
    sink.apply({ op: 'bogus', id: 5 } as unknown as TraceOp);
    sink.apply({
      op: 'open',
      id: 6,
      name: 'odd kind',
      kind: 'toString',
      time: Number.NaN,
    } as never);
    sink.apply({ op: 'close', id: 6, attributes: 'nope', time: Date.now() } as never);
    expect(spans().map((span) => [span.name, span.kind, span.status.code])).toEqual([
      ['execute_tool x', SpanKind.INTERNAL, SpanStatusCode.UNSET],
      ['odd kind', SpanKind.INTERNAL, SpanStatusCode.UNSET],
    ]);
    expect(spans()[0]?.attributes).toEqual({});
  });
});

describe('OtelSpans.contextOf', () => {
  it('parents a spawned agent under the open tool span, else under the sink’s parent', () => {
    const { tracer, spans } = memoryTracer();
    const parent = openAgentSpan(tracer, contexts.active(), AGENT);
    const sink = new OtelSpans(tracer, parent.context);
    const tool = sink.open('execute_tool agent', 'internal', {});
    const closed = sink.open('execute_tool done', 'internal', {});
    sink.close(closed);

    const children = (['under tool', 'no id', 'closed', 'unknown'] as const).map((name) => {
      const id = { 'under tool': tool, 'no id': undefined, closed, unknown: 99 }[name];
      const child = openAgentSpan(tracer, sink.contextOf(id), { ...AGENT, id: name, name });
      child.end(result({}));
      return name;
    });
    sink.close(tool);
    parent.end(result({}));

    const byName = new Map(spans().map((span) => [span.name, span]));
    const spanIdOf = (name: string) => byName.get(name)?.spanContext().spanId;
    const traceId = byName.get('invoke_agent scout')?.spanContext().traceId;
    for (const name of children) {
      const child = byName.get(`invoke_agent ${name}`);
      expect(child?.spanContext().traceId).toBe(traceId);
      expect(child?.parentSpanContext?.spanId).toBe(
        name === 'under tool' ? spanIdOf('execute_tool agent') : spanIdOf('invoke_agent scout'),
      );
    }
  });
});

describe('OtelSpans.abandon', () => {
  it('ends every open span with ERROR and forgets the ids for a resumed worker', () => {
    const { tracer, spans } = memoryTracer();
    const sink = new OtelSpans(tracer, contexts.active());
    const at = Date.now();
    sink.apply({
      op: 'open',
      id: 1,
      name: 'execute_tool a',
      kind: 'internal',
      attributes: {},
      time: at,
    });
    sink.apply({
      op: 'open',
      id: 2,
      name: 'chat m',
      kind: 'client',
      attributes: {},
      parent: 1,
      time: at,
    });
    sink.apply({ op: 'open', id: 3, name: 'chat done', kind: 'client', attributes: {}, time: at });
    sink.apply({ op: 'close', id: 3, time: at + 1 });
    sink.abandon('worker_lost');

    const lost = spans().filter((span) => span.name !== 'chat done');
    expect(lost.map((span) => span.name)).toEqual(['chat m', 'execute_tool a']);
    for (const span of lost) {
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.attributes['error.type']).toBe('worker_lost');
    }
    expect(spans().find((span) => span.name === 'chat done')?.status.code).toBe(
      SpanStatusCode.UNSET,
    );

    // The resumed worker numbers from 1 again: a fresh span, not the abandoned one.
    sink.apply({ op: 'close', id: 2, time: at + 2 });
    sink.apply({
      op: 'open',
      id: 1,
      name: 'execute_tool b',
      kind: 'internal',
      attributes: {},
      time: at + 3,
    });
    sink.apply({ op: 'close', id: 1, time: at + 4 });
    expect(spans().map((span) => span.name)).toEqual([
      'chat done',
      'chat m',
      'execute_tool a',
      'execute_tool b',
    ]);
    expect(spans()[3]?.status.code).toBe(SpanStatusCode.UNSET);
  });
});

describe('chat spans', () => {
  function closed(outcome: Parameters<typeof closeChatSpan>[2]): ReadableSpan {
    const { tracer, spans } = memoryTracer();
    const sink = new OtelSpans(tracer, contexts.active());
    closeChatSpan(sink, openChatSpan(sink, 'claude-test'), outcome);
    expect(spans()).toHaveLength(1);
    return spans()[0] as ReadableSpan;
  }
  const turn = (usage: ProviderUsage): AssistantTurn => ({
    message: { role: 'assistant', content: [{ type: 'text', text: 'hi' }] },
    text: 'hi',
    calls: [],
    stopReason: 'end_turn',
    usage,
  });

  it('an attempt that read and wrote the cache says so, its input counting both', () => {
    const span = closed({
      ok: true,
      turn: turn({
        inputTokens: 12,
        outputTokens: 5,
        cacheReadTokens: 3000,
        cacheWriteTokens: 200,
      }),
    });
    expect(span.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': 'claude-test',
      'gen_ai.usage.input_tokens': 3212,
      'gen_ai.usage.cache_read.input_tokens': 3000,
      'gen_ai.usage.cache_creation.input_tokens': 200,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['end_turn'],
    });
  });

  it('an attempt with no cache use, or a failed one, has no cache attributes', () => {
    const plain = closed({ ok: true, turn: turn({ ...noUsage(), inputTokens: 12 }) });
    expect(plain.attributes['gen_ai.usage.input_tokens']).toBe(12);
    const failed = closed({
      ok: false,
      error: { code: 'overloaded', message: 'busy', status: 529 },
      usage: noUsage(),
    });
    expect(Object.keys(failed.attributes).filter((key) => key.includes('cache'))).toEqual([]);
    expect(Object.keys(plain.attributes).filter((key) => key.includes('cache'))).toEqual([]);
  });
});

describe('openAgentSpan', () => {
  function ended(agent: Parameters<typeof openAgentSpan>[2], outcome: AgentResult) {
    const { tracer, spans } = memoryTracer();
    const span = openAgentSpan(tracer, contexts.active(), agent);
    span.end(outcome);
    span.end(result({ outcome: 'failed', code: 'internal' }));
    expect(spans()).toHaveLength(1);
    return spans()[0] as ReadableSpan;
  }

  it('names the agent, its model and depth, and adds usage and outcome at the end', () => {
    const usage = { ...emptyUsage(), inputTokens: 7, outputTokens: 3, costUsd: 0.25 };
    const span = ended({ ...AGENT, mode: 'async' }, result({ usage, budgetExceeded: 'usd' }));
    expect(span.name).toBe('invoke_agent scout');
    expect(span.kind).toBe(SpanKind.INTERNAL);
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
    expect(span.attributes).toEqual({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.agent.name': 'scout',
      'gen_ai.agent.id': 'a1',
      'gen_ai.request.model': 'claude-test',
      'cohort.depth': 1,
      'cohort.mode': 'async',
      'gen_ai.usage.input_tokens': 7,
      'gen_ai.usage.output_tokens': 3,
      'cohort.outcome': 'complete',
      'cohort.usage.cost_usd': 0.25,
      'cohort.budget_exceeded': 'usd',
    });
    expect(span.instrumentationScope.name).toBe('cohort');
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(span.instrumentationScope.version).toBe(pkg.version);
  });

  it('counts cached input in the input tokens and names the cache reads, writes and saving', () => {
    const usage = {
      ...emptyUsage(),
      inputTokens: 7,
      outputTokens: 3,
      cacheReadTokens: 900,
      cacheWriteTokens: 40,
      costUsd: 0.25,
      cacheSavedUsd: 0.5,
    };
    const span = ended(AGENT, result({ usage }));
    expect(span.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 947,
      'gen_ai.usage.cache_read.input_tokens': 900,
      'gen_ai.usage.cache_creation.input_tokens': 40,
      'gen_ai.usage.output_tokens': 3,
      'cohort.usage.cache_saved_usd': 0.5,
    });
    // A count of 0 is not set: the span of an agent that only read has no write attribute.
    const reader = ended(AGENT, result({ usage: { ...usage, cacheWriteTokens: 0 } }));
    expect(reader.attributes['gen_ai.usage.input_tokens']).toBe(907);
    expect(reader.attributes).not.toHaveProperty('gen_ai.usage.cache_creation.input_tokens');
  });

  it('marks a failed agent ERROR with its code', () => {
    const span = ended(AGENT, result({ outcome: 'failed', code: 'worker_crashed', reason: 'x' }));
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes['error.type']).toBe('worker_crashed');
    expect(span.attributes['cohort.outcome']).toBe('failed');
    expect(span.attributes).not.toHaveProperty('cohort.mode');
  });

  it('leaves a cancelled agent’s status unset and keeps the reason', () => {
    const span = ended(AGENT, result({ outcome: 'cancelled', reason: 'ceiling' }));
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
    expect(span.attributes['cohort.cancel_reason']).toBe('ceiling');
    expect(span.attributes).not.toHaveProperty('error.type');
  });
});

function readLines(file: string): OtlpLine[] {
  const text = readFileSync(file, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as OtlpLine);
}

describe('FileSpanExporter', () => {
  it('writes one OTLP/JSON line per span, ids in hex, times in ns, root without a parent', async () => {
    const file = tempFile('trace.jsonl');
    const exporter = new FileSpanExporter(file);
    const provider = new TracerProvider({
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
    });
    const tracer = provider.getTracer('cohort');
    // A time a double holds exactly (x.5 ms), so the expected nanoseconds are exact too.
    const start = 1_700_000_000_123.5;
    const root = tracer.startSpan('invoke_agent scout', { startTime: start });
    const rootContext = openContext(root);
    const chat = tracer.startSpan(
      'chat m',
      { kind: SpanKind.CLIENT, startTime: start + 1, attributes: { n: 3, f: 0.5, ok: true } },
      rootContext,
    );
    const tool = tracer.startSpan(
      'execute_tool t',
      { startTime: start + 2, attributes: { s: 'x' } },
      openContext(chat),
    );
    expect(existsSync(file)).toBe(false);
    tool.setStatus({ code: SpanStatusCode.ERROR });
    tool.end(start + 3);
    chat.end(start + 4);
    root.end(start + 5);
    await provider.shutdown();

    const lines = readLines(file);
    expect(lines.map((line) => line.name)).toEqual([
      'execute_tool t',
      'chat m',
      'invoke_agent scout',
    ]);
    for (const line of lines) {
      for (const field of [
        'traceId',
        'spanId',
        'name',
        'kind',
        'startTimeUnixNano',
        'endTimeUnixNano',
        'attributes',
        'status',
      ]) {
        expect(line).toHaveProperty(field);
      }
      expect(line.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(line.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(line.startTimeUnixNano).toMatch(/^\d+$/);
      expect(line.endTimeUnixNano).toMatch(/^\d+$/);
      expect(JSON.stringify(line)).not.toContain('service.name');
      expect(line).not.toHaveProperty('resource');
    }
    const [toolLine, chatLine, rootLine] = lines as [OtlpLine, OtlpLine, OtlpLine];
    expect(rootLine).not.toHaveProperty('parentSpanId');
    expect(chatLine.parentSpanId).toBe(rootLine.spanId);
    expect(toolLine.parentSpanId).toBe(chatLine.spanId);
    expect(new Set(lines.map((line) => line.traceId)).size).toBe(1);
    expect(rootLine.startTimeUnixNano).toBe('1700000000123500000');
    expect(rootLine.endTimeUnixNano).toBe('1700000000128500000');
    expect([chatLine.kind, toolLine.kind]).toEqual([3, 1]);
    expect(toolLine.status.code).toBe(2);
    expect(chatLine.attributes).toEqual([
      { key: 'n', value: { intValue: 3 } },
      { key: 'f', value: { doubleValue: 0.5 } },
      { key: 'ok', value: { boolValue: true } },
    ]);
    expect(toolLine.attributes).toEqual([{ key: 's', value: { stringValue: 'x' } }]);
  });

  it('appends to what the file holds', async () => {
    const file = tempFile('trace.jsonl');
    for (const name of ['first', 'second']) {
      const provider = new TracerProvider({
        spanProcessors: [new SimpleSpanProcessor({ exporter: new FileSpanExporter(file) })],
      });
      provider.getTracer('cohort').startSpan(name).end();
      await provider.shutdown();
    }
    expect(readLines(file).map((line) => line.name)).toEqual(['first', 'second']);
  });
});

/** A context holding `span`: contexts are passed explicitly, as cohort does (no manager). */
function openContext(span: Span): Context {
  return trace.setSpan(contexts.active(), span);
}

interface Received {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A real local collector that records every request and answers with `status`. */
async function collector(
  status: number,
): Promise<{ url: string; requests: Received[]; close(): void }> {
  const requests: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      requests.push({
        method: request.method,
        url: request.url,
        headers: request.headers,
        body: Buffer.concat(chunks),
      });
      response.writeHead(status, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, requests, close: () => server.close() };
}

describe('startCliTracing', () => {
  const closers: (() => void)[] = [];
  afterEach(() => {
    for (const close of closers.splice(0)) close();
    vi.restoreAllMocks();
  });

  it('with a file only, writes the provider’s spans to it by shutdown', async () => {
    const file = tempFile('cli.jsonl');
    const tracing = await startCliTracing({ file });
    const tracer = cohortTracer(tracing.provider);
    const agent = openAgentSpan(tracer, contexts.active(), AGENT);
    const sink = new OtelSpans(tracer, agent.context);
    driveStep(sink);
    agent.end(result({}));
    await tracing.shutdown();
    await tracing.shutdown();
    const lines = readLines(file);
    expect(lines.map((line) => line.name).sort()).toEqual([
      'chat claude-test',
      'execute_tool agent',
      'execute_tool grep',
      'invoke_agent scout',
    ]);
    const root = lines.find((line) => line.name === 'invoke_agent scout');
    expect(lines.filter((line) => line.parentSpanId === root?.spanId)).toHaveLength(2);
  });

  it('sends the spans to a collector at /v1/traces', async () => {
    const server = await collector(200);
    closers.push(server.close);
    const tracing = await startCliTracing({ endpoint: server.url });
    const tracer = cohortTracer(tracing.provider);
    tracer.startSpan('one').end();
    tracer.startSpan('two').end();
    await tracing.shutdown();

    expect(server.requests.map((request) => [request.method, request.url])).toEqual([
      ['POST', '/v1/traces'],
    ]);
    const request = server.requests[0] as Received;
    // The OTLP/HTTP exporter of this package sends JSON.
    expect(request.headers['content-type']).toBe('application/json');
    const body = JSON.parse(request.body.toString('utf8')) as {
      resourceSpans: {
        resource: { attributes: { key: string; value: unknown }[] };
        scopeSpans: { spans: { name: string }[] }[];
      }[];
    };
    const spans = body.resourceSpans.flatMap((each) =>
      each.scopeSpans.flatMap((scope) => scope.spans),
    );
    expect(spans.map((span) => span.name).sort()).toEqual(['one', 'two']);
    expect(body.resourceSpans[0]?.resource.attributes).toContainEqual({
      key: 'service.name',
      value: { stringValue: 'cohort' },
    });
  });

  it('reports a collector that refuses the spans in one stderr line, without secrets', async () => {
    const server = await collector(400);
    closers.push(server.close);
    // A spy, not a mock of anything cohort runs: it only captures what shutdown prints.
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const endpoint = server.url.replace('http://', 'http://user:hunter2@');
    const tracing = await startCliTracing({ endpoint: `${endpoint}/base/?token=s3cret` });
    cohortTracer(tracing.provider).startSpan('lost').end();
    await expect(tracing.shutdown()).resolves.toBeUndefined();

    expect(server.requests.map((request) => request.url)).toEqual(['/base/v1/traces?token=s3cret']);
    expect(written).toEqual([
      `cohort: could not send traces to ${server.url}/base/v1/traces: HTTP 400 Bad Request\n`,
    ]);
  });

  it('reports a trace file it cannot write in one stderr line', async () => {
    const written: string[] = [];
    // A spy, not a mock of anything cohort runs: it only captures what shutdown prints.
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const file = path.join(tempFile('missing'), 'trace.jsonl');
    const tracing = await startCliTracing({ file });
    cohortTracer(tracing.provider).startSpan('lost').end();
    await expect(tracing.shutdown()).resolves.toBeUndefined();
    expect(existsSync(file)).toBe(false);
    expect(written).toHaveLength(1);
    const line = written[0] ?? '';
    expect(line.startsWith(`cohort: could not write the trace file ${file}: `)).toBe(true);
    expect(line).toContain('ENOENT');
    expect(line.indexOf('\n')).toBe(line.length - 1);
  });

  it('refuses a bad endpoint, an empty file name and nothing at all', async () => {
    await expect(startCliTracing({ endpoint: 'ftp://example.test' })).rejects.toThrow(
      'Expected `--otel-endpoint` to be an http or https URL, got `ftp://example.test` (string)',
    );
    await expect(startCliTracing({ file: ' ' })).rejects.toThrow(
      'Expected `--trace-file` to be a file path, got ` ` (string)',
    );
    await expect(startCliTracing({})).rejects.toThrow(
      'Expected `--otel-endpoint` or `--trace-file`',
    );
  });
});
