/**
 * Debian's Chromium driven by playwright-core, which never downloads a browser of its own: the
 * dashboard's browser tests and its screenshot launch it the same way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/**
 * The flags a closed network needs: without the background-networking ones Chromium keeps
 * trying to reach its vendor's hosts. `--no-sandbox`, because it may run as root.
 */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface LaunchedChromium {
  context: BrowserContext;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/** Headless Chromium with an empty profile of its own. */
export async function launchChromium(
  viewport = { width: 1400, height: 900 },
): Promise<LaunchedChromium> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'cohort-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport,
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
