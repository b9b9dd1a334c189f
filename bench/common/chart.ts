/**
 * The concurrency chart: agents/s and main-thread event-loop delay p99 against concurrency, one
 * line per engine. It is a Vega spec rendered to SVG by Vega's headless view (`renderer: 'none'`),
 * which needs neither a browser nor a canvas.
 */
import type { Spec } from 'vega';

export interface ChartPoint {
  engine: string;
  concurrency: number;
  agentsPerSecond: number;
  eventLoopP99Ms: number;
}

const COLORS: Record<string, string> = {
  cohort: '#1f77b4',
  'in-process': '#d62728',
  'thread-per-child': '#2ca02c',
  'sdk-loop': '#9467bd',
};
const PANEL_WIDTH = 460;
const PANEL_HEIGHT = 220;
/** Ticks of the delay axis, and the steps an axis top is rounded up to. */
const ONE_TWO_FIVE = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000];

/** The smallest 1-2-5 step at or above `value` (beyond the table: `value` itself, rounded up). */
function niceCeiling(value: number): number {
  for (const step of [...ONE_TWO_FIVE.slice(1), 50_000, 100_000, 200_000, 500_000]) {
    if (step >= value) return step;
  }
  return Math.ceil(value);
}

/** The Vega spec of the chart; `engines` gives the legend order. */
export function concurrencyChartSpec(options: {
  points: ChartPoint[];
  engines: string[];
  subtitle: string;
}): Spec {
  const levels = [...new Set(options.points.map((point) => point.concurrency))].sort(
    (a, b) => a - b,
  );
  const values = [...options.points].sort((a, b) => a.concurrency - b.concurrency);
  const panel = (
    field: 'agentsPerSecond' | 'eventLoopP99Ms',
    title: string,
    axisTitle: string,
    delay: boolean,
  ) => {
    const top = niceCeiling(Math.max(0, ...values.map((point) => point[field])));
    return {
      type: 'group' as const,
      title: { text: title, anchor: 'start' as const, fontSize: 13 },
      encode: { enter: { width: { value: PANEL_WIDTH }, height: { value: PANEL_HEIGHT } } },
      scales: [
        {
          name: 'x',
          type: 'point' as const,
          domain: levels,
          range: [0, PANEL_WIDTH],
          padding: 0.5,
        },
        {
          name: 'y',
          // Event-loop delays span orders of magnitude between engines; symlog also shows 0.
          type: delay ? ('symlog' as const) : ('linear' as const),
          domain: [0, top],
          range: [PANEL_HEIGHT, 0],
        },
      ],
      axes: [
        { orient: 'bottom' as const, scale: 'x', title: 'concurrency (agents in flight)' },
        {
          orient: 'left' as const,
          scale: 'y',
          title: axisTitle,
          grid: true,
          ...(delay ? { values: ONE_TWO_FIVE.filter((tick) => tick <= top) } : {}),
        },
      ],
      marks: [
        {
          type: 'group' as const,
          from: { facet: { name: `${field}-series`, data: 'points', groupby: 'engine' } },
          marks: [
            {
              type: 'line' as const,
              from: { data: `${field}-series` },
              encode: {
                enter: {
                  x: { scale: 'x', field: 'concurrency' },
                  y: { scale: 'y', field },
                  stroke: { scale: 'color', field: 'engine' },
                  strokeWidth: { value: 2 },
                },
              },
            },
            {
              type: 'symbol' as const,
              from: { data: `${field}-series` },
              encode: {
                enter: {
                  x: { scale: 'x', field: 'concurrency' },
                  y: { scale: 'y', field },
                  fill: { scale: 'color', field: 'engine' },
                  size: { value: 36 },
                },
              },
            },
          ],
        },
      ],
    };
  };
  return {
    ...chartFrame('cohort bench: concurrency sweep', options.subtitle, values),
    scales: [
      {
        name: 'color',
        type: 'ordinal',
        domain: options.engines,
        range: options.engines.map((engine) => COLORS[engine] ?? '#7f7f7f'),
      },
    ],
    legends: [
      { stroke: 'color', fill: 'color', title: 'engine', orient: 'right', symbolType: 'circle' },
    ],
    marks: [
      panel('agentsPerSecond', 'Throughput: completed agents per second', 'agents/s', false),
      panel(
        'eventLoopP99Ms',
        'Main-thread event-loop delay, p99 (symlog scale)',
        'delay p99 (ms)',
        true,
      ),
    ],
  };
}

/** Renders a Vega spec to SVG text; undefined when Vega (a dev dependency) is not installed. */
export async function renderSvg(spec: Spec): Promise<string | undefined> {
  let vega: typeof import('vega');
  try {
    vega = await import('vega');
  } catch {
    return undefined;
  }
  const view = new vega.View(vega.parse(spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** What every bench chart shares: a titled page of panels stacked in one column over `points`. */
export function chartFrame(title: string, subtitle: string, values: object[]) {
  return {
    $schema: 'https://vega.github.io/schema/vega/v6.json',
    background: 'white',
    padding: 12,
    title: { text: title, subtitle, anchor: 'start', offset: 16 },
    data: [{ name: 'points', values }],
    layout: { columns: 1, padding: 36, bounds: 'full', align: 'each' },
  } satisfies Spec;
}
