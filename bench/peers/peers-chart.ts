/**
 * The peers chart: per engine, CPU per provider call, efficiency and wall time, each a bar at
 * the median over the rounds with a line from the lowest round to the highest. A Vega spec,
 * rendered by chart.ts's `renderSvg`.
 */
import type { GroupMark, Spec } from 'vega';
import { chartFrame } from '../common/chart.js';
import type { PeerFigure, PeerSummary } from './peers-summary.js';

const COLORS: Record<string, string> = {
  cohort: '#1f77b4',
  'sdk-loop': '#9467bd',
  'ai-sdk': '#ff7f0e',
  langchain: '#2ca02c',
  'in-process': '#d62728',
  'thread-per-child': '#8c564b',
};
const PANEL_WIDTH = 460;
const BAR_HEIGHT = 26;

/** One bar of the chart. */
export interface PeerPoint {
  engine: string;
  figure: PeerFigure;
  median: number;
  min: number;
  max: number;
  label: string;
}

const PANELS: { figure: PeerFigure; title: string; axisTitle: string; digits: number }[] = [
  {
    figure: 'cpuPerCallMs',
    title: 'CPU per provider call (the measuring process, all threads); lower is better',
    axisTitle: 'ms per call',
    digits: 2,
  },
  {
    figure: 'efficiency',
    title: 'Efficiency: ideal makespan / makespan; higher is better',
    axisTitle: 'efficiency',
    digits: 3,
  },
  {
    figure: 'wallSeconds',
    title: 'Wall time: first agent started → last settled; lower is better',
    axisTitle: 'seconds',
    digits: 2,
  },
];

/** The bars of `summary`: one per engine and figure that every round measured. */
export function peerPoints(summary: PeerSummary[]): PeerPoint[] {
  const points: PeerPoint[] = [];
  for (const item of summary) {
    for (const { figure, digits } of PANELS) {
      const spread = item.figures[figure];
      if (spread === null) continue;
      points.push({ engine: item.engine, figure, ...spread, label: spread.median.toFixed(digits) });
    }
  }
  return points;
}

function panel(
  spec: (typeof PANELS)[number],
  engines: readonly string[],
  points: PeerPoint[],
): GroupMark {
  const data = `${spec.figure}-bars`;
  const top = Math.max(0, ...points.filter((p) => p.figure === spec.figure).map((p) => p.max));
  const height = BAR_HEIGHT * engines.length;
  return {
    type: 'group',
    title: { text: spec.title, anchor: 'start', fontSize: 13 },
    encode: { enter: { width: { value: PANEL_WIDTH }, height: { value: height } } },
    data: [
      {
        name: data,
        source: 'points',
        transform: [{ type: 'filter', expr: `datum.figure === '${spec.figure}'` }],
      },
    ],
    scales: [
      { name: 'y', type: 'band', domain: [...engines], range: [0, height], padding: 0.25 },
      // Room past the longest line for its label.
      {
        name: 'x',
        type: 'linear',
        domain: [0, top * 1.18 || 1],
        range: [0, PANEL_WIDTH],
        nice: true,
      },
    ],
    axes: [
      { orient: 'bottom', scale: 'x', title: spec.axisTitle, grid: true },
      { orient: 'left', scale: 'y' },
    ],
    marks: [
      {
        type: 'rect',
        from: { data },
        encode: {
          enter: {
            y: { scale: 'y', field: 'engine' },
            height: { scale: 'y', band: 1 },
            x: { scale: 'x', value: 0 },
            x2: { scale: 'x', field: 'median' },
            fill: { scale: 'color', field: 'engine' },
            fillOpacity: { value: 0.85 },
          },
        },
      },
      {
        type: 'rule',
        from: { data },
        encode: {
          enter: {
            y: { scale: 'y', field: 'engine', band: 0.5 },
            x: { scale: 'x', field: 'min' },
            x2: { scale: 'x', field: 'max' },
            stroke: { value: '#000000' },
            strokeWidth: { value: 1.5 },
          },
        },
      },
      {
        type: 'text',
        from: { data },
        encode: {
          enter: {
            y: { scale: 'y', field: 'engine', band: 0.5 },
            x: { scale: 'x', field: 'max', offset: 6 },
            baseline: { value: 'middle' },
            text: { field: 'label' },
            fontSize: { value: 11 },
          },
        },
      },
    ],
  };
}

/** The Vega spec of the chart; `engines` gives the order of the bars. */
export function peersChartSpec(options: {
  summary: PeerSummary[];
  engines: readonly string[];
  subtitle: string;
}): Spec {
  const points = peerPoints(options.summary);
  const engines = options.engines.filter((engine) =>
    options.summary.some((item) => item.engine === engine),
  );
  const title = 'cohort bench: cohort and the libraries people use';
  return {
    ...chartFrame(title, options.subtitle, points),
    // The subtitle is long: a line per clause, so the page stays as wide as its panels.
    title: { text: title, subtitle: options.subtitle.split('; '), anchor: 'start', offset: 16 },
    scales: [
      {
        name: 'color',
        type: 'ordinal',
        domain: [...engines],
        range: engines.map((engine) => COLORS[engine] ?? '#7f7f7f'),
      },
    ],
    marks: PANELS.map((spec) => panel(spec, engines, points)),
  };
}
