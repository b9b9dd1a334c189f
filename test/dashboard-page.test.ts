import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Dashboard, serveDashboard } from '../src/main/dashboard/dashboard.js';
import { browserMissing, launchBrowser, type TestBrowser } from './browser.js';
import { readResultLines, runCli } from './cli-helpers.js';
import { type Rig, scripted, startRig, syncAgent, TEST_TOOLS, tempDir } from './helpers.js';

// The dashboard's page in a real headless Chromium (Debian's, driven by playwright-core),
// served by a real engine or a real `cohort batch`: it loads under its CSP with no error, shows
// the running agents and the governor, escapes what models write, opens a transcript, and its
// cancel button cancels an agent whose result line then says `cancelled`.

const sleeper = (ms: number, lead = 'Sleep.') =>
  scripted([{ calls: [{ name: 'sleep', input: { ms } }] }, { reply: 'woke' }], lead);

/** Every console error, failed request and CSP violation of `page`, for a final check. */
function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') {
      problems.push(`console ${message.type()}: ${message.text()}`);
    }
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('requestfailed', (request) => {
    // The event stream is cut when the server closes; that is no fault of the page.
    if (!request.url().includes('/api/events')) problems.push(`request failed: ${request.url()}`);
  });
  return problems;
}

describe.skipIf(browserMissing)(
  browserMissing ? `the dashboard page (skipped: ${browserMissing})` : 'the dashboard page',
  () => {
    let browser: TestBrowser;

    beforeAll(async () => {
      browser = await launchBrowser();
    }, 60_000);

    afterAll(async () => {
      await browser?.close();
    });

    describe('on an embedded engine', () => {
      let rig: Rig;
      let dashboard: Dashboard;

      beforeAll(async () => {
        rig = await startRig({ threads: 1, maxDepth: 2 });
        dashboard = await serveDashboard(rig.engine, { updateMs: 100 });
      });

      afterAll(async () => {
        await dashboard?.close();
        await rig?.close();
      });

      it('loads with no error, shows running agents, the governor and a transcript, escapes titles, and cancels from its button', async () => {
        const page = await browser.context.newPage();
        const problems = watchProblems(page);
        const hostile = '<img src=x onerror="document.title=1">';
        const parent = rig.engine.spawn({
          title: `parent ${hostile}`,
          prompt: scripted(
            [
              {
                calls: [
                  syncAgent('child', [
                    { calls: [{ name: 'sleep', input: { ms: 60_000 } }] },
                    { reply: 'woke' },
                  ]),
                ],
              },
              { reply: 'done' },
            ],
            'Look after the child.',
          ),
        });
        const others = [0, 1].map((index) =>
          rig.engine.spawn({ title: `sleeper ${index}`, prompt: sleeper(60_000) }),
        );
        await rig.engine.run({ title: 'quick', prompt: scripted([{ reply: 'quick done' }]) });

        await page.goto(dashboard.url);
        // The token leaves the address bar once the page has it.
        // A reload opens it again: the token stays in the address, and no cookie carries it.
        await page.reload();
        expect(await browser.context.cookies()).toEqual([]);
        await expect
          .poll(() => page.locator('#conn').textContent(), { timeout: 15_000 })
          .toBe('live');
        await expect
          .poll(() => page.locator('.row[data-status="running"]').count(), { timeout: 15_000 })
          .toBe(4);
        expect(await page.locator('.row[data-outcome="complete"]').count()).toBe(1);
        expect(await page.locator('#governor .key-card').count()).toBe(1);
        expect(await page.locator('#governor').textContent()).toContain('cohort-scripted');
        expect(await page.locator('#totals').textContent()).toMatch(/5/);
        expect(await page.locator('#chart').count()).toBe(1);

        // A title with markup is text on the page, never an element.
        const parentRow = page.locator(`.row[data-id="${parent.id}"]`);
        expect(await parentRow.textContent()).toContain(hostile);
        expect(await page.locator('.row img').count()).toBe(0);
        expect(await page.title()).not.toBe('1');

        // A click on a row opens its transcript from the journal.
        await parentRow.click({ position: { x: 200, y: 10 } });
        await expect
          .poll(() => page.locator('#transcript').textContent(), { timeout: 10_000 })
          .toContain('Look after the child.');
        // The title is text in the transcript too; no element came of it anywhere.
        expect(await page.locator('#transcript').textContent()).toContain(hostile);
        expect(await page.locator('img').count()).toBe(0);

        // Closed, the transcript leaves the tree whole again; the row's cancel button cancels the
        // parent and, through it, the child.
        await page.locator('#transcript').getByRole('button', { name: /close/ }).click();
        await parentRow.locator('[data-action="cancel"]').click();
        const result = await parent.result;
        expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'dashboard' });
        await expect
          .poll(() => page.locator(`.row[data-id="${parent.id}"]`).getAttribute('data-outcome'), {
            timeout: 10_000,
          })
          .toBe('cancelled');
        expect(await page.locator('.row[data-status="running"]').count()).toBe(2);
        for (const other of others) expect(other.status).not.toBe('settled');

        for (const other of others) other.cancel();
        await Promise.all(others.map((other) => other.result));
        expect(problems).toEqual([]);
        await page.close();
      });
    });

    describe('with cancel off', () => {
      it('shows running agents with no cancel button', async () => {
        const rig = await startRig({ threads: 1 });
        const dashboard = await serveDashboard(rig.engine, { updateMs: 50, cancel: false });
        try {
          const handle = rig.engine.spawn({ title: 'watched', prompt: sleeper(60_000) });
          const page = await browser.context.newPage();
          await page.goto(dashboard.url);
          await expect
            .poll(() => page.locator('.row[data-status="running"]').count(), { timeout: 15_000 })
            .toBe(1);
          expect(await page.locator('[data-action="cancel"]:visible').count()).toBe(0);
          handle.cancel();
          await handle.result;
          await page.close();
        } finally {
          await dashboard.close();
          await rig.close();
        }
      });
    });

    describe('past maxAgents', () => {
      it('drops the rows the server drops', async () => {
        const rig = await startRig({ threads: 1 });
        const dashboard = await serveDashboard(rig.engine, { updateMs: 50, maxAgents: 10 });
        try {
          const page = await browser.context.newPage();
          const problems = watchProblems(page);
          await page.goto(dashboard.url);
          await expect
            .poll(() => page.locator('#conn').textContent(), { timeout: 15_000 })
            .toBe('live');
          const results = [];
          for (let index = 0; index < 15; index++) {
            results.push(
              await rig.engine.run({
                title: `quick ${index}`,
                prompt: scripted([{ reply: 'ok' }]),
              }),
            );
          }
          // The oldest settled rows went: the page shows the 10 the server keeps.
          const kept = results.slice(-10).map((result) => result.id);
          await expect
            .poll(
              () =>
                page
                  .locator('.row')
                  .evaluateAll((rows) =>
                    rows.map((row) => row.getAttribute('data-id')).filter(Boolean),
                  ),
              { timeout: 10_000 },
            )
            .toEqual(kept);
          expect(problems).toEqual([]);
          await page.close();
        } finally {
          await dashboard.close();
          await rig.close();
        }
      });
    });

    describe('on cohort batch --dashboard', () => {
      it('cancels a task from its button, and the task’s result line says cancelled', async () => {
        const dir = tempDir('cohort-dashboard-page-');
        const tasks = path.join(dir, 'tasks.jsonl');
        const prompts = [sleeper(60_000, 'Wait long.'), sleeper(100), sleeper(100)];
        writeFileSync(
          tasks,
          prompts.map((prompt, index) => JSON.stringify({ id: `t${index}`, prompt })).join('\n'),
        );
        const out = path.join(dir, 'out.jsonl');
        const run = runCli([
          'batch',
          tasks,
          '--out',
          out,
          '--tools',
          TEST_TOOLS,
          '--dashboard',
          '0',
        ]);
        await run.waitFor(/^dashboard http/m);
        const url = /^dashboard (\S+)$/m.exec(run.stderr())![1]!;
        const page = await browser.context.newPage();
        const problems = watchProblems(page);
        await page.goto(url);
        await expect
          .poll(() => page.locator('.row[data-outcome="complete"]').count(), { timeout: 20_000 })
          .toBe(2);
        const running = page.locator('.row[data-status="running"]');
        expect(await running.count()).toBe(1);
        await running.locator('[data-action="cancel"]').click();
        expect((await run.exit).code).toBe(1);
        const lines = readResultLines(out);
        expect(lines.find((line) => line.taskId === 't0')).toMatchObject({
          outcome: 'cancelled',
          reason: 'dashboard',
        });
        expect(lines.filter((line) => line.outcome === 'complete')).toHaveLength(2);
        // The page saw the end of the run, and offers no cancel after it.
        await expect
          .poll(() => page.locator('#conn').textContent(), { timeout: 10_000 })
          .toBe('ended');
        expect(await page.locator('[data-action="cancel"]:visible').count()).toBe(0);
        expect(problems).toEqual([]);
        await page.close();
      });
    });
  },
);
