import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { type BenchEngine, type EngineName, startEngine } from '../bench/engines/engines.js';
import { runBench } from '../bench/run.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { ScriptedModel } from '../src/testing/index.js';
import { scripted, tempDir } from './helpers.js';

// What the bench's tests share: a stream that keeps what the runner prints, a run of the runner
// read back, and the checks every engine on another library must pass the same way.

/** A writable the bench runner prints to, keeping the text. */
export function collector(): { write(text: string): boolean; text(): string } {
  let text = '';
  return {
    write(chunk: string) {
      text += chunk;
      return true;
    },
    text: () => text,
  };
}

/** One run of `npm run bench`, as it ended. */
export interface BenchRun {
  code: number;
  stdout: string;
  stderr: string;
  /** Where `--out` and `--chart` wrote, in a temporary folder of the run's own. */
  out: string;
  chart: string;
  /** The JSON report, read back from `out`. */
  // biome-ignore lint/suspicious/noExplicitAny: the report is JSON read back from disk.
  report: any;
}

/** Runs the bench runner on `argv`, with its report and chart written to a temporary folder. */
export async function benchRun(argv: readonly string[]): Promise<BenchRun> {
  const dir = tempDir('cohort-bench-test-');
  const out = path.join(dir, 'report.json');
  const chart = path.join(dir, 'chart.svg');
  const stdout = collector();
  const stderr = collector();
  const code = await runBench([...argv, '--out', out, '--chart', chart], { stdout, stderr });
  const report = JSON.parse(readFileSync(out, 'utf8'));
  return { code, stdout: stdout.text(), stderr: stderr.text(), out, chart, report };
}

/**
 * An agent the model refuses with 429 at every attempt: the engine counts the library's own
 * retries as provider calls (`maxRetries` + 1 in all), and reports each refusal it retried as a
 * `provider-retry`, but not the last, which is the agent's failure.
 */
export async function expectRetriesCounted(engine: BenchEngine, maxRetries: number): Promise<void> {
  const events: AgentEvent[] = [];
  const result = await engine.run({
    prompt: scripted([{ error: { status: 429, retryAfterMs: 1 } }]),
    title: 'refused',
    maxSteps: 1,
    onEvent: (event) => events.push(event),
  });
  expect(result, engine.name).toMatchObject({ outcome: 'failed', code: 'rate_limited' });
  expect(result.usage.providerCalls, engine.name).toBe(maxRetries + 1);
  expect(
    events.map((event) => event.type === 'provider-retry' && event.code),
    engine.name,
  ).toEqual(Array.from({ length: maxRetries }, () => 'rate_limited'));
}

/** An engine of its own, closed while its one agent waits on `model`: the agent is cancelled. */
export async function expectCancelledOnClose(
  name: EngineName,
  model: ScriptedModel,
): Promise<void> {
  const closing = await startEngine(name, {
    provider: { baseURL: model.url, model: 'cohort-bench', maxRetries: 0 },
    logDir: tempDir(`cohort-bench-${name}-`),
    toolModules: [],
    concurrency: 1,
  });
  const parked = closing.run({
    prompt: scripted([{ delayMs: 60_000, reply: 'late' }]),
    title: 'parked',
    maxSteps: 1,
  });
  await new Promise((resolve) => model.once('request', resolve));
  await closing.close();
  expect(await parked, name).toMatchObject({ outcome: 'cancelled', reason: 'shutdown' });
}
