/**
 * `npm run bench:profile-summary -- DIR|FILE...`: where each profiled thread's busy time went, by
 * category (synchronous fs, undici, the SDK, web streams, messaging, GC, JSON, redaction, …), one
 * line per .cpuprofile file: what `cohort bench --profile DIR` (or `node --cpu-prof`) wrote.
 *
 * A sample counts for the category of its own frame if that frame has one, else of its nearest
 * caller that has one: a web-streams function called by undici counts as web streams, undici's
 * native socket `writev` as undici. A few categories claim all their frame calls (module loading,
 * the `*Sync` fs calls). Idle samples are not busy time.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { isEntryScript } from '../../src/testing/entry-script.js';
import { formatGrid } from '../common/table.js';

/** The parts of a V8 .cpuprofile file this reads. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string };
    children?: number[];
  }[];
  samples: number[];
  timeDeltas: number[];
}

interface Frame {
  functionName: string;
  url: string;
}

function isFs(url: string): boolean {
  return url === 'node:fs' || url.startsWith('node:internal/fs/');
}

/**
 * The categories, checked in this order for each frame; the first that matches wins. A
 * `subtree` category claims everything its frame calls as well: module loading reads files and
 * compiles, and that is start-up, not the fs or the JSON of the hot path; all that runs inside
 * `fs.writeFileSync` is synchronous fs.
 */
export const CATEGORIES: readonly {
  name: string;
  subtree?: boolean;
  matches(frame: Frame): boolean;
}[] = [
  {
    name: 'module loading',
    subtree: true,
    matches: ({ url }) => url.startsWith('node:internal/modules/'),
  },
  { name: 'gc', matches: (frame) => frame.functionName === '(garbage collector)' },
  {
    // The `*Sync` functions of node:fs and all they call: the thread waits on the disk. Native
    // leaves (writeFileUtf8, mkdir, …) have no category of their own; a socket's `writev` falls
    // to whatever wrote to the socket (undici), not here.
    name: 'fs sync',
    subtree: true,
    matches: ({ functionName, url }) => isFs(url) && functionName.endsWith('Sync'),
  },
  // The rest of node:fs: callback and promise calls, which only queue the work on the thread.
  { name: 'fs async', matches: ({ url }) => isFs(url) },
  {
    name: 'json',
    matches: ({ functionName, url }) =>
      url === '' && (functionName === 'parse' || functionName === 'stringify'),
  },
  {
    name: 'messaging',
    matches: ({ functionName, url }) =>
      /^(postMessage|receiveMessageOnPort|MessageChannel|MessagePort)$/.test(functionName) ||
      /^node:internal\/(worker\/(io|js_transferable)|per_context\/messageport)/.test(url),
  },
  { name: 'redaction', matches: ({ url }) => /\/redact\.[jt]s$/.test(url) },
  // src/shared/agent-log.ts and the log-* modules beside it.
  {
    name: 'agent log',
    matches: ({ url }) => /\/shared\/(agent-log|log-[a-z-]+)\.[jt]s$/.test(url),
  },
  { name: 'sdk', matches: ({ url }) => url.includes('/@anthropic-ai/sdk/') },
  {
    name: 'undici',
    // undici itself (the package, or the copy inside Node behind global fetch) and its SSE parser.
    matches: ({ url }) =>
      /\/undici\/|^node:internal\/deps\/undici|\/eventsource-parser\//.test(url),
  },
  // cohort's own code around them (src/shared/provider/transport).
  { name: 'transport', matches: ({ url }) => /\/provider\/transport\/[^/]+\.[jt]s$/.test(url) },
  { name: 'web streams', matches: ({ url }) => url.startsWith('node:internal/webstreams/') },
  { name: 'node streams', matches: ({ url }) => url.startsWith('node:internal/streams/') },
  // The rest of cohort's own code, with the Node built-ins it calls directly.
  { name: 'cohort', matches: ({ url }) => /\/src\/(shared|worker|main)\//.test(url) },
  // Native time V8 could not pin on a JavaScript frame.
  { name: 'program', matches: (frame) => frame.functionName === '(program)' },
];

export const OTHER = 'other';
const IDLE = '(idle)';

/** The columns of the summary, in order. */
export const CATEGORY_NAMES: readonly string[] = [...CATEGORIES.map((item) => item.name), OTHER];

export interface ProfileSummary {
  /** Sampled time, idle included, ms. */
  totalMs: number;
  /** Sampled time not idle, ms. */
  busyMs: number;
  /** Busy ms per category (every name of CATEGORY_NAMES, zeros included). */
  byCategory: Record<string, number>;
  /** Functions by self time, busiest first, ms. */
  topFunctions: { name: string; ms: number }[];
}

/**
 * The category of every node, from the root down: the subtree category of a caller if one has
 * it, else the node's own, else its nearest categorised caller's, else `other`. The same as
 * walking up from each leaf, done once per node.
 */
function categorise(profile: CpuProfile): Map<number, string> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const children = new Set(profile.nodes.flatMap((node) => node.children ?? []));
  const result = new Map<number, string>();
  // [node id, the subtree category above it, the nearest category above it]
  const stack: [number, string | undefined, string][] = profile.nodes
    .filter((node) => !children.has(node.id))
    .map((node) => [node.id, undefined, OTHER]);
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [id, claimed, inherited] = item;
    const node = byId.get(id);
    if (!node) continue;
    const own = CATEGORIES.find((category) => category.matches(node.callFrame));
    const subtree = claimed ?? (own?.subtree ? own.name : undefined);
    const category = subtree ?? own?.name ?? inherited;
    result.set(id, node.callFrame.functionName === IDLE ? IDLE : category);
    for (const child of node.children ?? []) stack.push([child, subtree, category]);
  }
  return result;
}

function frameName(frame: Frame): string {
  const file = frame.url === '' ? '' : ` ${frame.url.split('/').slice(-2).join('/')}`;
  return `${frame.functionName || '(anonymous)'}${file}`;
}

/** Sums a profile's samples by category and by function (self time). */
export function summariseProfile(profile: CpuProfile, top = 0): ProfileSummary {
  const selfMicros = new Map<number, number>();
  profile.samples.forEach((id, index) => {
    selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0));
  });
  const categories = categorise(profile);
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const byCategory: Record<string, number> = Object.fromEntries(
    CATEGORY_NAMES.map((name) => [name, 0]),
  );
  const byFunction = new Map<string, number>();
  let totalMs = 0;
  let busyMs = 0;
  for (const [id, micros] of selfMicros) {
    const ms = micros / 1000;
    totalMs += ms;
    const category = categories.get(id) ?? OTHER;
    if (category === IDLE) continue;
    busyMs += ms;
    byCategory[category] = (byCategory[category] ?? 0) + ms;
    const frame = byId.get(id)?.callFrame;
    if (top > 0 && frame) {
      const name = frameName(frame);
      byFunction.set(name, (byFunction.get(name) ?? 0) + ms);
    }
  }
  const topFunctions = [...byFunction]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, ms]) => ({ name, ms }));
  return { totalMs, busyMs, byCategory, topFunctions };
}

/** `CPU.20250101.120000.4242.3.007.cpuprofile` → `pid 4242 worker 3` (thread 0 is main). */
export function threadOf(file: string): string {
  const match = /^CPU\.\d+\.\d+\.(\d+)\.(\d+)\.\d+\.cpuprofile$/.exec(path.basename(file));
  if (!match) return '?';
  return match[2] === '0' ? `pid ${match[1]} main` : `pid ${match[1]} worker ${match[2]}`;
}

/**
 * The .cpuprofile files named, or found in the directories named and in their folders one level
 * down (`--profile DIR` writes a folder per case), in name order.
 */
export function profileFiles(targets: readonly string[]): string[] {
  const inFolder = (dir: string, depth: number): string[] =>
    readdirSync(dir, { withFileTypes: true })
      .sort((a, b) => a.name.localeCompare(b.name))
      .flatMap((entry) => {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) return depth > 0 ? inFolder(file, depth - 1) : [];
        return entry.name.endsWith('.cpuprofile') ? [file] : [];
      });
  return targets.flatMap((target) =>
    statSync(target).isDirectory() ? inFolder(target, 1) : [target],
  );
}

/** The case a profile belongs to: its folder's name (`03-concurrency-200-cohort`). */
export function caseOf(file: string): string {
  return path.basename(path.dirname(file));
}

/** The table: one line per file, each category's share of that thread's busy time. */
export function formatSummaries(items: { file: string; summary: ProfileSummary }[]): string {
  const header = ['case', 'thread', 'busy ms', 'busy/total', ...CATEGORY_NAMES];
  const cells = items.map(({ file, summary }) => [
    caseOf(file),
    threadOf(file),
    summary.busyMs.toFixed(0),
    percent(summary.busyMs, summary.totalMs),
    ...CATEGORY_NAMES.map((name) => percent(summary.byCategory[name] ?? 0, summary.busyMs)),
  ]);
  const grid = formatGrid(
    header,
    cells,
    Array.from({ length: header.length - 2 }, (_, index) => index + 2),
  );
  return `Share of each thread's busy time by category, % (busy/total: busy time as % of the profile's)\n\n${grid}`;
}

function percent(part: number, whole: number): string {
  return whole > 0 ? ((100 * part) / whole).toFixed(1) : '—';
}

export const PROFILE_SUMMARY_USAGE = `Usage: npm run bench:profile-summary -- [--top N] DIR|FILE...
Per .cpuprofile file (cohort bench --profile DIR writes them; so does node --cpu-prof): the share
of each thread's busy time by category. A sample counts for its own frame's category, else its
nearest caller's. --top N also lists each file's N busiest functions by self time.
Categories: ${CATEGORY_NAMES.join(', ')}.`;

/** The command: prints the table (and the top functions); resolves to an exit code. */
export function profileSummaryCommand(
  argv: string[],
  out: { write(text: string): unknown } = process.stdout,
  err: { write(text: string): unknown } = process.stderr,
): number {
  const targets: string[] = [];
  let top = 0;
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!;
    if (arg === '--help' || arg === '-h') {
      out.write(`${PROFILE_SUMMARY_USAGE}\n`);
      return 0;
    }
    if (arg === '--top') {
      const text = argv[++index] ?? '';
      top = Number(text);
      if (!/^\d+$/.test(text)) {
        err.write(`profile-summary: Expected \`--top\` to be a whole number, got \`${text}\`\n`);
        return 2;
      }
    } else targets.push(arg);
  }
  let files: string[];
  try {
    files = profileFiles(targets);
  } catch (error) {
    err.write(`profile-summary: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  if (files.length === 0) {
    err.write(
      `profile-summary: Expected a directory or file with .cpuprofile files, got ${targets.length === 0 ? 'none' : targets.map((item) => `\`${item}\``).join(', ')}\n`,
    );
    return 2;
  }
  const items = files.map((file) => ({
    file,
    summary: summariseProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, top),
  }));
  out.write(`${formatSummaries(items)}\n`);
  for (const { file, summary } of top > 0 ? items : []) {
    out.write(`\n${caseOf(file)}, ${threadOf(file)}: busiest functions by self time\n`);
    for (const item of summary.topFunctions) {
      out.write(`${percent(item.ms, summary.busyMs).padStart(6)}%  ${item.name}\n`);
    }
  }
  return 0;
}

if (isEntryScript(import.meta.url)) {
  process.exitCode = profileSummaryCommand(process.argv.slice(2));
}
