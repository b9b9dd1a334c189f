/**
 * A `cohort run` whose root starts five async children, each with a slow second step, for the
 * tests of `cohort run --resume`: the real CLI in a child process, the scripted model over HTTP.
 */
import path from 'node:path';
import { expect, vi } from 'vitest';
import type { AgentHistory } from '../src/index.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import type { ScriptCall, ScriptedModel } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { agentCall, readJournal, scripted, TEST_TOOLS, tempDir } from './helpers.js';

export const CHILDREN = 5;

/** A child: a counted step, a slow counted step (where the kill lands), then its reply. */
export function child(index: number, counter: string) {
  return agentCall(
    `c${index}`,
    [
      { calls: [{ name: 'count', input: { file: counter } }] },
      { delayMs: 2500, calls: [{ name: 'count', input: { file: counter } }] },
      { reply: `c${index} done` },
    ],
    'async',
  );
}

/**
 * A run's prompt and flags: the root's first step is `rootFirstStep`'s calls, then it waits, then
 * it notes each delivery. `--json` unless `json` is false.
 */
export function setUp(
  model: ScriptedModel,
  rootFirstStep: (counters: string[]) => ScriptCall[] = (files) =>
    files.map((file, index) => child(index, file)),
  json = true,
) {
  const root = tempDir('cohort-resume-');
  const counters = Array.from({ length: CHILDREN }, (_, index) =>
    path.join(root, `count-${index}.txt`),
  );
  const prompt = scripted([
    { calls: rootFirstStep(counters) },
    { text: 'Waiting for my agents.' },
    ...Array.from({ length: CHILDREN }, () => ({ text: 'Noted.' })),
  ]);
  const logRoot = path.join(root, 'logs');
  const common = [
    '--base-url',
    model.url,
    '--tools',
    TEST_TOOLS,
    '--log-dir',
    logRoot,
    ...(json ? ['--json'] : []),
  ];
  return { counters, prompt, logRoot, common };
}

type Run = ReturnType<typeof runCli>;

/** The run's id, from the first JSON line. */
export async function runId(run: Run): Promise<string> {
  await run.waitFor(/^\{"type":"run".*\n/, 'stdout');
  const first = JSON.parse(run.stdout().split('\n', 1)[0]!) as { type: string; id: string };
  expect(first.type).toBe('run');
  return first.id;
}

/** The children of a run, as its journal tells them. */
export function childrenOf(dir: string): AgentHistory[] {
  return [...readJournal(dir).values()].filter((agent) => agent.id !== 'root');
}

/** Resolves once every child of the run in `dir` is in its slow second step, its first done. */
export async function inSecondSteps(dir: string): Promise<void> {
  await vi.waitFor(
    () => {
      const children = childrenOf(dir);
      expect(children).toHaveLength(CHILDREN);
      for (const agent of children) expect(agent.messages).toHaveLength(3);
    },
    { timeout: 15_000, interval: 50 },
  );
}

/** Kills `run` with -9 once every child is in its slow second step, its first committed. */
export async function killInSecondSteps(dir: string, run: Run): Promise<void> {
  await inSecondSteps(dir);
  run.child.kill('SIGKILL');
  expect((await run.exit).signal).toBe('SIGKILL');
}

/** A run started and killed in its children's second steps: its id and folder. */
export async function killedRun(
  rig: ReturnType<typeof setUp>,
): Promise<{ id: string; dir: string }> {
  const first = runCli(['run', rig.prompt, ...rig.common]);
  const id = await runId(first);
  const dir = path.join(rig.logRoot, id);
  await killInSecondSteps(dir, first);
  return { id, dir };
}

/** How many times each id's result opens a block of the root's transcript. */
export function deliveries(root: AgentHistory): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of root.messages as MessageParam[]) {
    if (message.role !== 'user' || typeof message.content === 'string') continue;
    for (const block of message.content) {
      if (block.type !== 'text' || !block.text.startsWith('{"kind":"agent_result"')) continue;
      const id = (JSON.parse(block.text.split('\n', 1)[0]!) as { id: string }).id;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  }
  return counts;
}
