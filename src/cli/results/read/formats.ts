import { UsageError } from '../../../shared/errors.js';
import { safeLabel, safeText } from '../../output.js';

/**
 * The table formats of `cohort results … export`: a header, then one row per task. A cell's value
 * is what the field holds in the line: text as it is, a number or true/false as written, an
 * object or array as compact JSON, nothing (an empty cell, `null` in JSON) where the line has no
 * such field.
 */
export interface TableFormat {
  header(names: readonly string[]): string;
  row(names: readonly string[], values: readonly unknown[]): string;
}

const JSON_CONTROLS = /[\u007f-\u009f]/g;

/**
 * CSV as RFC 4180 has it: CRLF between records, and a field holding a comma, a double quote, a
 * CR or an LF in double quotes, its quotes doubled. Terminal control characters other than the
 * line end and tab are shown escaped (`\x1b`), as everywhere cohort prints outside text.
 */
const csv: TableFormat = {
  header: (names) => `${names.map(csvField).join(',')}\r\n`,
  row: (_names, values) => `${values.map((value) => csvField(cellText(value))).join(',')}\r\n`,
};

function csvField(text: string): string {
  const safe = safeText(text);
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/**
 * One JSON object per row, its keys the field names as given (`"usage.costUsd"`), `null` where the
 * line has no such field. DEL and the C1 controls, which JSON allows raw, are written as `\u`
 * escapes: the same value, and nothing a terminal acts on.
 */
const jsonl: TableFormat = {
  header: () => '',
  row: (names, values) =>
    `${jsonLine(Object.fromEntries(names.map((name, index) => [name, values[index] ?? null])))}\n`,
};

/** `value` as one line of JSON with no raw control character in it. */
export function jsonLine(value: unknown): string {
  return escapeJsonControls(JSON.stringify(value));
}

/** A JSON text with DEL and the C1 controls escaped: the same value, safe on a terminal. */
export function escapeJsonControls(json: string): string {
  return json.replace(
    JSON_CONTROLS,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * A Markdown (GitHub) table: a pipe in a cell is escaped (`\|`), a line break becomes `<br>`, so
 * every row stays one line of the table.
 */
const md: TableFormat = {
  header: (names) =>
    `| ${names.map(mdCell).join(' | ')} |\n|${names.map(() => ' --- ').join('|')}|\n`,
  row: (_names, values) => `| ${values.map((value) => mdCell(cellText(value))).join(' | ')} |\n`,
};

function mdCell(text: string): string {
  return safeText(text).replace(/\|/g, '\\|').replace(/\n/g, '<br>');
}

/** A field's value as a cell's text. */
function cellText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** The formats `--format` names. */
export const FORMATS = { csv, jsonl, md } as const;
/** A `--format` name. */
export type FormatName = keyof typeof FORMATS;

/** `--format NAME`, checked. */
export function formatNamed(name: string): TableFormat {
  if (!Object.hasOwn(FORMATS, name)) {
    throw new UsageError(
      `Expected --format to be one of ${Object.keys(FORMATS).join(', ')}, got \`${safeLabel(name)}\``,
    );
  }
  return FORMATS[name as FormatName];
}
