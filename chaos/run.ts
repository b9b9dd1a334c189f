import { parseArgs } from 'node:util';
import { formatReport } from './format.js';
import { brokenCount, DEFAULT_CHAOS_GRACE_MS, runChaos } from './harness.js';

/** `npm run chaos`: the long chaos run; prints its figures and exits 1 if any invariant broke. */
async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string' },
      children: { type: 'string' },
      trees: { type: 'string' },
      rounds: { type: 'string' },
      'per-round': { type: 'string' },
      'close-trials': { type: 'string' },
      batch: { type: 'string' },
      shutdown: { type: 'string' },
      'cancel-grace-ms': { type: 'string' },
      json: { type: 'boolean' },
      'keep-logs': { type: 'boolean' },
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
    children: number('children', values.children, 1500),
    trees: number('trees', values.trees, 150),
    sessionRounds: number('rounds', values.rounds, 20),
    perRound: number('per-round', values['per-round'], 25),
    closeTrials: number('close-trials', values['close-trials'], 20),
    batchTasks: number('batch', values.batch, 750),
    shutdownAgents: number('shutdown', values.shutdown, 300),
    cancelGraceMs: number('cancel-grace-ms', values['cancel-grace-ms'], DEFAULT_CHAOS_GRACE_MS),
    keepLogs: values['keep-logs'] === true,
    log: (line) => process.stderr.write(`${line}\n`),
  });
  if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(`${formatReport(report).join('\n')}\n`);
  // A hang leaves worker threads behind: exit rather than wait on them.
  if (report.hangs.length > 0) process.exit(1);
  return brokenCount(report) === 0 ? 0 : 1;
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
