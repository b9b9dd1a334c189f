import type { ChaosReport } from './harness.js';

const list = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([kind, count]) => `${kind} ${count}`)
    .join(', ');

/** The report as the lines `npm run chaos` prints (and docs/RELIABILITY.md quotes). */
export function formatReport(report: ChaosReport): string[] {
  const { port, journal, sessions } = report;
  const lines = [
    `chaos run, seed ${report.seed}, cancel grace ${report.cancelGraceMs} ms, ${(report.elapsedMs / 1000).toFixed(1)} s`,
    `  agents            ${report.agents} (${report.respawned} of them spawned again by a resumed parent)`,
  ];
  for (const [depth, figures] of Object.entries(report.byDepth)) {
    lines.push(
      `    depth ${depth}         ${figures.agents} (direct ${figures.direct}, sync ${figures.sync}, async ${figures.async}); cancelled ${figures.cancelled}, lost ${figures.lost}, stale delivered ${figures.staleDelivered}, redelivered ${figures.redelivered}`,
    );
  }
  lines.push(
    `  faults injected   ${list(report.faults)}`,
    `  results           ${list(report.outcomes)}`,
    `  cancelled by      ${list(report.cancelReasons)}`,
    `  failures by code  ${list(report.failures)}; of worker_crashed/worker_lost, innocent (no killing tool in the script) ${report.innocentCrashFailures}`,
    `  resumed           ${report.resumed} (children moved to a fresh worker after their worker died; ${report.resumedForStuck} of them after cohort terminated it for a child stuck past its cancel grace)`,
    `  port              worker results ${port.workerResults}, main results ${port.mainResults}, delivered ${port.delivered}, duplicates ${port.duplicateResults}, crash records left ${port.crashRecords}`,
    `  journal           ${journal.journaled} agents, ${journal.results} results, missing ${journal.missingResults}, stray ${journal.strayAgents}, mismatched ${journal.mismatchedResults}`,
    `  sessions          ${sessions.sessions}: root async ${sessions.rootAsync} = delivered ${sessions.delivered} + held back ${sessions.heldBack} + pending at close ${sessions.pendingAtClose}; unaccounted ${sessions.unaccounted}, twice ${sessions.twice}`,
    `  close             turns queued and not run ${sessions.turnsNotRun}, queued turns that ran ${sessions.queuedTurnsRan}, sends accepted after close ${sessions.sendAfterCloseAccepted}, agents still running when close() resolved ${sessions.outlivedClose}`,
    `  events dropped    ${sessions.eventsDropped}`,
    `  stale held back   ${report.staleHeldBack}`,
    `  lost              ${report.lost}`,
    `  duplicated        ${report.duplicated} (ledger), ${port.duplicateResults} (port)`,
    `  stale delivered   ${report.staleDelivered}`,
    `  redelivered       ${report.redelivered}, misdelivered ${report.misdelivered}`,
    `  bad transcripts   ${report.invalidTranscripts}`,
    `  hangs             ${report.hangs.length === 0 ? 0 : report.hangs.join(', ')}`,
  );
  if (report.logDir) lines.push(`  run folder        ${report.logDir}`);
  return lines;
}
