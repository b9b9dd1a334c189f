/**
 * The `transport` part: raw streamed calls through the `undici` and the `sdk` transport
 * (src/shared/provider/transport) against the scripted model in its own process, side by side:
 * each case in a fresh measuring process, the two transports interleaved run by run. Figures: CPU
 * per call of the measuring process, calls/s, latency, and the ratio sdk / undici of CPU per call.
 */
import type { ProviderConfig } from '../../src/shared/provider/config.js';
import { TRANSPORT_NAMES, type TransportName } from '../../src/shared/provider/transport/types.js';
import { loadFlags, processCpuMs, startModelProcess } from '../common/model-process.js';
import type { BenchContext, BenchPart, BenchRow, PartReport } from '../common/part.js';
import { median } from '../common/stats.js';
import { formatCount, formatGrid, formatTable, formatValue } from '../common/table.js';
import { rotate } from '../concurrency/concurrency.js';
import { localModelEnv, measureInFreshProcess } from '../engines/fork.js';
import type { TransportJob, TransportMeasurement } from '../engines/jobs.js';

/** The part's own defaults, where the flags do not say otherwise (the issue's scenario). */
const DEFAULTS = { concurrency: 100, ttftMs: 0 };

/** Issue 11's target: the sdk transport spends at least this many times undici's CPU per call. */
export const TARGET_SDK_OVER_UNDICI = 3.5;

/** A measurement and the run (0-based) it belongs to. */
type RunMeasurement = TransportMeasurement & { run: number };

/** The figures of one case, or their medians over runs. */
export interface TransportFigures {
  transport: TransportName;
  concurrency: number;
  calls: number;
  runs: number;
  completed: number;
  /** CPU of the measuring process per call sent, ms. */
  cpuPerCallMs: number;
  callsPerSecond: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  eventsPerCall: number;
  /** CPU of the scripted model's process per call, ms; null when unknown. */
  modelCpuPerCallMs: number | null;
}

export interface TransportRatios {
  concurrency: number;
  /** sdk CPU per call / undici's, within each run, then the median. */
  cpuPerCallSdkOverUndici: number | null;
  /** undici calls/s / sdk's, the same way. */
  callsPerSecondUndiciOverSdk: number | null;
}

function figuresOf(measurement: TransportMeasurement): Omit<TransportFigures, 'runs'> {
  return {
    transport: measurement.transport,
    concurrency: measurement.concurrency,
    calls: measurement.calls,
    completed: measurement.completed,
    cpuPerCallMs: measurement.processCpuMs / Math.max(1, measurement.calls),
    callsPerSecond: measurement.completed / (measurement.makespanMs / 1000),
    latencyP50Ms: measurement.latencyMs.p50,
    latencyP99Ms: measurement.latencyMs.p99,
    eventsPerCall: measurement.events / Math.max(1, measurement.calls),
    modelCpuPerCallMs:
      measurement.modelCpuMs === null || measurement.modelCpuMs === undefined
        ? null
        : measurement.modelCpuMs / Math.max(1, measurement.calls),
  };
}

function medianOf(values: (number | null)[]): number | null {
  const present = values.filter((value): value is number => value !== null);
  return present.length === 0 ? null : median(present);
}

/** Medians per transport and level, and the per-run ratios' medians per level. */
export function summariseTransport(
  measurements: RunMeasurement[],
  levels: number[],
): { summary: TransportFigures[]; ratios: TransportRatios[] } {
  const summary: TransportFigures[] = [];
  for (const concurrency of levels) {
    for (const transport of TRANSPORT_NAMES) {
      const runs = measurements
        .filter((item) => item.transport === transport && item.concurrency === concurrency)
        .map(figuresOf);
      if (runs.length === 0) continue;
      const med = (pick: (item: (typeof runs)[number]) => number | null) =>
        medianOf(runs.map(pick));
      summary.push({
        transport,
        concurrency,
        calls: runs[0]!.calls,
        runs: runs.length,
        completed: med((item) => item.completed) ?? 0,
        cpuPerCallMs: med((item) => item.cpuPerCallMs) ?? Number.NaN,
        callsPerSecond: med((item) => item.callsPerSecond) ?? Number.NaN,
        latencyP50Ms: med((item) => item.latencyP50Ms) ?? Number.NaN,
        latencyP99Ms: med((item) => item.latencyP99Ms) ?? Number.NaN,
        eventsPerCall: med((item) => item.eventsPerCall) ?? Number.NaN,
        modelCpuPerCallMs: runs.some((item) => item.modelCpuPerCallMs === null)
          ? null
          : med((item) => item.modelCpuPerCallMs),
      });
    }
  }
  const ratios = levels.map((concurrency) => {
    const runIndexes = [...new Set(measurements.map((item) => item.run))];
    const pair = (run: number) => {
      const find = (transport: TransportName) => {
        const found = measurements.find(
          (item) =>
            item.run === run && item.concurrency === concurrency && item.transport === transport,
        );
        return found && figuresOf(found);
      };
      return { sdk: find('sdk'), undici: find('undici') };
    };
    const ratio = (numerator: number | undefined, denominator: number | undefined) =>
      numerator === undefined || denominator === undefined || denominator <= 0
        ? null
        : numerator / denominator;
    const pairs = runIndexes.map(pair);
    return {
      concurrency,
      cpuPerCallSdkOverUndici: medianOf(
        pairs.map((p) => ratio(p.sdk?.cpuPerCallMs, p.undici?.cpuPerCallMs)),
      ),
      callsPerSecondUndiciOverSdk: medianOf(
        pairs.map((p) => ratio(p.undici?.callsPerSecond, p.sdk?.callsPerSecond)),
      ),
    };
  });
  return { summary, ratios };
}

async function run(context: BenchContext): Promise<PartReport> {
  const { options, log } = context;
  const given = (flag: string) => options.given.includes(flag);
  const levels = given('concurrency') ? options.concurrency : [DEFAULTS.concurrency];
  const ttftMs = given('ttft-ms') ? options.ttftMs : DEFAULTS.ttftMs;
  const server = await startModelProcess(loadFlags({ ttftMs, tps: options.tps }));
  // No retries: a raw call either gets through or is counted as failed.
  const provider: Partial<ProviderConfig> = {
    baseURL: server.url,
    model: 'cohort-bench',
    maxRetries: 0,
  };
  const measurements: RunMeasurement[] = [];
  const startFailures: string[] = [];
  try {
    for (let runIndex = 0; runIndex < options.runs; runIndex++) {
      for (const concurrency of levels) {
        for (const transport of rotate(TRANSPORT_NAMES, runIndex)) {
          const job: TransportJob = {
            kind: 'transport',
            transport,
            calls: options.calls,
            concurrency,
            warmUp: Math.min(concurrency, options.calls),
            provider,
          };
          const modelBefore = processCpuMs(server.child.pid);
          const measurement = await measureInFreshProcess<TransportMeasurement>(job, {
            env: localModelEnv(),
            log,
            startFailures,
          });
          const modelAfter = processCpuMs(server.child.pid);
          measurement.modelCpuMs =
            modelBefore === undefined || modelAfter === undefined ? null : modelAfter - modelBefore;
          measurements.push({ ...measurement, run: runIndex });
          const figures = figuresOf(measurement);
          log(
            `bench: transport ${transport} at ${concurrency}, run ${runIndex + 1}/${options.runs}: ` +
              `${measurement.completed}/${measurement.calls} calls, ${figures.callsPerSecond.toFixed(0)} calls/s, ` +
              `${figures.cpuPerCallMs.toFixed(3)} cpu ms/call`,
          );
        }
      }
    }
  } finally {
    await server.stop();
  }
  return report({ measurements, levels, ttftMs, context, startFailures });
}

function report(input: {
  measurements: RunMeasurement[];
  levels: number[];
  ttftMs: number;
  context: BenchContext;
  startFailures: string[];
}): PartReport {
  const { options } = input.context;
  const { summary, ratios } = summariseTransport(input.measurements, input.levels);
  const rows: BenchRow[] = [];
  const add = (caseName: string, metric: string, value: number | null, unit: string) => {
    if (value === null || !Number.isFinite(value)) return;
    rows.push({ part: 'transport', case: caseName, metric, value, unit });
  };
  for (const item of summary) {
    const caseName = `${item.transport} at ${item.concurrency}`;
    add(caseName, 'cpu per call', item.cpuPerCallMs, 'ms');
    add(caseName, 'calls/s', item.callsPerSecond, 'calls/s');
  }
  for (const item of ratios) {
    const caseName = `concurrency ${item.concurrency}`;
    add(caseName, 'cpu per call, sdk / undici', item.cpuPerCallSdkOverUndici, '×');
    add(caseName, 'calls/s, undici / sdk', item.callsPerSecondUndiciOverSdk, '×');
  }
  const subtitle =
    `${options.calls} streamed calls per case after a warm-up of one call per lane; scripted model: ttft ${input.ttftMs} ms, ` +
    `tps ${options.tps || 'unpaced'}; medians of ${options.runs} run(s)`;
  const table = [
    subtitle,
    '',
    summaryTable(summary),
    '',
    ...targetLines(ratios),
    ...failureLines(input.measurements),
    '',
    formatTable(rows),
  ].join('\n');
  return {
    rows,
    table,
    data: {
      calls: options.calls,
      levels: input.levels,
      ttftMs: input.ttftMs,
      tps: options.tps,
      runs: options.runs,
      target: { cpuPerCallSdkOverUndici: TARGET_SDK_OVER_UNDICI },
      summary,
      ratios,
      startFailures: input.startFailures,
      measurements: input.measurements,
    },
  };
}

function summaryTable(summary: TransportFigures[]): string {
  const header = [
    'transport',
    'conc',
    'done',
    'calls/s',
    'p50 ms',
    'p99 ms',
    'events/call',
    'cpu ms/call',
    'model ms/call',
  ];
  const cells = summary.map((item) => [
    item.transport,
    String(item.concurrency),
    `${formatCount(item.completed)}/${item.calls}`,
    formatValue(item.callsPerSecond),
    formatValue(item.latencyP50Ms),
    formatValue(item.latencyP99Ms),
    formatValue(item.eventsPerCall),
    item.cpuPerCallMs.toFixed(3),
    item.modelCpuPerCallMs === null ? '—' : item.modelCpuPerCallMs.toFixed(3),
  ]);
  return formatGrid(
    header,
    cells,
    Array.from({ length: header.length - 1 }, (_, index) => index + 1),
  );
}

function targetLines(ratios: TransportRatios[]): string[] {
  return ratios.map((item) => {
    const value = item.cpuPerCallSdkOverUndici;
    const verdict =
      value === null ? 'not measured' : value >= TARGET_SDK_OVER_UNDICI ? 'met' : 'NOT met';
    return (
      `target at ${item.concurrency}: sdk / undici CPU per call ≥ ${TARGET_SDK_OVER_UNDICI}×; ` +
      `measured ${value === null ? '—' : `${value.toFixed(2)}×`}: ${verdict}`
    );
  });
}

function failureLines(measurements: RunMeasurement[]): string[] {
  const lines = measurements
    .filter((item) => item.failureReasons.length > 0)
    .map(
      (item) =>
        `not complete: ${item.transport} at ${item.concurrency} (run ${item.run + 1}): ${item.failureReasons.join(' | ')}`,
    );
  return lines.length === 0 ? [] : ['', ...lines.slice(0, 10)];
}

/** The `transport` part of `npm run bench`. */
export const transportPart: BenchPart = {
  name: 'transport',
  description: 'raw streamed calls through the undici and the sdk transport: CPU per call, calls/s',
  run,
};
