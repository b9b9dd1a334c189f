// Number and time formatting shared by the panels: short, fixed-width friendly.

/** 950 → "950", 1234 → "1.2k", 3_400_000 → "3.4M". */
export function count(value) {
  if (value === undefined || value === null || Number.isNaN(value)) return '–';
  const abs = Math.abs(value);
  if (abs < 1000) return String(Math.round(value));
  if (abs < 1e6) return `${trim(value / 1e3)}k`;
  if (abs < 1e9) return `${trim(value / 1e6)}M`;
  return `${trim(value / 1e9)}G`;
}

function trim(value) {
  return Math.abs(value) < 10 ? value.toFixed(1) : String(Math.round(value));
}

/** Dollars: four decimals under a dollar, two above. Undefined (no price) shows a dash. */
export function usd(value) {
  if (value === undefined || value === null || Number.isNaN(value)) return '–';
  if (value === 0) return '$0';
  if (Math.abs(value) < 1) return `$${value.toFixed(4)}`;
  if (Math.abs(value) < 10_000) return `$${value.toFixed(2)}`;
  return `$${count(value)}`;
}

/** Milliseconds as "850ms", "12.3s", "4m05s", "2h03m". */
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms) || ms < 0) return '–';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${pad(Math.floor(seconds % 60))}s`;
  return `${Math.floor(minutes / 60)}h${pad(minutes % 60)}m`;
}

function pad(value) {
  return String(value).padStart(2, '0');
}

/** A ratio as a percentage with one decimal. */
export function percent(ratio) {
  if (ratio === undefined || ratio === null || Number.isNaN(ratio)) return '–';
  return `${(ratio * 100).toFixed(1)}%`;
}

/** All the tokens an agent used itself. */
export function tokensOf(usage) {
  if (!usage) return 0;
  return (
    (usage.inputTokens ?? 0) +
    (usage.outputTokens ?? 0) +
    (usage.cacheReadTokens ?? 0) +
    (usage.cacheWriteTokens ?? 0)
  );
}

/** Creates an element with a class and, optionally, text (always as text, never as HTML). */
export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
