/**
 * The governor chart: second by second, the rate the model admitted against its limit, the 429s
 * it answered, and the governor's window and requests in flight, one line per case. A Vega spec,
 * rendered by chart.ts's `renderSvg`.
 */
import type { GroupMark, LineMark, Mark, Spec } from 'vega';
import { chartFrame } from '../common/chart.js';
import type { LimitName, SeriesPoint } from './governor-summary.js';

const PALETTE = ['#1f77b4', '#2ca02c', '#d62728', '#9467bd', '#8c564b'];
const PANEL_WIDTH = 560;
const PANEL_HEIGHT = 180;
/** The rate axis ends at this many times the limit. */
const RATE_AXIS_LIMITS = 2;
const ONE_TWO_FIVE = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000];

type Field = 'rate' | 'refused' | 'inFlight';

interface PanelSpec {
  field: Field;
  title: string;
  axisTitle: string;
  /** A dashed horizontal line at this value (the limit). */
  rule?: number;
  /** A second, dashed line per case from this field. */
  dashed?: 'governorLimit';
  symlog?: boolean;
  /** Only the points that carry this field (the governor's samples). */
  only?: 'governorLimit';
}

function line(data: string, field: string, dashed: boolean): LineMark {
  return {
    type: 'line',
    from: { data },
    encode: {
      enter: {
        x: { scale: 'x', field: 'second' },
        y: { scale: 'y', field },
        stroke: { scale: 'color', field: 'case' },
        strokeWidth: { value: dashed ? 1.5 : 2 },
        ...(dashed ? { strokeDash: { value: [5, 3] } } : {}),
        defined: { signal: `isValid(datum['${field}'])` },
      },
    },
  };
}

function panel(spec: PanelSpec, top: number, seconds: number): GroupMark {
  const source = spec.only ? `${spec.field}-only` : 'points';
  const series = `${spec.field}-series`;
  const marks: Mark[] = [
    {
      type: 'group',
      from: { facet: { name: series, data: source, groupby: 'case' } },
      // Lines beyond the axis (the first burst) are cut at the panel's edge.
      encode: {
        enter: {
          width: { value: PANEL_WIDTH },
          height: { value: PANEL_HEIGHT },
          clip: { value: true },
        },
      },
      marks: [
        line(series, spec.field, false),
        ...(spec.dashed ? [line(series, spec.dashed, true)] : []),
      ],
    },
  ];
  if (spec.rule !== undefined) {
    marks.push({
      type: 'rule',
      encode: {
        enter: {
          x: { value: 0 },
          x2: { value: PANEL_WIDTH },
          y: { scale: 'y', value: spec.rule },
          stroke: { value: '#000000' },
          strokeDash: { value: [6, 4] },
        },
      },
    });
  }
  return {
    type: 'group' as const,
    title: { text: spec.title, anchor: 'start' as const, fontSize: 13 },
    encode: {
      enter: {
        width: { value: PANEL_WIDTH },
        height: { value: PANEL_HEIGHT },
      },
    },
    ...(spec.only
      ? {
          data: [
            {
              name: source,
              source: 'points',
              transform: [{ type: 'filter' as const, expr: `isValid(datum.${spec.only})` }],
            },
          ],
        }
      : {}),
    scales: [
      { name: 'x', type: 'linear' as const, domain: [0, seconds], range: [0, PANEL_WIDTH] },
      {
        name: 'y',
        type: spec.symlog ? ('symlog' as const) : ('linear' as const),
        domain: [0, top],
        range: [PANEL_HEIGHT, 0],
        nice: true,
      },
    ],
    axes: [
      { orient: 'bottom' as const, scale: 'x', title: 's since the first agent started' },
      {
        orient: 'left' as const,
        scale: 'y',
        title: spec.axisTitle,
        grid: true,
        // A symlog axis left to itself crowds its ticks near the top.
        ...(spec.symlog ? { values: ONE_TWO_FIVE.filter((tick) => tick <= top) } : {}),
      },
    ],
    marks,
  };
}

/** The Vega spec of the chart; `cases` gives the legend order. */
export function governorChartSpec(options: {
  points: SeriesPoint[];
  cases: string[];
  binding: LimitName;
  limit: number;
  subtitle: string;
}): Spec {
  const values = options.points.map((point) => ({
    ...point,
    rate: options.binding === 'itpm' ? point.inputTokensPerMinute : point.requests * 60,
  }));
  const seconds = Math.max(1, ...values.map((point) => point.second));
  const most = (field: 'rate' | 'refused' | 'inFlight' | 'governorLimit'): number =>
    Math.max(1, ...values.map((point) => point[field] ?? 0));
  const unit = options.binding === 'itpm' ? 'input tokens' : 'requests';
  // The bucket's first burst can reach many times the limit; the steady rate is what matters.
  const rateTop = Math.min(
    Math.max(most('rate'), options.limit * 1.1),
    options.limit * RATE_AXIS_LIMITS,
  );
  return {
    ...chartFrame('cohort bench: the rate-limit governor', options.subtitle, values),
    scales: [
      {
        name: 'color',
        type: 'ordinal',
        domain: options.cases,
        range: options.cases.map((_, index) => PALETTE[index % PALETTE.length] ?? '#7f7f7f'),
      },
    ],
    legends: [
      { stroke: 'color', title: 'case', orient: 'right', symbolType: 'stroke', labelLimit: 320 },
    ],
    marks: [
      panel(
        {
          field: 'rate',
          title:
            `${unit} the model admitted, per minute (1 s bins); dashed: the ${options.binding.toUpperCase()} limit` +
            (rateTop < most('rate') ? `; axis cut at ${RATE_AXIS_LIMITS}× the limit` : ''),
          axisTitle: `${unit}/min`,
          rule: options.limit,
        },
        rateTop,
        seconds,
      ),
      panel(
        {
          field: 'refused',
          title: 'requests answered 429, per second (symlog scale)',
          axisTitle: '429/s',
          symlog: true,
        },
        most('refused'),
        seconds,
      ),
      panel(
        {
          field: 'inFlight',
          title:
            'governor: requests in flight (solid) and its window (dashed), sampled each second',
          axisTitle: 'requests',
          dashed: 'governorLimit',
          only: 'governorLimit',
        },
        Math.max(most('inFlight'), most('governorLimit')),
        seconds,
      ),
    ],
  };
}
