import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../../shared/errors.js';

/** Where the built runner sits beside the built CLI (dist/bench/run.js). */
const RUNNER = fileURLToPath(new URL('../../../bench/run.js', import.meta.url));

/**
 * `cohort bench`: the benchmark runner of `npm run bench` (bench/run.ts). It is loaded only when
 * the command runs: bench/ compiles beside src/ (dist/bench), so the relative path holds in both
 * the sources and the build. The package ships no bench (package.json `files`), so an installed
 * cohort has none to load and says where the bench runs instead.
 */
export async function benchCommand(argv: string[]): Promise<number> {
  let runBench: (argv: string[]) => Promise<number>;
  try {
    ({ runBench } = await import('../../../bench/run.js'));
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && !existsSync(RUNNER)) {
      throw new UsageError(
        'Expected the bench beside this cohort, found none: the package ships without it. Run it from a clone of the repository: npm run bench (docs/BENCHMARKS.md)',
      );
    }
    throw error;
  }
  return runBench(argv);
}
