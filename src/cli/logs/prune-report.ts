/** What `cohort logs prune` prints: a line per folder and a summary, or one JSON line. */
import type { PruneReport } from '../log-prune.js';
import { safeLabel, stdout } from '../output.js';
import { formatBytes } from './bytes.js';

/** The report as `--json` prints it. */
export function pruneJson(report: PruneReport): Record<string, unknown> {
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

export function printReport(report: PruneReport, olderThan: string): void {
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
