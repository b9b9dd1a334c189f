// The per-minute chart: three stacked strips (calls, input tokens, output tokens), each on its
// own scale so a small rate is not flattened by a large one, each with its limit dashed.

import { count } from './format.js';

const STRIPS = [
  { field: 'callsPerMinute', limit: 'rpm', name: 'calls/min', color: '#2f6fdf' },
  { field: 'inputTokensPerMinute', limit: 'itpm', name: 'input tok/min', color: '#0f9b8e' },
  { field: 'outputTokensPerMinute', limit: 'otpm', name: 'output tok/min', color: '#d9822b' },
];
const WINDOW_MS = 15 * 60_000;
/** A young run's chart spans at least this much, so its first points are not a sliver. */
const MIN_SPAN_MS = 2 * 60_000;
const AXIS = 44;
const GAP = 14;
const BOTTOM = 16;

/** Draws `series` (points) and `limits` on `canvas` (#chart), sized to its CSS box. */
export function drawChart(canvas, series, limits) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (width === 0 || height === 0) return;
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const context = canvas.getContext('2d');
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, width, height);
  context.font = '10px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
  context.textBaseline = 'middle';

  const points = series ?? [];
  const end = points.length > 0 ? points[points.length - 1].t : Date.now();
  const first = points.length > 0 ? points[0].t : end;
  const span = Math.min(WINDOW_MS, Math.max(MIN_SPAN_MS, end - first));
  const start = end - span;
  const plotWidth = width - AXIS - 6;
  const stripHeight = (height - BOTTOM - GAP * (STRIPS.length - 1)) / STRIPS.length;
  const x = (t) => AXIS + ((t - start) / span) * plotWidth;

  STRIPS.forEach((strip, index) => {
    const top = index * (stripHeight + GAP);
    const limit = limits?.[strip.limit];
    let max = 0;
    for (const point of points) max = Math.max(max, point[strip.field] ?? 0);
    if (typeof limit === 'number' && limit > 0) max = Math.max(max, limit);
    max = niceCeiling(max || 1);
    const y = (value) => top + stripHeight - (value / max) * stripHeight;

    // Frame, gridline at half and the scale.
    context.strokeStyle = '#d8dde6';
    context.lineWidth = 1;
    context.setLineDash([]);
    context.strokeRect(AXIS + 0.5, top + 0.5, plotWidth - 1, stripHeight - 1);
    context.beginPath();
    context.moveTo(AXIS, Math.round(y(max / 2)) + 0.5);
    context.lineTo(AXIS + plotWidth, Math.round(y(max / 2)) + 0.5);
    context.strokeStyle = '#eef1f5';
    context.stroke();
    context.fillStyle = '#6b7280';
    context.textAlign = 'right';
    context.fillText(count(max), AXIS - 4, top + 6);
    context.fillText('0', AXIS - 4, top + stripHeight - 4);
    context.textAlign = 'left';
    context.fillStyle = strip.color;
    const last = points.length > 0 ? points[points.length - 1][strip.field] : undefined;
    context.fillText(`${strip.name}  ${count(last)}`, AXIS + 6, top + 8);

    if (typeof limit === 'number' && limit > 0) {
      context.strokeStyle = strip.color;
      context.globalAlpha = 0.6;
      context.setLineDash([5, 4]);
      context.beginPath();
      context.moveTo(AXIS, Math.round(y(limit)) + 0.5);
      context.lineTo(AXIS + plotWidth, Math.round(y(limit)) + 0.5);
      context.stroke();
      context.setLineDash([]);
      context.globalAlpha = 1;
      context.fillStyle = strip.color;
      context.textAlign = 'right';
      context.fillText(
        `limit ${count(limit)}`,
        AXIS + plotWidth - 4,
        Math.max(top + 8, y(limit) - 7),
      );
      context.textAlign = 'left';
    }

    // The rate line with a light fill under it.
    const visible = points.filter((point) => point.t >= start);
    if (visible.length > 0) {
      context.beginPath();
      visible.forEach((point, at) => {
        const px = x(point.t);
        const py = y(point[strip.field] ?? 0);
        if (at === 0) context.moveTo(px, py);
        else context.lineTo(px, py);
      });
      context.strokeStyle = strip.color;
      context.lineWidth = 1.5;
      context.stroke();
      context.lineTo(x(visible[visible.length - 1].t), top + stripHeight);
      context.lineTo(x(visible[0].t), top + stripHeight);
      context.closePath();
      context.globalAlpha = 0.12;
      context.fillStyle = strip.color;
      context.fill();
      context.globalAlpha = 1;
    }
  });

  // The time axis: four ticks before the last point.
  context.fillStyle = '#6b7280';
  context.textAlign = 'center';
  for (let tick = 3; tick >= 0; tick--) {
    const before = (span * tick) / 3;
    const label = tick === 0 ? 'now' : `-${ago(before)}`;
    const px = Math.max(AXIS + 12, Math.min(x(end - before), width - 14));
    context.fillText(label, px, height - BOTTOM / 2);
  }
}

function ago(ms) {
  const seconds = Math.round(ms / 1000);
  if (seconds < 300) return `${seconds}s`;
  return `${Math.round(seconds / 60)}m`;
}

/** Rounds up to 1, 2 or 5 times a power of ten, so the scale reads cleanly. */
function niceCeiling(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}
