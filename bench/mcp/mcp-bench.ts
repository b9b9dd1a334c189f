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
 * Latency: a worker thread makes SEQUENTIAL calls one after another over a real host bridge
 * (`bridge-worker.ts`), timed where it calls, beside the same MCP calls made on main directly (no
 * bridge, no thread) and a host tool that returns at once (the bridge's round trip alone).
 */
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { Engine, type EngineOptions } from '../../src/main/engine.js';
import { HostBridge } from '../../src/main/host-bridge.js';
import type { AgentEvent } from '../../src/shared/events.js';
import type { AnyTool } from '../../src/shared/tools/types.js';
import { scriptBlock, startScriptedModel } from '../../src/testing/index.js';
import { builtPath } from '../common/paths.js';
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

/**
 * Each call's time as a worker thread sees it, over a real host bridge to main: SEQUENTIAL calls
 * of each tool one after another (`bridge-worker.ts`), after as many to warm up.
 */
async function bridgeLatency(engine: Engine): Promise<Record<string, number[]>> {
  const bridge = new HostBridge({
    hostTools: new Map(engine.hostTools.map((tool) => [tool.name, tool])),
    agentId: 'bench',
    depth: 1,
  });
  const tools = ['mcp__fx__echo', 'host_echo'].map((name) => ({ name, input: inputOf(name, 'x') }));
  const worker = new Worker(builtPath('bench/mcp/bridge-worker.js'), {
    workerData: { port: bridge.workerPort, count: SEQUENTIAL * 2, tools },
    transferList: [bridge.workerPort],
  });
  try {
    const [times] = (await once(worker, 'message')) as [Record<string, number[]>];
    return Object.fromEntries(
      Object.entries(times).map(([name, all]) => [name, all.slice(SEQUENTIAL)]),
    );
  } finally {
    await bridge.shutdown();
    await worker.terminate();
  }
}

/** The same MCP calls made on main directly: the round trip to the server alone. */
async function directLatency(engine: Engine): Promise<number[]> {
  const tool = engine.hostTools.find((candidate) => candidate.name === 'mcp__fx__echo')!;
  const context = { signal: new AbortController().signal, agentId: 'bench', depth: 0 };
  const times: number[] = [];
  for (let index = 0; index < SEQUENTIAL * 2; index++) {
    const start = performance.now();
    await tool.run({ text: 'x' }, context);
    times.push(performance.now() - start);
  }
  return times.slice(SEQUENTIAL);
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
  const direct = median(await directLatency(engine));
  const times = await bridgeLatency(engine);
  const mcp = median(times.mcp__fx__echo ?? []);
  const host = median(times.host_echo ?? []);
  console.log(
    `median per call: MCP on main ${ms(direct)}, MCP from a worker thread ${ms(mcp)}, a host tool that returns at once from a worker thread ${ms(host)}`,
  );
  console.log(
    `the bridge adds ${ms(mcp - direct)} to an MCP call (a bare bridge round trip: ${ms(host)})`,
  );
});
await model.close();
