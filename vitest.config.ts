import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The tiers (test/README.md). `unit`: in-process only (no worker pool, no cohort process, no
 * Redis; a shell at most), no build needed. `slow`: runs sized to a property over many agents, processes or
 * faults (fleets, chaos, bench sweeps). `integration`: everything else, so a new file lands
 * there until it is listed as unit or slow.
 */
const UNIT = [
  'dashboard-book',
  'agent-files',
  'batch-progress-lines',
  'breaker',
  'budget',
  'cache-breakpoints',
  'cli-output',
  'event-hub',
  'fuzz',
  'governor',
  'governor-edges',
  'governor-overload',
  'governor-state',
  'map-agents',
  'mcp-config',
  'mcp-result',
  'prefix-gate',
  'provider',
  'render',
  'retry',
  'scripted-model',
  'scripted-model-batches',
  'scripted-model-cache',
  'scripted-model-endpoints',
  'scripted-model-faults',
  'scripted-model-output',
  'scripted-model-policy',
  'scripted-model-requests',
  'scripted-model-script',
  'scripted-model-typed',
  'scripted-model-validation',
  'tool-validators',
  'tools',
  'tracing-spans',
].map((name) => `test/${name}.test.ts`);

const SLOW = [
  'bench',
  'bench-peers',
  'chaos',
  'exactly-once',
  'governor-adaptive',
  'interleavings',
  'queue-fleet',
  'queue-fleet-limits',
].map((name) => `test/${name}.test.ts`);

const TIER_ORDER = ['slow', 'integration', 'unit'];

/**
 * Longest first across the whole run, so two workers end together: the slow tier, then
 * integration, then the short unit files that fill the gaps. Within a tier, vitest's own order
 * (its recorded durations, else file size).
 */
class TierSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => TIER_ORDER.indexOf(file.project.name);
    return sorted
      .map((file, index) => ({ file, index }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.index - b.index)
      .map(({ file }) => file);
  }
}

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests start real worker pools and processes; two cores are shared by every file. Three
    // files at once, not two: the heavy files spend a third of their time waiting on processes,
    // sockets and timers, and a third file fills it (test/README.md has the figures).
    fileParallelism: true,
    maxWorkers: 3,
    // One module graph per vitest worker instead of one per file: importing the sources again
    // for every file cost more CPU than most unit files' tests. Tests restore what they change
    // (environment, spies, timers, the global tracer provider).
    isolate: false,
    sequence: { sequencer: TierSequencer },
    // A cache folder of the run's own: no test reads or writes the user's governor state.
    globalSetup: ['test/global-setup.ts'],
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT } },
      {
        extends: true,
        test: { name: 'integration', include: ['test/**/*.test.ts'], exclude: [...UNIT, ...SLOW] },
      },
      { extends: true, test: { name: 'slow', include: SLOW } },
    ],
  },
});
