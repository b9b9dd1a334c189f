/**
 * `cohort bench`: the benchmark runner of `npm run bench` (bench/run.ts). It is loaded only when
 * the command runs: bench/ compiles beside src/ (dist/bench), so the relative path holds in both
 * the sources and the build.
 */
export async function benchCommand(argv: string[]): Promise<number> {
  const { runBench } = await import('../../../bench/run.js');
  return runBench(argv);
}
