/** The shape of a bench part: a named measurement that returns rows (and, optionally, more). */
import type { Spec } from 'vega';
import type { BenchOptions } from './options.js';

/** One measured figure. */
export interface BenchRow {
  part: string;
  case: string;
  metric: string;
  value: number;
  unit: string;
  note?: string;
}

/** What a part is given: the parsed flags and a progress line writer (stderr). */
export interface BenchContext {
  options: BenchOptions;
  log(line: string): void;
}

/** What a part returns. */
export interface PartReport {
  rows: BenchRow[];
  /** Its own terminal rendering; default: `rows` as a table. */
  table?: string;
  /** Everything it measured, for the JSON report. */
  data?: unknown;
  /** A Vega spec to render as the run's SVG chart. */
  chart?: Spec;
}

/** A named benchmark. */
export interface BenchPart {
  name: string;
  description: string;
  run(context: BenchContext): Promise<PartReport>;
}
