import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseTasks, taskAgentOptions } from '../src/cli/task-lines.js';
import { checkEngine, type Engine } from '../src/main/engine.js';
import type { Budget, BudgetKind, ModelPrice } from '../src/shared/budget.js';
import { budgetNotice } from '../src/shared/budget-meter.js';
import { UsageError } from '../src/shared/errors.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import { restoreTranscript } from '../src/shared/restore.js';
import type { AgentResult } from '../src/shared/result.js';
import { NUDGE_TEXT } from '../src/shared/tools/reply.js';
import type { ScriptedModel, ScriptedRequestEvent, ScriptStep } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import {
  assertToolUsesAnswered,
  asyncAgent,
  contentBlocks,
  eventLog,
  expectResultsExactlyOnce,
  type HostGate,
  hostGate,
  type Rig,
  readHistory,
  readResult,
  readTranscript,
  scripted,
  startRig,
  syncAgent,
  tempDir,
} from './helpers.js';

// Budgets end to end: real workers, the real SDK, the scripted model over HTTP. Every limit is
// reached by what the scripts spend, so no test waits on a clock; the time limit is passed by a
// scripted step that waits far longer than the limit.

/**
 * The scripted model's price here: a dollar an input token and four an output token, so every
 * cost is a whole number of dollars and `costUsd` can be compared exactly.
 */
const PRICE: ModelPrice = { inputPerMTok: 1_000_000, outputPerMTok: 4_000_000 };
const MODEL = 'cohort-scripted';

/** A cancel must settle through its worker: a grace far past the test timeout never fires. */
const GRACE_MS = 600_000;

const echo = (value: string): ScriptStep => ({ calls: [{ name: 'echo', input: { value } }] });

/** Records the tool names each request to `model` offered, in arrival order, until `stop`. */
function recordRequests(model: ScriptedModel): { readonly tools: string[][]; stop(): void } {
  const tools: string[][] = [];
  const onRequest = (event: ScriptedRequestEvent) => tools.push(event.tools);
  model.on('request', onRequest);
  return { tools, stop: () => model.off('request', onRequest) };
}

function texts(message: MessageParam): string[] {
  return contentBlocks(message).flatMap((block) => (block.type === 'text' ? [block.text] : []));
}

/** Indexes of the user messages that carry a budget notice (any kind). */
function noticeIndexes(transcript: MessageParam[]): number[] {
  return transcript.flatMap((message, index) =>
    message.role === 'user' && texts(message).some((text) => text.startsWith('[budget spent: '))
      ? [index]
      : [],
  );
}

/**
 * The transcript of an agent that ended with its last turn: the one notice (of `kind`) is the
 * user message right before its last assistant message, and every tool_use is answered.
 */
function expectNoticeBeforeLastTurn(result: AgentResult, kind: BudgetKind): MessageParam[] {
  const transcript = readTranscript(result);
  assertToolUsesAnswered(transcript);
  const lastTurn = transcript.findLastIndex((message) => message.role === 'assistant');
  expect(noticeIndexes(transcript)).toEqual([lastTurn - 1]);
  expect(texts(transcript[lastTurn - 1]!)).toContain(budgetNotice(kind));
  return transcript;
}

/**
 * What a resumed child would read back from this real transcript: the whole of it is the result
 * the run produced; cut before its last assistant message, the last turn is still to be taken.
 */
function expectRestoredLastTurn(result: AgentResult, kind: BudgetKind, reply?: string): void {
  const lines = readTranscript(result).map((message) => JSON.stringify(message));
  const whole = restoreTranscript(lines.join('\n'));
  expect(whole?.ended).toEqual(
    reply === undefined
      ? { kind: 'empty', budgetExceeded: kind }
      : { kind: 'replied', replies: [reply], budgetExceeded: kind },
  );
  const lastTurn = lines.findLastIndex((line) => JSON.parse(line).role === 'assistant');
  const cut = restoreTranscript(lines.slice(0, lastTurn).join('\n'));
  expect(cut?.finalTurn).toBe(kind);
  expect(cut?.ended).toBeUndefined();
}

interface KindCase {
  kind: BudgetKind;
  budget: Budget;
  /** The limit is reached at the end of the last of these steps; `maxSteps` is their number. */
  before: ScriptStep[];
}

const KIND_CASES: KindCase[] = [
  { kind: 'steps', budget: { steps: 2 }, before: [echo('one'), echo('two')] },
  { kind: 'inputTokens', budget: { inputTokens: 1 }, before: [echo('one')] },
  { kind: 'outputTokens', budget: { outputTokens: 1 }, before: [echo('one')] },
  // At a dollar an input token, the first request costs far more than a dollar.
  { kind: 'usd', budget: { usd: 1 }, before: [echo('one')] },
  // The step waits ten times the limit before its answer, however fast the machine is.
  { kind: 'time', budget: { timeMs: 20 }, before: [{ ...echo('one'), delayMs: 200 }] },
];

describe('each budget kind gives one last turn with only reply', () => {
  let rig: Rig;

  beforeAll(async () => {
    rig = await startRig({ threads: 1, prices: { [MODEL]: PRICE } });
  });

  afterAll(async () => {
    await rig.close();
  });

  /** Runs one agent whose `maxSteps` equals the steps before its last turn. */
  async function runCase(
    { kind, budget, before }: KindCase,
    last: ScriptStep,
  ): Promise<{ result: AgentResult; offered: string[][] }> {
    const requests = recordRequests(rig.model);
    try {
      const result = await rig.engine.run({
        title: `${kind} budget`,
        prompt: scripted([...before, last]),
        budget,
        maxSteps: before.length,
      });
      return { result, offered: requests.tools };
    } finally {
      requests.stop();
    }
  }

  /** The steps before the last turn offered the agent's tools; the last offered reply alone. */
  function expectLastRequestOnlyReply(offered: string[][], before: number): void {
    expect(offered).toHaveLength(before + 1);
    for (const tools of offered.slice(0, -1))
      expect(tools).toEqual(expect.arrayContaining(['echo', 'reply']));
    expect(offered.at(-1)).toEqual(['reply']);
  }

  describe.each(KIND_CASES)('$kind', (kindCase) => {
    const { kind, before } = kindCase;

    it('a reply in the last turn completes with budgetExceeded and that reply as the text', async () => {
      const reply = `Best I have so far (${kind}).`;
      const { result, offered } = await runCase(kindCase, { reply });
      expect(result).toMatchObject({ outcome: 'complete', budgetExceeded: kind, text: reply });
      // The last turn is a step past maxSteps: had it counted, the agent would have been capped.
      expect(result.usage.steps).toBe(before.length + 1);
      expectLastRequestOnlyReply(offered, before.length);
      expectNoticeBeforeLastTurn(result, kind);
      expectRestoredLastTurn(result, kind, reply);
    });

    it('a last turn without a reply ends empty with budgetExceeded, with no nudge', async () => {
      const { result, offered } = await runCase(kindCase, { text: `Still working (${kind}).` });
      expect(result).toMatchObject({ outcome: 'empty', budgetExceeded: kind, text: '' });
      expect(result.usage.steps).toBe(before.length + 1);
      expectLastRequestOnlyReply(offered, before.length);
      const transcript = expectNoticeBeforeLastTurn(result, kind);
      expect(transcript.some((message) => message.content === NUDGE_TEXT)).toBe(false);
      expectRestoredLastTurn(result, kind);
    });
  });

  it('a step without tool calls that reaches the budget is answered by the notice, not the nudge', async () => {
    const result = await rig.engine.run({
      prompt: scripted([{ text: 'Thinking it over.' }, { reply: 'Here is what I found.' }]),
      budget: { steps: 1 },
      maxSteps: 1,
    });
    expect(result).toMatchObject({
      outcome: 'complete',
      budgetExceeded: 'steps',
      text: 'Here is what I found.',
    });
    const transcript = readTranscript(result);
    expect(transcript[2]).toEqual({ role: 'user', content: budgetNotice('steps') });
    expect(transcript.some((message) => message.content === NUDGE_TEXT)).toBe(false);
    expectRestoredLastTurn(result, 'steps', 'Here is what I found.');
  });

  it('a tool other than reply called in the last turn is refused, not run, and the agent ends empty', async () => {
    const file = path.join(tempDir(), 'count.txt');
    const count = { calls: [{ name: 'count', input: { file } }] };
    const result = await rig.engine.run({
      prompt: scripted([count, count]),
      budget: { steps: 1 },
    });
    expect(result).toMatchObject({ outcome: 'empty', budgetExceeded: 'steps' });
    expect(readFileSync(file, 'utf8')).toBe('ran\n');
    const transcript = expectNoticeBeforeLastTurn(result, 'steps');
    const answer = contentBlocks(transcript.at(-1)!);
    expect(answer).toEqual([expect.objectContaining({ type: 'tool_result', is_error: true })]);
    expectRestoredLastTurn(result, 'steps');
  });

  it('usage.costUsd is the tokens at the model price, and absent for a model with no price', async () => {
    const priced = await rig.engine.run({ prompt: scripted([echo('a'), { reply: 'priced' }]) });
    expect(priced.outcome).toBe('complete');
    const { inputTokens, outputTokens } = priced.usage;
    expect(inputTokens).toBeGreaterThan(0);
    expect(outputTokens).toBeGreaterThan(0);
    expect(priced.usage.costUsd).toBe(inputTokens * 1 + outputTokens * 4);
    const unpriced = await rig.engine.run({
      prompt: scripted([echo('a'), { reply: 'unpriced' }]),
      model: 'unpriced-model',
    });
    expect(unpriced.outcome).toBe('complete');
    expect(unpriced.usage.inputTokens).toBeGreaterThan(0);
    expect(unpriced.usage).not.toHaveProperty('costUsd');
  });
});

/** The budget a child ran under, from its start record in the journal. */
function metaBudget(result: AgentResult): unknown {
  return readHistory(result).meta?.budget;
}

describe('limits merge field by field: engine default, then the spawn or task line', () => {
  const ENGINE_BUDGET: Budget = { usd: 100, steps: 2 };
  let rig: Rig;

  beforeAll(async () => {
    // A tiny price: a `usd` limit needs one, and $100 is never reached here.
    rig = await startRig({
      threads: 1,
      budget: ENGINE_BUDGET,
      prices: { 'cohort-scripted': { inputPerMTok: 1, outputPerMTok: 1 } },
    });
  });

  afterAll(async () => {
    await rig.close();
  });

  /** `count` echo steps, then a reply. */
  const echoes = (count: number, reply: string) =>
    scripted([
      ...Array.from({ length: count }, (_, index) => echo(`step ${index + 1}`)),
      { reply },
    ]);

  it('a spawn without a budget runs under the engine default', async () => {
    const result = await rig.engine.run({ prompt: echoes(2, 'default') });
    expect(result).toMatchObject({ outcome: 'complete', budgetExceeded: 'steps', text: 'default' });
    expect(result.usage.steps).toBe(3);
    expect(metaBudget(result)).toEqual(ENGINE_BUDGET);
  });

  it("a spawn's other field keeps the engine's steps; its own steps replaces them", async () => {
    // Step 3 of these scripts is an echo: in a last turn it is refused and the agent ends empty.
    const added = await rig.engine.run({
      prompt: echoes(3, 'never'),
      budget: { outputTokens: 1_000_000 },
    });
    expect(added).toMatchObject({ outcome: 'empty', budgetExceeded: 'steps' });
    expect(added.usage.steps).toBe(3);
    expect(metaBudget(added)).toEqual({ ...ENGINE_BUDGET, outputTokens: 1_000_000 });
    const replaced = await rig.engine.run({ prompt: echoes(3, 'later'), budget: { steps: 3 } });
    expect(replaced).toMatchObject({ outcome: 'complete', budgetExceeded: 'steps', text: 'later' });
    expect(replaced.usage.steps).toBe(4);
    expect(metaBudget(replaced)).toEqual({ usd: 100, steps: 3 });
  });

  it('a task line budget, through taskAgentOptions, reaches budgetExceeded on its result', async () => {
    const line = JSON.stringify({
      id: 'capped',
      prompt: scripted([echo('one'), { reply: 'line reply' }]),
      budget: { steps: 1, time: '10m' },
    });
    const parsed = parseTasks(line);
    expect(parsed.errors).toEqual([]);
    const result = await rig.engine.run(taskAgentOptions(parsed.tasks[0]!));
    expect(result).toMatchObject({
      title: 'capped',
      outcome: 'complete',
      budgetExceeded: 'steps',
      text: 'line reply',
    });
    expect(result.usage.steps).toBe(2);
    expect(metaBudget(result)).toEqual({ usd: 100, steps: 1, timeMs: 600_000 });
  });

  it('cohort batch: a line with "budget":{"steps":1} under --budget \'{"usd":100}\' has budgetExceeded on its result line', async () => {
    const folder = tempDir('cohort-budget-batch-');
    const tasks = path.join(folder, 'tasks.jsonl');
    writeFileSync(
      tasks,
      [
        {
          id: 'capped',
          prompt: scripted([{ text: 'Working on it.' }, { reply: 'cli reply' }]),
          budget: { steps: 1 },
        },
        { id: 'free', prompt: scripted([{ reply: 'free reply' }]) },
      ]
        .map((task) => JSON.stringify(task))
        .join('\n'),
    );
    const out = path.join(folder, 'results.jsonl');
    const run = runCli([
      'batch',
      tasks,
      '--out',
      out,
      '--base-url',
      rig.model.url,
      '--budget',
      '{"usd":100}',
      '--threads',
      '1',
      '--log-dir',
      path.join(folder, 'logs'),
      '--quiet',
    ]);
    expect((await run.exit).code, run.stderr()).toBe(0);
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AgentResult & { taskId: string });
    const byTask = new Map(lines.map((line) => [line.taskId, line]));
    const capped = byTask.get('capped')!;
    expect(capped).toMatchObject({
      outcome: 'complete',
      budgetExceeded: 'steps',
      text: 'cli reply',
    });
    expect(metaBudget(capped)).toEqual({ usd: 100, steps: 1 });
    const free = byTask.get('free')!;
    expect(free).toMatchObject({ outcome: 'complete', text: 'free reply' });
    expect(free).not.toHaveProperty('budgetExceeded');
    expect(metaBudget(free)).toEqual({ usd: 100 });
  });

  it('engine.spawn and checkAgent refuse a bad budget with a UsageError naming the field', async () => {
    const requests = rig.model.stats.requests;
    const live = rig.engine.liveCount;
    const refusal = (run: () => unknown): Error => {
      try {
        run();
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return error as Error;
      }
      throw new Error('Expected a UsageError, got none');
    };
    const spawnWith = (budget: unknown) => () =>
      rig.engine.spawn({ prompt: 'never runs', budget: budget as Budget });
    expect(refusal(spawnWith({ steps: 0 })).message).toBe(
      'Expected `budget.steps` to be a whole number from 1 and up, got `0` (number)',
    );
    expect(refusal(spawnWith({ usd: -1 })).message).toMatch(/^Expected `budget\.usd` to be /);
    expect(refusal(spawnWith({ timeMs: 1.5 })).message).toMatch(/^Expected `budget\.timeMs` /);
    expect(refusal(spawnWith({ tree: 'yes' })).message).toMatch(/^Expected `budget\.tree` /);
    expect(refusal(spawnWith({ stepz: 1 })).message).toMatch(/^Expected `budget` to have only /);
    const check = await checkEngine({});
    const checkWith = (budget: unknown) => () =>
      check.checkAgent({ prompt: 'never runs', budget: budget as Budget });
    expect(refusal(checkWith({ inputTokens: 2.5 })).message).toMatch(
      /^Expected `budget\.inputTokens` /,
    );
    expect(refusal(checkWith({ outputTokens: '10' })).message).toMatch(
      /^Expected `budget\.outputTokens` /,
    );
    await expect(checkEngine({ budget: { usd: 0 } })).rejects.toThrow(/`budget\.usd`/);
    // A `usd` limit on a model with no price could never stop anything: refused, naming it.
    const unpriced = /^Expected a price for model `no-such-model` to hold a `budget\.usd` limit/;
    expect(
      refusal(() => check.checkAgent({ prompt: 'x', model: 'no-such-model', budget: { usd: 1 } }))
        .message,
    ).toMatch(unpriced);
    expect(
      refusal(() => rig.engine.spawn({ prompt: 'x', model: 'no-such-model', budget: { usd: 1 } }))
        .message,
    ).toMatch(unpriced);
    // Nothing was spawned, nothing was asked of the model. (`liveCount` is compared with what it
    // was: an earlier run may keep its slot for a moment after its result.)
    expect(rig.engine.liveCount).toBe(live);
    expect(rig.model.stats.requests).toBe(requests);
  });
});

describe('a tree budget stops a whole tree (maxDepth 2)', () => {
  let rig: Rig | undefined;

  afterEach(async () => {
    await rig?.close();
    rig = undefined;
  });

  /**
   * Orders the test after the worker's traffic. Every test here runs one thread, so every child's
   * messages share one uplink each way, in order. A probe child waits in `probe`: its `tool-call`
   * event reaches main after everything the worker sent before it (the members' step spends, a
   * new child's `started`), and its cancelled result comes back after the worker has read
   * everything main sent before the cancel (a tree budget's word to each member).
   */
  async function syncWithWorker(engine: Engine, probe: HostGate, call: number): Promise<void> {
    const log = eventLog();
    const handle = engine.spawn({
      title: `probe ${call}`,
      prompt: scripted([{ calls: [{ name: probe.tool.name, input: {} }] }, { reply: 'never' }]),
      onEvent: log.onEvent,
      eventTypes: ['tool-call'],
    });
    await log.waitFor((event) => event.type === 'tool-call');
    handle.cancel('user');
    expect(await handle.result).toMatchObject({ outcome: 'cancelled', reason: 'user' });
    await probe.aborted(call);
  }

  interface TreeRun {
    parent: AgentResult;
    children: Record<'A' | 'S' | 'L', AgentResult>;
    /** Requests that offered `reply` alone: last turns. */
    lastTurns: number;
  }

  /**
   * The parent P (depth 1) takes one step that starts async A and sync S, waits in `hold_p`,
   * then starts async L. A, S and L each take a step into a hold of their own, then an echo, then
   * reply. With a tree budget of 3 steps, P's, A's and S's first steps spend it while all three
   * wait; L starts after that.
   */
  async function runTree(budget: Budget): Promise<TreeRun> {
    const holds = {
      A: hostGate('hold_a'),
      S: hostGate('hold_s'),
      P: hostGate('hold_p'),
      L: hostGate('hold_l'),
    };
    const probe = hostGate('probe');
    rig = await startRig({
      threads: 1,
      maxDepth: 2,
      cancelGraceMs: GRACE_MS,
      hostTools: [...Object.values(holds).map((gate) => gate.tool), probe.tool],
    });
    const engine = rig.engine;
    const requests = recordRequests(rig.model);
    const child = (name: string, gate: HostGate): ScriptStep[] => [
      { calls: [{ name: gate.tool.name, input: {} }] },
      echo(`${name} goes on`),
      { reply: `${name} done` },
    ];
    const log = eventLog();
    const parent = engine.spawn({
      title: 'P',
      prompt: scripted([
        {
          calls: [
            asyncAgent('A', child('A', holds.A)),
            syncAgent('S', child('S', holds.S)),
            { name: 'hold_p', input: {} },
            asyncAgent('L', child('L', holds.L)),
          ],
        },
        { reply: 'P final' },
      ]),
      budget,
      onEvent: log.onEvent,
    });
    await Promise.all([holds.A.entered(), holds.S.entered(), holds.P.entered()]);
    // P, A and S have each taken a step: with `tree`, main has counted the third and told all.
    await syncWithWorker(engine, probe, 1);
    holds.P.open();
    await holds.L.entered();
    // L joined after the tree was spent: its word went with its start.
    await syncWithWorker(engine, probe, 2);
    holds.A.open();
    holds.L.open();
    // The async children settle before P can end (and close its scope on them).
    const [a, l] = await Promise.all([log.settled('A'), log.settled('L')]);
    holds.S.open();
    const result = await parent.result;
    requests.stop();
    const started = log.events.find((event) => event.type === 'agent-start' && event.title === 'S');
    const s = readResult(rig.logDir, started!.agentId);
    expectResultsExactlyOnce(engine, { allFromWorkers: true });
    const lastTurns = requests.tools.filter(
      (tools) => tools.length === 1 && tools[0] === 'reply',
    ).length;
    return { parent: result, children: { A: a, S: s, L: l }, lastTurns };
  }

  it('once its total is reached every live member takes its last turn, and a late member is told at once', async () => {
    const run = await runTree({ steps: 3, tree: true });
    expect(run.parent).toMatchObject({
      outcome: 'complete',
      budgetExceeded: 'steps',
      text: 'P final',
    });
    expectNoticeBeforeLastTurn(run.parent, 'steps');
    for (const [name, result] of Object.entries(run.children)) {
      // Each took its hold step, got the notice, and its next scripted step (an echo) was not
      // a reply: empty, from the tree's word alone (a child has no budget of its own).
      expect(result, name).toMatchObject({ outcome: 'empty', budgetExceeded: 'steps' });
      expect(result.usage.steps, name).toBe(2);
      expectNoticeBeforeLastTurn(result, 'steps');
    }
    expect(run.lastTurns).toBe(4);
  });

  it('without `tree`, the same children run to their scripts’ ends', async () => {
    const run = await runTree({ steps: 3 });
    expect(run.parent).toMatchObject({ outcome: 'complete', text: 'P final' });
    expect(run.parent).not.toHaveProperty('budgetExceeded');
    for (const [name, result] of Object.entries(run.children)) {
      expect(result, name).toMatchObject({ outcome: 'complete', text: `${name} done` });
      expect(result, name).not.toHaveProperty('budgetExceeded');
      expect(result.usage.steps, name).toBe(3);
      expect(noticeIndexes(readTranscript(result))).toEqual([]);
    }
    expect(run.lastTurns).toBe(0);
  });
});

describe('restoreTranscript keeps the last-turn state of a resumed child', () => {
  const user = (content: unknown) => JSON.stringify({ role: 'user', content });
  const use = (id: string, name: string, input: unknown) =>
    JSON.stringify({ role: 'assistant', content: [{ type: 'tool_use', id, name, input }] });
  const answer = (id: string, options: { notice?: BudgetKind; isError?: boolean } = {}) =>
    user([
      {
        type: 'tool_result',
        tool_use_id: id,
        content: options.isError ? 'unknown tool' : 'ok',
        ...(options.isError ? { is_error: true } : {}),
      },
      ...(options.notice ? [{ type: 'text', text: budgetNotice(options.notice) }] : []),
    ]);
  const text = (value: string) =>
    JSON.stringify({ role: 'assistant', content: [{ type: 'text', text: value }] });
  const restore = (lines: string[]) => restoreTranscript(lines.join('\n'));

  it('a notice with the last step’s results: the next step is the last turn', () => {
    const state = restore([user('go'), use('t1', 'echo', {}), answer('t1', { notice: 'usd' })]);
    expect(state).toMatchObject({ finalTurn: 'usd', steps: 1, counted: 1, nudged: false });
    expect(state?.ended).toBeUndefined();
  });

  it('a notice after a step without calls (a string message): the same', () => {
    const state = restore([user('go'), text('Thinking.'), user(budgetNotice('time'))]);
    expect(state).toMatchObject({ finalTurn: 'time', steps: 1, nudged: false });
    expect(state?.ended).toBeUndefined();
  });

  it('a last turn cut off before its batch was answered runs that batch again, still the last turn', () => {
    const state = restore([
      user('go'),
      use('t1', 'echo', {}),
      answer('t1', { notice: 'steps' }),
      use('t2', 'reply', { result: 'lost' }),
    ]);
    // Its response was committed: its calls run again, within the last turn's rules.
    expect(state).toMatchObject({ finalTurn: 'steps', steps: 2 });
    expect(state?.pending).toEqual([{ id: 't2', name: 'reply', input: { result: 'lost' } }]);
    expect(state?.messages).toHaveLength(4);
    expect(state?.ended).toBeUndefined();
  });

  it('a last turn answered in text ended the child empty, with budgetExceeded', () => {
    const state = restore([
      user('go'),
      use('t1', 'echo', {}),
      answer('t1', { notice: 'inputTokens' }),
      text('No reply from me.'),
    ]);
    expect(state?.ended).toEqual({ kind: 'empty', budgetExceeded: 'inputTokens' });
    expect(state).not.toHaveProperty('finalTurn');
  });

  it('a last turn that called another tool ended the child empty, with budgetExceeded', () => {
    const state = restore([
      user('go'),
      use('t1', 'echo', {}),
      answer('t1', { notice: 'outputTokens' }),
      use('t2', 'echo', {}),
      answer('t2', { isError: true }),
    ]);
    expect(state?.ended).toEqual({ kind: 'empty', budgetExceeded: 'outputTokens' });
    expect(state).not.toHaveProperty('finalTurn');
  });

  it('a last turn that replied ended the child with that reply, with budgetExceeded', () => {
    const state = restore([
      user('go'),
      use('t1', 'echo', {}),
      answer('t1', { notice: 'steps' }),
      use('t2', 'reply', { result: 'the best so far' }),
      answer('t2'),
    ]);
    expect(state?.ended).toEqual({
      kind: 'replied',
      replies: ['the best so far'],
      budgetExceeded: 'steps',
    });
  });

  it('a prompt that quotes a notice is no notice', () => {
    const state = restore([user(budgetNotice('steps')), use('t1', 'echo', {}), answer('t1')]);
    expect(state).not.toHaveProperty('finalTurn');
    expect(state?.ended).toBeUndefined();
  });
});
