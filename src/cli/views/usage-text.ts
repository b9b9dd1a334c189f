import type { AgentUsage } from '../../shared/result.js';

// How the views say what an agent's input was made of. `inputTokens` is the uncached input only;
// what was read from and written to the prompt cache is said beside it, and only when there was
// any, so a run against a server that does not cache reads as it always did.

/** The token counts a view reads; the cache counts may be missing from a record written before them. */
export type TokenCounts = Pick<AgentUsage, 'inputTokens' | 'outputTokens'> &
  Partial<Pick<AgentUsage, 'cacheReadTokens' | 'cacheWriteTokens'>>;

/** ` (+18000 cached, 300 written)`: the input read from and written to the cache; '' when none. */
export function cacheNote(usage: TokenCounts, format: (count: number) => string = String): string {
  const parts: string[] = [];
  const read = usage.cacheReadTokens ?? 0;
  const write = usage.cacheWriteTokens ?? 0;
  if (read > 0) parts.push(`${format(read)} cached`);
  if (write > 0) parts.push(`${format(write)} written`);
  return parts.length === 0 ? '' : ` (+${parts.join(', ')})`;
}

/** `1200 in (+18000 cached, 300 written) / 80 out tokens`. */
export function describeTokens(usage: TokenCounts): string {
  return `${usage.inputTokens} in${cacheNote(usage)} / ${usage.outputTokens} out tokens`;
}

/**
 * The share of all input that was read from the cache, in percent: reads over uncached input,
 * reads and writes together. Undefined when nothing was read or written.
 */
export function cacheHitPercent(usage: TokenCounts): number | undefined {
  const read = usage.cacheReadTokens ?? 0;
  const write = usage.cacheWriteTokens ?? 0;
  if (read === 0 && write === 0) return undefined;
  return (100 * read) / (usage.inputTokens + read + write);
}

/**
 * `cache saved $0.0456`: what caching saved against the same input at the input price, or
 * `cache cost $0.0012 more` when writes outweighed reads.
 */
export function describeSaving(savedUsd: number): string {
  return savedUsd < 0
    ? `cache cost $${(-savedUsd).toFixed(4)} more`
    : `cache saved $${savedUsd.toFixed(4)}`;
}

const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });

/**
 * `19.5K in / 80 out tokens`: every input token the model read, cached or not, and the output,
 * short enough for a status line.
 */
export function describeTokenTotals(usage: TokenCounts): string {
  const input = usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
  return `${compact.format(input)} in / ${compact.format(usage.outputTokens)} out tokens`;
}
