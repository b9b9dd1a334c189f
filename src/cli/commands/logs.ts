import { defaultLogRoot } from '../../main/run-folder.js';
import { parseAge } from '../../shared/duration.js';
import { UsageError } from '../../shared/errors.js';
import { parseCommand, stringFlag } from '../flags.js';
import { type PruneReport, pruneLogs } from '../log-prune.js';
import { note, safeLabel, stdout } from '../output.js';

export const LOGS_USAGE = `Usage: cohort logs prune --older-than DURATION [--log-dir ROOT] [--dry-run] [--json]

Removes the run folders directly under the log root (default: $TMPDIR/cohort) whose newest
file is older than DURATION (90m, 36h, 30d, 2w, or whole milliseconds), and prints each
one removed and the bytes freed. Only folders named as cohort names them (<time>-<pid>) are
touched; a run whose process is still alive on this host is kept, symbolic links are never
followed, and nothing outside ROOT is removed. --dry-run lists what would go and removes
nothing. --json prints one line {"type":"prune",…}.

To keep fewer folders in the first place, run with --logs failed or --logs none.

Exit codes:
  0  done (also when nothing was old enough)
  1  a folder could not be removed
  2  a usage error: a missing or bad --older-than, a bad --log-dir`;

/** `cohort logs SUBCOMMAND`: for now the one subcommand `prune`. */
export async function logsCommand(argv: string[]): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === '--help' || subcommand === '-h' || subcommand === 'help') {
    stdout().write(`${LOGS_USAGE}\n`);
    return 0;
  }
  if (subcommand !== 'prune') {
    throw new UsageError(
      `Expected a subcommand (prune), got ${subcommand === undefined ? 'nothing' : `\`${safeLabel(subcommand)}\``}. See cohort logs --help`,
    );
  }
  return pruneCommand(rest);
}

async function pruneCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommand(argv, {
    'older-than': { type: 'string' },
    'log-dir': { type: 'string' },
    'dry-run': { type: 'boolean' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    stdout().write(`${LOGS_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(
      `Expected no arguments after \`prune\`, got ${positionals.map((word) => `\`${safeLabel(word)}\``).join(' ')}`,
    );
  }
  const olderThan = values['older-than'];
  if (typeof olderThan !== 'string') {
    throw new UsageError('Expected `--older-than DURATION` (like 36h or 30d), got nothing');
  }
  const report = pruneLogs({
    root: stringFlag(values, 'log-dir') ?? defaultLogRoot(),
    olderThanMs: parseAge(olderThan, '--older-than'),
    dryRun: values['dry-run'] === true,
  });
  if (values.json) stdout().write(`${JSON.stringify(pruneJson(report))}\n`);
  else printReport(report, olderThan);
  for (const failure of report.failed) {
    note(`cohort logs: could not remove ${safeLabel(failure.path)}: ${failure.error}`);
  }
  return report.failed.length === 0 ? 0 : 1;
}

function pruneJson(report: PruneReport): Record<string, unknown> {
  return {
    type: 'prune',
    root: report.root,
    dryRun: report.dryRun,
    removed: report.removed.map((folder) => ({
      path: folder.path,
      bytes: folder.bytes,
      files: folder.files,
      newest: new Date(folder.newestMs).toISOString(),
    })),
    // What the removed folders took on disk (in a dry run: what removing them would free).
    bytes: freed(report),
    live: report.live,
    recent: report.recent,
    failed: report.failed,
  };
}

function printReport(report: PruneReport, olderThan: string): void {
  const verb = report.dryRun ? 'would remove' : 'removed';
  for (const folder of report.removed) {
    stdout().write(
      `${verb} ${safeLabel(folder.path)} (${folder.files} files, ${formatBytes(folder.bytes)})\n`,
    );
  }
  for (const folder of report.live)
    stdout().write(`kept ${safeLabel(folder)} (its run is alive)\n`);
  const total = formatBytes(freed(report));
  const summary = report.dryRun
    ? `would remove ${report.removed.length} run folder(s), freeing ${total}`
    : `removed ${report.removed.length} run folder(s), freed ${total}`;
  stdout().write(
    `cohort logs: ${summary}; kept ${report.recent} newer than ${safeLabel(olderThan)} and ${report.live.length} of live runs, under ${safeLabel(report.root)}\n`,
  );
}

function freed(report: PruneReport): number {
  return report.removed.reduce((sum, folder) => sum + folder.bytes, 0);
}

/** Bytes for people: `512 B`, `4.0 KB`, `471.3 MB` (powers of 1024, as du -h shows them). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}
