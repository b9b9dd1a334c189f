/**
 * The `peers` part of `npm run bench` and its engines on other libraries (the Vercel AI SDK,
 * LangChain), against the scripted model over real HTTP: each engine plays the bench's script
 * with what a cohort child is advertised, counts the library's own retries, and the part runs
 * every engine through every agent. Only content is checked, never a timing.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtPath } from '../bench/common/paths.js';
import { agentPrompt } from '../bench/common/scenario.js';
import { type BenchEngine, type EngineName, startEngine } from '../bench/engines/engines.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import {
  type BenchRun,
  benchRun,
  expectCancelledOnClose,
  expectRetriesCounted,
} from './bench-helpers.js';
import { contentBlocks, tempDir } from './helpers.js';
import { type RecordingProxy, recordingProxy, type SeenRequest } from './recording-proxy.js';

const LIBRARY_ENGINES: EngineName[] = ['ai-sdk', 'langchain'];
const WORK_TOOL = builtPath('bench/common/work-tool.js');

/** The system prompt of a request, whether sent as a string or as text blocks. */
function systemOf(request: SeenRequest): string {
  const system = request.system as string | { type: string; text: string }[] | undefined;
  if (system === undefined) return '';
  return typeof system === 'string' ? system : system.map((block) => block.text).join('\n');
}

describe('the ai-sdk and langchain engines against the scripted model', () => {
  let model: ScriptedModel;
  let proxy: RecordingProxy;
  const engines = new Map<string, BenchEngine>();

  beforeAll(async () => {
    model = await startScriptedModel({ port: 0 });
    proxy = await recordingProxy(model.url);
    for (const name of ['cohort', 'sdk-loop', ...LIBRARY_ENGINES] as EngineName[]) {
      engines.set(
        name,
        await startEngine(name, {
          provider: { baseURL: proxy.url, model: 'cohort-bench', maxRetries: 1 },
          logDir: tempDir('cohort-bench-peers-'),
          toolModules: [WORK_TOOL],
          concurrency: 1,
          threads: 1,
        }),
      );
    }
  });

  afterAll(async () => {
    for (const engine of engines.values()) await engine.close();
    await proxy.close();
    await model.close();
  });

  it('plays the bench script, sending the tools and system prompt that cohort sends', async () => {
    const seen = new Map<string, SeenRequest[]>();
    for (const [name, engine] of engines) {
      const lead = `Bench agent ${name}.`;
      const prompt = agentPrompt(0, { steps: 3, cpuMs: 1 }).replace('Bench agent 0.', lead);
      const result = await engine.run({ prompt, title: name, maxSteps: 5 });
      expect(result, name).toMatchObject({ outcome: 'complete', text: 'done' });
      expect(result.usage, name).toMatchObject({ providerCalls: 3, steps: 3 });
      seen.set(name, proxy.requestsOf(lead));
    }
    const cohort = seen.get('cohort')!;
    expect(cohort).toHaveLength(3);
    for (const name of ['sdk-loop', ...LIBRARY_ENGINES]) {
      const requests = seen.get(name)!;
      expect(requests, name).toHaveLength(3);
      for (const [index, request] of requests.entries()) {
        expect(request.tools, `${name} request ${index}`).toEqual(cohort[index]!.tools);
        expect(systemOf(request), `${name} request ${index}`).toBe(systemOf(cohort[index]!));
        // Each step answers the one before: the work tool's result, then the next request.
        expect(request.messages.length, `${name} request ${index}`).toBe(1 + 2 * index);
      }
      const last = requests[2]!.messages.at(-1)!;
      const results = contentBlocks(last).filter((block) => block.type === 'tool_result');
      expect(results, name).toHaveLength(1);
    }
  });

  it.each(LIBRARY_ENGINES)(
    "%s counts the library's own retries as provider calls, and reports the retried 429",
    (name) => expectRetriesCounted(engines.get(name)!, 1),
  );

  it.each(LIBRARY_ENGINES)('%s cancels a live agent on close', (name) =>
    expectCancelledOnClose(name, model),
  );
});

describe('npm run bench peers: one tiny round of every engine', () => {
  const AGENTS = 12;
  const ENGINES = ['cohort', 'sdk-loop', 'ai-sdk', 'langchain'];
  let run: BenchRun;

  beforeAll(async () => {
    run = await benchRun(
      `peers --agents ${AGENTS} --concurrency 4 --ttft-ms 5 --runs 1 --threads 1`.split(' '),
    );
  }, 120_000);

  it('exits 0 and prints a line per engine, the ratios to cohort and the outputs', () => {
    expect(run.code, run.stderr).toBe(0);
    const table = run.stdout;
    for (const engine of ENGINES) expect(table).toMatch(new RegExp(`^${engine} +${AGENTS}/`, 'm'));
    expect(table).toContain('governor on');
    expect(table).toContain(`report: ${run.out}`);
    expect(table).toContain(`chart: ${run.chart}`);
  });

  it('runs every agent of every engine through its three steps, each in its own process', () => {
    const data = run.report.parts.peers.data;
    expect(data).toMatchObject({ concurrency: 4, rounds: 1, engines: ENGINES, governor: true });
    expect(data.scenario).toMatchObject({ agents: AGENTS, steps: 3, ttftMs: 5, cpuMs: 0 });
    expect(data.measurements.map((item: { engine: string }) => item.engine)).toEqual(ENGINES);
    for (const measurement of data.measurements) {
      expect(measurement.outcomes.complete, measurement.engine).toBe(AGENTS);
      expect(measurement.steps, measurement.engine).toBe(AGENTS * 3);
      expect(measurement.providerCalls, measurement.engine).toBe(AGENTS * 3);
      expect(measurement.threads, measurement.engine).toBe(measurement.engine === 'cohort' ? 1 : 0);
    }
  });

  it('reports CPU per call, efficiency and wall for each engine, and each peer against cohort', () => {
    const data = run.report.parts.peers.data;
    expect(data.summary.map((item: { engine: string }) => item.engine)).toEqual(ENGINES);
    for (const item of data.summary) {
      expect(item.completed).toEqual([AGENTS]);
      for (const figure of ['cpuPerCallMs', 'efficiency', 'wallSeconds', 'modelCpuPerCallMs']) {
        const spread = item.figures[figure];
        expect(spread, `${item.engine}.${figure}`).not.toBeNull();
        expect(spread.min).toBe(spread.median);
        expect(spread.max).toBe(spread.median);
        expect(spread.median, `${item.engine}.${figure}`).toBeGreaterThan(0);
      }
      expect(item.figures.efficiency.median).toBeLessThanOrEqual(1);
    }
    expect(data.ratios.map((item: { engine: string }) => item.engine)).toEqual(ENGINES.slice(1));
    for (const item of data.ratios) {
      expect(item.cpuPerCallOverCohort, item.engine).toBeGreaterThan(0);
      expect(item.cohortEfficiencyOverPeer, item.engine).toBeGreaterThan(0);
      expect(item.wallOverCohort, item.engine).toBeGreaterThan(0);
    }
    const metrics = run.report.parts.peers.rows.map((row: { metric: string }) => row.metric);
    expect(metrics).toContain('cpu ms/call, langchain / cohort');
  });

  it('draws a bar per engine in each of the three panels', () => {
    const svg = readFileSync(run.chart, 'utf8');
    expect(svg.trimStart().startsWith('<svg')).toBe(true);
    for (const engine of ENGINES) {
      expect(svg.split(`>${engine}</text>`).length - 1, engine).toBe(3);
    }
  });
});
