/**
 * `npm run bench [part...]`: runs the named benchmark parts, or all of them, and prints
 * one table. A part is a name and a function that returns rows; add one with an import
 * and a line in PARTS.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { modelCapacity } from './model-capacity.js';

/** One measured figure. */
export interface BenchRow {
  part: string;
  case: string;
  metric: string;
  value: number;
  unit: string;
  note?: string;
}

/** A named benchmark. */
export interface BenchPart {
  name: string;
  description: string;
  run(): Promise<BenchRow[]>;
}

const PARTS: BenchPart[] = [modelCapacity];

function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return value >= 100 ? value.toFixed(0) : value.toFixed(2);
}

/** Renders rows as a fixed-width text table. */
export function formatTable(rows: BenchRow[]): string {
  const header = ['part', 'case', 'metric', 'value', 'unit', 'note'];
  const cells = rows.map((row) => [
    row.part,
    row.case,
    row.metric,
    formatValue(row.value),
    row.unit,
    row.note ?? '',
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...cells.map((line) => (line[column] ?? '').length)),
  );
  const render = (line: string[]): string =>
    line
      .map((cell, column) =>
        column === 3 ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd();
  return [
    render(header),
    render(widths.map((width) => '-'.repeat(width))),
    ...cells.map(render),
  ].join('\n');
}

/** Runs the parts named in `argv` (all when empty); resolves to an exit code. */
export async function runBench(argv: string[]): Promise<number> {
  const unknown = argv.filter((name) => !PARTS.some((part) => part.name === name));
  if (unknown.length > 0) {
    const known = PARTS.map((part) => `${part.name} (${part.description})`).join('\n  ');
    process.stderr.write(
      `Expected a bench part name, got ${unknown.map((name) => `\`${name}\``).join(', ')}. Parts:\n  ${known}\n`,
    );
    return 2;
  }
  const chosen = argv.length === 0 ? PARTS : PARTS.filter((part) => argv.includes(part.name));
  const rows: BenchRow[] = [];
  for (const part of chosen) {
    process.stderr.write(`bench: running ${part.name}: ${part.description}\n`);
    const begin = performance.now();
    rows.push(...(await part.run()));
    process.stderr.write(
      `bench: ${part.name} took ${((performance.now() - begin) / 1000).toFixed(1)} s\n`,
    );
  }
  process.stdout.write(
    `node ${process.version}, ${process.platform}/${process.arch}\n\n${formatTable(rows)}\n`,
  );
  return 0;
}

function isEntry(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntry()) {
  process.exitCode = await runBench(process.argv.slice(2));
}
