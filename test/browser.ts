import { spawnSync } from 'node:child_process';
import { CHROMIUM } from '../bench/common/chromium.js';

/** Why browser tests must skip, or `undefined` when Chromium is present. */
export const browserMissing: string | undefined = probeBrowser();

/**
 * Runs `chromium --version`: `undefined` when it works, else the reason to skip, or a throw when
 * `COHORT_REQUIRE_BROWSER=1` (CI) forbids skipping.
 */
function probeBrowser(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const probe = spawnSync(CHROMIUM, ['--version'], { stdio: 'ignore', timeout: 30_000 });
  if (probe.error === undefined && probe.status === 0) return undefined;
  if (env.COHORT_REQUIRE_BROWSER === '1') {
    throw new Error(
      `COHORT_REQUIRE_BROWSER is set but ${CHROMIUM} does not run (Debian package chromium)`,
    );
  }
  return `${CHROMIUM} is not installed (Debian package chromium)`;
}

export type { LaunchedChromium as TestBrowser } from '../bench/common/chromium.js';
export { launchChromium as launchBrowser } from '../bench/common/chromium.js';
