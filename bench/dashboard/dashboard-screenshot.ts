/**
 * `node dist/bench/dashboard/dashboard-screenshot.js [OUT.png]`: the README's picture of the
 * dashboard. It runs a real `cohort batch` of 1,000 agents (a fifth of them with a sub-agent,
 * a few that fail) with `--dashboard 0` against the scripted model in a process of its own, with
 * per-minute limits, some latency and a little overload, opens the page in Debian's headless
 * Chromium and takes the picture once about a third of the batch has settled.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isEntryScript } from '../../src/testing/entry-script.js';
import { type ScriptStep, scriptBlock } from '../../src/testing/index.js';
import { launchChromium } from '../common/chromium.js';
import { startModelProcess } from '../common/model-process.js';
import { builtPath } from '../common/paths.js';

const AGENTS = 1_000;

const scriptPrompt = (steps: ScriptStep[], lead: string) => `${lead}\n\n${scriptBlock({ steps })}`;

/** The batch's task lines: most take a step or two, every fifth asks a sub-agent, a few fail. */
function taskLines(): string {
  const lines: string[] = [];
  for (let index = 0; index < AGENTS; index++) {
    const topic = [
      'pricing page',
      'onboarding flow',
      'release notes',
      'search results',
      'billing emails',
    ][index % 5];
    const title = `review ${topic} #${index}`;
    let steps: ScriptStep[];
    if (index % 97 === 13) {
      steps = [
        { error: { status: 400, message: 'prompt is too long: 210402 tokens > 200000 maximum' } },
      ];
    } else if (index % 5 === 0) {
      steps = [
        {
          text: 'Checking the details with a helper.',
          calls: [
            {
              name: 'agent',
              input: {
                title: `check ${topic} #${index}`,
                prompt: scriptPrompt(
                  [{ text: 'Looked at it.' }, { reply: 'fine' }],
                  `Check ${topic}.`,
                ),
              },
            },
          ],
        },
        { reply: `reviewed ${topic}` },
      ];
    } else {
      steps = [{ text: `Reading the ${topic}.` }, { reply: `reviewed ${topic}` }];
    }
    lines.push(
      JSON.stringify({
        id: `t${index}`,
        title,
        prompt: scriptPrompt(steps, `Review the ${topic}.`),
      }),
    );
  }
  return `${lines.join('\n')}\n`;
}

async function main(out: string): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cohort-screenshot-'));
  const tasks = path.join(dir, 'tasks.jsonl');
  writeFileSync(tasks, taskLines());
  const model = await startModelProcess([
    '--rpm',
    '4000',
    '--itpm',
    '2000000',
    '--otpm',
    '400000',
    '--ttft-ms',
    '900',
    '--tps',
    '60',
    '--jitter',
    '0.6',
    '--overload',
    '0.01',
    '--seed',
    '7',
  ]);
  const batch = spawn(
    process.execPath,
    [
      builtPath('src/cli/cli.js'),
      'batch',
      tasks,
      '--out',
      path.join(dir, 'out.jsonl'),
      '--base-url',
      model.url,
      '--max-depth',
      '2',
      '--dashboard',
      '0',
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  batch.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const check = setInterval(() => {
      const found = /^dashboard (\S+)$/m.exec(stderr)?.[1];
      if (found) {
        clearInterval(check);
        resolve(found);
      }
    }, 50);
    batch.once('exit', () => reject(new Error(`cohort batch ended first:\n${stderr}`)));
  });
  const browser = await launchChromium({ width: 1440, height: 900 });
  const { context } = browser;
  try {
    const page = await context.newPage();
    await page.goto(url);
    // Until a third has settled, by the dashboard's own API (the page shows what it says).
    for (let settled = 0; settled < AGENTS / 3; ) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      const state = (await (await fetch(url.replace('/?', '/api/state?'))).json()) as {
        totals: { settled: number };
      };
      settled = state.totals.settled;
    }
    // One more delta, so the page shows that state; then the tree's end, where the running
    // agents are (rows are in the order the agents started).
    await new Promise((resolve) => setTimeout(resolve, 600));
    await page
      .locator('#tree')
      .evaluate((tree: { scrollTop: number; scrollHeight: number; clientHeight: number }) => {
        tree.scrollTop = tree.scrollHeight - tree.clientHeight - 240;
      });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await page.screenshot({ path: out });
    console.log(`wrote ${out}`);
  } finally {
    await browser.close();
    batch.kill('SIGTERM');
    await new Promise((resolve) => batch.once('exit', resolve));
    await model.stop();
  }
}

if (isEntryScript(import.meta.url)) {
  main(path.resolve(process.argv[2] ?? 'docs/dashboard.png')).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
