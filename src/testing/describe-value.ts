/** Renders a value for an error message: "`0` (number)", "`[1,2]` (array)", "nothing". */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  const kind = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  let shown: string;
  try {
    shown = JSON.stringify(value) ?? String(value);
  } catch {
    shown = String(value);
  }
  if (shown.length > 80) shown = `${shown.slice(0, 77)}...`;
  return `\`${shown}\` (${kind})`;
}

/** True for a plain JSON object: not null, not an array. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
