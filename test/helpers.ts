import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic, { type APIError } from '@anthropic-ai/sdk';
import { expect } from 'vitest';
import { Engine, type EngineOptions } from '../src/main/engine.js';
import { UsageError } from '../src/shared/errors.js';
import type { AgentEvent } from '../src/shared/events.js';
import { isSegmentName } from '../src/shared/journal/format.js';
import { type AgentHistory, histories, parseSegment } from '../src/shared/journal/reader.js';
import type { ContentBlockParam, MessageParam } from '../src/shared/provider/types.js';
import type { AgentResult } from '../src/shared/result.js';
import type { AnyTool, ToolContext } from '../src/shared/tools/types.js';
import {
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptStep,
  scriptBlock,
  startScriptedModel,
} from '../src/testing/index.js';

export const TEST_TOOLS = fileURLToPath(new URL('./fixtures/test-tools.mjs', import.meta.url));

export function tempDir(prefix = 'cohort-test-'): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A prompt that carries a script for the agent that receives it. */
export function scripted(steps: ScriptStep[], lead = 'Scripted task.'): string {
  return `${lead}\n\n${scriptBlock({ steps })}`;
}

/** A small workspace folder with a few files. */
export function makeWorkspace(): string {
  const root = tempDir('cohort-ws-');
  writeFileSync(path.join(root, 'alpha.ts'), 'export function alpha() {\n  return 1;\n}\n');
  writeFileSync(path.join(root, 'beta.md'), '# Beta\n\nSome notes.\n');
  return root;
}

export interface Rig {
  model: ScriptedModel;
  engine: Engine;
  logDir: string;
  close(): Promise<void>;
}

/**
 * The scripted model on real HTTP and a real engine with real workers, wired together. One worker
 * thread unless `options.threads` says more: each thread costs a start-up (test/README.md), and
 * a test about threads says how many it needs.
 */
export async function startRig(
  options: EngineOptions = {},
  modelOptions: ScriptedModelOptions = {},
): Promise<Rig> {
  const model = await startScriptedModel({ port: 0, ...modelOptions });
  const logDir = tempDir('cohort-logs-');
  const engine = await Engine.start({
    threads: 1,
    logDir,
    toolModules: [TEST_TOOLS],
    ...options,
    provider: {
      baseURL: model.url,
      model: 'cohort-scripted',
      maxRetries: 2,
      backoffBaseMs: 5,
      backoffMaxMs: 50,
      ...options.provider,
    },
  });
  return {
    model,
    engine,
    logDir,
    close: async () => {
      await engine.close();
      await model.close();
    },
  };
}

/** Every agent the journal in run folder `dir` holds (read synchronously, for assertions). */
export function readJournal(dir: string): Map<string, AgentHistory> {
  const files = readdirSync(dir)
    .filter(isSegmentName)
    .sort()
    .map((name) => path.join(dir, name));
  return histories(files.map((file) => parseSegment(file, readFileSync(file, 'utf8'))));
}

/** One agent's history in the journal; throws when its records are not there. */
export function readHistory(agent: { id: string; logDir?: string | undefined }): AgentHistory {
  if (agent.logDir === undefined) throw new Error('Expected a log folder, got none (not kept)');
  const history = readJournal(agent.logDir).get(agent.id);
  if (!history) throw new Error(`Expected ${agent.id} in the journal of ${agent.logDir}`);
  return history;
}

/**
 * An agent's committed transcript, from the journal: `agent` is a result, or an agent_list
 * entry (its `logDir` is the run folder; absent when the `logs` policy dropped its records).
 */
export function readTranscript(agent: { id: string; logDir?: string | undefined }): MessageParam[] {
  return readHistory(agent).messages;
}

/** Every tool_use in a transcript is answered by exactly one tool_result in the next message. */
export function assertToolUsesAnswered(messages: MessageParam[]): void {
  messages.forEach((message, index) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return;
    const uses = message.content
      .filter((block) => block.type === 'tool_use')
      .map((block) => block.id);
    if (uses.length === 0) return;
    const next = messages[index + 1];
    if (!next || typeof next.content === 'string')
      throw new Error(`tool_use at message ${index} unanswered`);
    const answered = next.content.flatMap((block) =>
      block.type === 'tool_result' ? [block.tool_use_id] : [],
    );
    if (JSON.stringify(answered) !== JSON.stringify(uses)) {
      throw new Error(
        `message ${index}: tool_use ${uses.join(',')} answered by ${answered.join(',')}`,
      );
    }
  });
}

/** Resolves with the first event for which `match` holds. */
export function nextEvent<T>(
  emitter: {
    once(event: string, listener: (value: T) => void): unknown;
    on(event: string, listener: (value: T) => void): unknown;
    off(event: string, listener: (value: T) => void): unknown;
  },
  name: string,
  match: (value: T) => boolean = () => true,
): Promise<T> {
  return new Promise((resolve) => {
    const listener = (value: T) => {
      if (!match(value)) return;
      emitter.off(name, listener);
      resolve(value);
    };
    emitter.on(name, listener);
  });
}

/** A latch the test opens; whatever awaits `opened` (a host tool, a test step) goes on then. */
export interface Latch<T = void> {
  open(value: T): void;
  readonly opened: Promise<T>;
}

export function latch<T = void>(): Latch<T> {
  let open!: (value: T) => void;
  const opened = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

/**
 * A host tool that blocks until the test opens it, or until its call's signal aborts. It runs on
 * the main thread, so a test can see each call start and each abort without touching a worker.
 */
export interface HostGate {
  readonly tool: AnyTool;
  /** Calls started so far. */
  readonly calls: number;
  /** Resolves once call `n` (1-based) has started. */
  entered(n?: number): Promise<void>;
  /** Resolves once call `n` saw its signal abort while it waited. */
  aborted(n?: number): Promise<void>;
  /** Lets every waiting call, and every later one, through. */
  open(): void;
}

export function hostGate(name: string): HostGate {
  const enteredLatches = new Map<number, Latch>();
  const abortedLatches = new Map<number, Latch>();
  const at = (latches: Map<number, Latch>, call: number): Latch => {
    let found = latches.get(call);
    if (!found) {
      found = latch();
      latches.set(call, found);
    }
    return found;
  };
  const gate = latch();
  let isOpen = false;
  let calls = 0;
  const tool: AnyTool = {
    name,
    description: 'Waits until the test opens it, or until the call is aborted.',
    inputSchema: { type: 'object' },
    run: (_input: unknown, context: ToolContext) => {
      const call = ++calls;
      at(enteredLatches, call).open();
      if (isOpen) return `${name} open`;
      return new Promise((resolve, reject) => {
        const onAbort = () => {
          at(abortedLatches, call).open();
          reject(new Error(`${name} aborted`));
        };
        if (context.signal.aborted) return onAbort();
        context.signal.addEventListener('abort', onAbort, { once: true });
        void gate.opened.then(() => {
          context.signal.removeEventListener('abort', onAbort);
          resolve(`${name} open`);
        });
      });
    },
  };
  return {
    tool,
    get calls() {
      return calls;
    },
    entered: (n = 1) => at(enteredLatches, n).opened,
    aborted: (n = 1) => at(abortedLatches, n).opened,
    open: () => {
      isOpen = true;
      gate.open();
    },
  };
}

/** Records the live events of a spawn (`onEvent`), and waits for one that matches. */
export interface EventLog {
  readonly events: AgentEvent[];
  readonly onEvent: (event: AgentEvent) => void;
  waitFor(match: (event: AgentEvent) => boolean): Promise<AgentEvent>;
  /** The result of the agent titled `title`, from its `agent-settle` event. */
  settled(title: string): Promise<AgentResult>;
  /** Ids of agents that were resumed on a fresh worker (`agent-resume`). */
  resumed(): string[];
}

export function eventLog(): EventLog {
  const events: AgentEvent[] = [];
  const waiters: { match: (event: AgentEvent) => boolean; resolve(event: AgentEvent): void }[] = [];
  const waitFor = (match: (event: AgentEvent) => boolean) =>
    new Promise<AgentEvent>((resolve) => {
      const seen = events.find(match);
      if (seen) resolve(seen);
      else waiters.push({ match, resolve });
    });
  return {
    events,
    onEvent: (event) => {
      events.push(event);
      for (const waiter of [...waiters]) {
        if (!waiter.match(event)) continue;
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(event);
      }
    },
    waitFor,
    settled: async (title) => {
      const event = await waitFor(
        (candidate) => candidate.type === 'agent-settle' && candidate.result.title === title,
      );
      if (event.type !== 'agent-settle') throw new Error('unreachable');
      return event.result;
    },
    resumed: () =>
      events.flatMap((event) => (event.type === 'agent-resume' ? [event.agentId] : [])),
  };
}

/**
 * The counts taken at the child ports say every result arrived exactly once: none was a
 * duplicate, and every one that arrived (from a worker, or made on main) was delivered.
 * `allFromWorkers`: no result was made on main either, so no worker was terminated or lost.
 */
export function expectResultsExactlyOnce(
  engine: Engine,
  options: { allFromWorkers?: boolean } = {},
): void {
  const stats = engine.stats;
  expect(stats.duplicateResults).toBe(0);
  expect(stats.delivered).toBe(stats.workerResults + stats.mainResults);
  if (options.allFromWorkers) expect(stats.mainResults).toBe(0);
}

/** The AgentResult the journal of run folder `dir` records for agent `id`. */
export function readResult(dir: string, id: string): AgentResult {
  const result = readJournal(dir).get(id)?.result;
  if (!result) throw new Error(`Expected a result of ${id} in the journal of ${dir}`);
  return result;
}

/** An `agent` tool call whose prompt carries a script for the child it starts. */
export function agentCall(title: string, steps: ScriptStep[], mode: 'sync' | 'async' = 'sync') {
  return {
    name: 'agent',
    input: {
      title,
      ...(mode === 'async' ? { mode } : {}),
      prompt: scripted(steps, `Task ${title}.`),
    },
  };
}

export const syncAgent = (title: string, steps: ScriptStep[]) => agentCall(title, steps, 'sync');
export const asyncAgent = (title: string, steps: ScriptStep[]) => agentCall(title, steps, 'async');

/** A message's content as blocks, whether it was written as a string or as blocks. */
export function contentBlocks(message: MessageParam): ContentBlockParam[] {
  return typeof message.content === 'string'
    ? [{ type: 'text', text: message.content }]
    : message.content;
}

/** The API error a request was refused with; fails the test if it was answered. */
export async function apiError(request: Promise<unknown>): Promise<APIError> {
  try {
    await request;
  } catch (error) {
    if (error instanceof Anthropic.APIError) return error;
    throw error;
  }
  throw new Error('Expected the request to be refused, got an answer');
}

/** A port nothing listens on: bound by a server that is then closed. */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The UsageError `run` throws; fails the test when it returns or throws something else. */
export function usageError(run: () => unknown): UsageError {
  try {
    run();
  } catch (error) {
    if (error instanceof UsageError) return error;
    throw error;
  }
  throw new Error('Expected a UsageError, got none');
}
