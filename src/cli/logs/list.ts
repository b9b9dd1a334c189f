/**
 * `cohort logs list`: the runs under a log root, newest first: each run's id (what `--run`
 * takes), when it started, its agents and their results by outcome, its size on disk and whether
 * a process that writes it is still alive on this host.
 */

import { readFile } from 'node:fs/promises';
import { ROOT_ID } from '../../main/root-journal.js';
import { histories, parseSegment } from '../../shared/journal/reader.js';
import { measure, pidIsAlive } from '../log-prune.js';
import { safeLabel } from '../output.js';
import { formatBytes } from './bytes.js';
import type { RunInfo } from './runs.js';

/** One run as `list` reports it. */
export interface RunSummary {
  run: string;
  path: string;
  startedAt: string;
  agents: number;
  /** Agents with a result, by outcome. */
  results: Record<string, number>;
  /** Agents without a result yet: running, or their process died first. */
  unsettled: number;
  /** Disk use, as `du` counts it. */
  bytes: number;
  alive: boolean;
  /** Why its journal could not be read (another version's), when it could not. */
  error?: string;
}

export async function summariseRun(run: RunInfo): Promise<RunSummary> {
  const summary: RunSummary = {
    run: run.id,
    path: run.dir,
    startedAt: new Date(run.startedAt).toISOString(),
    agents: 0,
    results: {},
    unsettled: 0,
    bytes: measure(run.dir).bytes,
    alive: run.pids.some(pidIsAlive),
  };
  try {
    const texts = await Promise.all(
      run.segments.map((file) => readFile(file, 'utf8').catch(() => '')),
    );
    const agents = histories(texts.map((text, index) => parseSegment(run.segments[index]!, text)));
    // A session's root is no spawned agent: its records are its conversation.
    agents.delete(ROOT_ID);
    summary.agents = agents.size;
    for (const agent of agents.values()) {
      const outcome = agent.result?.outcome;
      if (outcome === undefined) summary.unsettled++;
      else summary.results[outcome] = (summary.results[outcome] ?? 0) + 1;
    }
  } catch (error) {
    summary.error = error instanceof Error ? error.message : String(error);
  }
  return summary;
}

/** The runs as a table, a line each under a header line. */
export function runsTable(runs: readonly RunSummary[]): string {
  const rows = runs.map((run) => [
    safeLabel(run.run),
    run.startedAt,
    String(run.agents),
    run.error === undefined ? outcomes(run) : `unreadable: ${safeLabel(run.error)}`,
    formatBytes(run.bytes),
    run.alive ? 'alive' : '-',
  ]);
  const header = ['RUN', 'STARTED', 'AGENTS', 'RESULTS', 'SIZE', 'PROCESS'];
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]!.length)),
  );
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
        .join('  '),
    )
    .join('\n');
}

function outcomes(run: RunSummary): string {
  const parts = Object.entries(run.results).map(([outcome, count]) => `${count} ${outcome}`);
  if (run.unsettled > 0) parts.push(`${run.unsettled} without result`);
  return parts.length === 0 ? '-' : parts.join(', ');
}
