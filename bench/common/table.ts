/** Fixed-width text tables for the terminal. */
import type { BenchRow } from './part.js';

/** A number for a table cell: whole above 100, two decimals below; `—` for a missing one. */
export function formatValue(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2);
}

/** A count: whole, or one decimal when it is a median of an even number of runs. */
export function formatCount(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

/** Columns padded to their widest cell; `rightAligned` columns (numbers) are padded on the left. */
export function formatGrid(
  header: string[],
  cells: string[][],
  rightAligned: number[] = [],
): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...cells.map((line) => (line[column] ?? '').length)),
  );
  const render = (line: string[]): string =>
    line
      .map((cell, column) =>
        rightAligned.includes(column)
          ? cell.padStart(widths[column] ?? 0)
          : cell.padEnd(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd();
  return [
    render(header),
    render(widths.map((width) => '-'.repeat(width))),
    ...cells.map(render),
  ].join('\n');
}

/** Renders rows as a fixed-width text table. */
export function formatTable(rows: BenchRow[]): string {
  return formatGrid(
    ['part', 'case', 'metric', 'value', 'unit', 'note'],
    rows.map((row) => [
      row.part,
      row.case,
      row.metric,
      formatValue(row.value),
      row.unit,
      row.note ?? '',
    ]),
    [3],
  );
}
