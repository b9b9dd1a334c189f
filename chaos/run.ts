import { parseArgs } from 'node:util';
import { runChaos } from './harness.js';

/** `npm run chaos`: the long chaos run; prints its figures and exits 1 if any invariant broke. */
async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string' },
      children: { type: 'string' },
      rounds: { type: 'string' },
      'per-round': { type: 'string' },
      batch: { type: 'string' },
      shutdown: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const number = (name: string, raw: string | undefined, fallback: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 0) {
      throw new Error(`Expected \`--${name}\` to be a whole number from 0 and up, got \`${raw}\``);
    }
    return value;
  };
  const report = await runChaos({
    seed: number('seed', values.seed, 20261130),
    children: number('children', values.children, 3000),
    sessionRounds: number('rounds', values.rounds, 20),
    perRound: number('per-round', values['per-round'], 25),
    batchTasks: number('batch', values.batch, 1500),
    shutdownAgents: number('shutdown', values.shutdown, 300),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    const out = (line: string) => process.stdout.write(`${line}\n`);
    out(`chaos run, seed ${report.seed}, ${(report.elapsedMs / 1000).toFixed(1)} s`);
    out(`  agents            ${report.agents}`);
    out(
      `  faults injected   ${Object.entries(report.faults)
        .map(([kind, count]) => `${kind} ${count}`)
        .join(', ')}`,
    );
    out(
      `  results           ${Object.entries(report.outcomes)
        .map(([outcome, count]) => `${outcome} ${count}`)
        .join(', ')}`,
    );
    out(`  resumed           ${report.resumed} (children moved to a fresh worker after a crash)`);
    out(`  failed by crash   ${report.failedByCrash}`);
    out(
      `  failures by code  ${Object.entries(report.failures)
        .map(([kind, count]) => `${kind} ${count}`)
        .join(', ')}`,
    );
    out(`  stale held back   ${report.staleHeldBack}`);
    out(`  lost              ${report.lost}`);
    out(`  duplicated        ${report.duplicated}`);
    out(`  stale delivered   ${report.staleDelivered}`);
    out(`  bad transcripts   ${report.invalidTranscripts}`);
  }
  const broken =
    report.lost + report.duplicated + report.staleDelivered + report.invalidTranscripts;
  return broken === 0 ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`chaos: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 2;
  },
);
