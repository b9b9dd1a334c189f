import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

/** Debian's Chromium: playwright-core drives it and never downloads a browser of its own. */
export const CHROMIUM = '/usr/bin/chromium';

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

/**
 * The flags a closed network needs: without the background-networking ones Chromium keeps
 * trying to reach its vendor's hosts. `--no-sandbox` because tests may run as root.
 */
const FLAGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Headless Chromium with an empty profile of its own, removed at close. */
export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'cohort-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1400, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
