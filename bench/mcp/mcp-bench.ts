/**
 * `npm run build && node dist/bench/mcp/mcp-bench.js`: MCP tool calls through one stdio server
 * (the tests' fixture server, written with the official SDK) from many agents on the worker
 * threads, and what the host bridge adds to one call. Results and reading: docs/BENCHMARKS.md,
 * "MCP tools".
 *
 * Throughput: AGENTS agents each make CALLS calls of one tool in one step, all at once; calls
 * per second are counted from the first call's start to the last call's answer (the tool-call
 * and tool-result events as main receives them), beside the same run with a host tool (the
 * bridge, no MCP) and a tool module's tool (in the worker, no bridge).
 * Latency: one agent makes SEQUENTIAL calls one per step; each call's time is its tool-call to
 * tool-result events on main, beside the same calls made on main directly (no bridge, no thread)
 * and a tool module's tool timed the same way (the events' own cost).
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Engine, type EngineOptions } from '../../src/main/engine.js';
import type { AgentEvent } from '../../src/shared/events.js';
import type { AnyTool } from '../../src/shared/tools/types.js';
import { scriptBlock, startScriptedModel } from '../../src/testing/index.js';
import { median } from '../common/stats.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const FIXTURE = `${ROOT}test/fixtures/mcp-server.mjs`;
const TEST_TOOLS = `${ROOT}test/fixtures/test-tools.mjs`;

const { values } = parseArgs({
  options: {
    agents: { type: 'string', default: '1000' },
    calls: { type: 'string', default: '10' },
    sequential: { type: 'string', default: '200' },
    threads: { type: 'string', default: '2' },
    'max-concurrency': { type: 'string', default: '16,64' },
  },
});
const AGENTS = Number(values.agents);
const CALLS = Number(values.calls);
const SEQUENTIAL = Number(values.sequential);
const THREADS = Number(values.threads);
const CAPS = String(values['max-concurrency']).split(',').map(Number);

const HOST_ECHO: AnyTool = {
  name: 'host_echo',
  description: 'Returns its input `value`.',
  inputSchema: { type: 'object', properties: { value: {} } },
  parallel: true,
  run: (input: { value?: unknown }) => input.value ?? 'ok',
};

const model = await startScriptedModel({ port: 0 });

async function withEngine<T>(
  maxConcurrency: number,
  run: (engine: Engine) => Promise<T>,
): Promise<T> {
  const options: EngineOptions = {
    threads: THREADS,
    logs: 'none',
    toolModules: [TEST_TOOLS],
    hostTools: [HOST_ECHO],
    mcpServers: { fx: { command: process.execPath, args: [FIXTURE], maxConcurrency } },
    provider: { baseURL: model.url, model: 'cohort-scripted' },
  };
  const engine = await Engine.start(options);
  try {
    return await run(engine);
  } finally {
    await engine.close();
  }
}

/** The fixture's `echo` takes `text`; the others take `value`. */
function inputOf(tool: string, text: string): Record<string, string> {
  return tool.startsWith('mcp__') ? { text } : { value: text };
}

function prompt(steps: unknown[]): string {
  return `Bench.\n\n${scriptBlock({ steps: steps as never })}`;
}

/** Calls per second of `tool` from AGENTS agents, CALLS calls each, in one step. */
async function throughput(
  engine: Engine,
  tool: string,
): Promise<{ perSecond: number; errors: number }> {
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  let errors = 0;
  const onEvent = (event: AgentEvent) => {
    if (event.type !== 'tool-call' && event.type !== 'tool-result') return;
    if (event.name !== tool) return;
    const now = performance.now();
    if (event.type === 'tool-call') first = Math.min(first, now);
    if (event.type === 'tool-result') {
      last = Math.max(last, now);
      if (event.isError) errors++;
    }
  };
  const calls = Array.from({ length: CALLS }, (_, index) => ({
    name: tool,
    input: inputOf(tool, `v${index}`),
  }));
  const text = prompt([{ calls }, { reply: 'done' }]);
  await Promise.all(
    Array.from({ length: AGENTS }, () =>
      engine.run({ prompt: text, onEvent, eventTypes: ['tool-call', 'tool-result'] }),
    ),
  );
  return { perSecond: (AGENTS * CALLS) / ((last - first) / 1000), errors };
}

/** Each call's time, tool-call to tool-result on main, for SEQUENTIAL calls one per step. */
async function eventLatency(engine: Engine, tool: string): Promise<number[]> {
  const started = new Map<string, number>();
  const times: number[] = [];
  const onEvent = (event: AgentEvent) => {
    if ((event.type === 'tool-call' || event.type === 'tool-result') && event.name !== tool) return;
    if (event.type === 'tool-call') started.set(event.callId, performance.now());
    if (event.type === 'tool-result')
      times.push(performance.now() - (started.get(event.callId) ?? 0));
  };
  const steps = Array.from({ length: SEQUENTIAL }, () => ({
    calls: [{ name: tool, input: inputOf(tool, 'x') }],
  }));
  await engine.run({
    prompt: prompt([...steps, { reply: 'done' }]),
    onEvent,
    maxSteps: SEQUENTIAL + 5,
  });
  return times;
}

/** The same calls made on main directly: the MCP round trip alone. */
async function directLatency(engine: Engine): Promise<number[]> {
  const tool = engine.hostTools.find((candidate) => candidate.name === 'mcp__fx__echo')!;
  const context = { signal: new AbortController().signal, agentId: 'bench', depth: 0 };
  const times: number[] = [];
  for (let index = 0; index < SEQUENTIAL; index++) {
    const start = performance.now();
    await tool.run({ text: 'x' }, context);
    times.push(performance.now() - start);
  }
  return times;
}

const ms = (value: number) => `${value.toFixed(2)} ms`;
console.log(
  `${AGENTS} agents × ${CALLS} calls, ${THREADS} threads; latency over ${SEQUENTIAL} calls`,
);
for (const cap of CAPS) {
  await withEngine(cap, async (engine) => {
    // A first run warms the threads, the server and the schemas' validators.
    await throughput(engine, 'mcp__fx__echo');
    const mcp = await throughput(engine, 'mcp__fx__echo');
    const host = await throughput(engine, 'host_echo');
    const local = await throughput(engine, 'echo');
    console.log(
      `maxConcurrency ${cap}: MCP ${Math.round(mcp.perSecond)} calls/s (${mcp.errors} errors), host tool ${Math.round(host.perSecond)}/s, module tool ${Math.round(local.perSecond)}/s`,
    );
  });
}
await withEngine(16, async (engine) => {
  await eventLatency(engine, 'mcp__fx__echo');
  const worker = median(await eventLatency(engine, 'mcp__fx__echo'));
  const host = median(await eventLatency(engine, 'host_echo'));
  const local = median(await eventLatency(engine, 'echo'));
  const direct = median(await directLatency(engine));
  console.log(
    `median per call: MCP from a worker ${ms(worker)}, MCP on main ${ms(direct)}, host tool from a worker ${ms(host)}, module tool ${ms(local)}`,
  );
  console.log(
    `the bridge adds about ${ms(host - local)} (host tool minus module tool); MCP from a worker minus on main: ${ms(worker - direct)}`,
  );
});
await model.close();
