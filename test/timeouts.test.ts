import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, type OnTestFinishedHandler } from 'vitest';
import { parseTasks } from '../src/cli/task-lines.js';
import { Engine } from '../src/main/engine.js';
import type { EngineOptions } from '../src/main/engine-options.js';
import { Session } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import type { AnyTool, ToolContext } from '../src/shared/tools/types.js';
import {
  assertToolUsesAnswered,
  contentBlocks,
  eventLog,
  expectResultsExactlyOnce,
  latch,
  type Rig,
  readTranscript,
  scripted,
  startRig,
  tempDir,
} from './helpers.js';

// Time limits that hold (docs/TOOLS.md, "Time limits"): a tool call's `timeoutMs`, a spawn's
// `timeout`, and the watchdog that ends a worker thread a tool blocks. Bounds on elapsed time are
// generous on purpose: they tell "ended at its limit" from "waited for something else" (a cancel
// grace, the ten-minute default), not how fast a machine is.

const TIMEOUT_TOOLS = fileURLToPath(new URL('./fixtures/timeout-tools.mjs', import.meta.url));
const BAD_TOOLS = fileURLToPath(new URL('./fixtures/bad-timeout-tools.mjs', import.meta.url));

/**
 * A rig of the test's own, closed when it ends: the tests of a describe run side by side, each
 * spending most of its time waiting on a limit it sets.
 */
async function ownRig(
  onTestFinished: (handler: OnTestFinishedHandler) => void,
  options: EngineOptions,
): Promise<Rig> {
  const rig = await startRig(options);
  onTestFinished(() => rig.close());
  return rig;
}

/** The text of the tool_result answering the first call in `messages`. */
function firstToolResult(messages: ReturnType<typeof readTranscript>) {
  for (const message of messages) {
    if (message.role !== 'user') continue;
    for (const block of contentBlocks(message)) {
      if (block.type === 'tool_result') return block;
    }
  }
  throw new Error('no tool_result in the transcript');
}

describe.concurrent('tool time limits', () => {
  it('answers a hung worker tool with an is_error at its timeoutMs, and the agent goes on', async ({
    onTestFinished,
  }) => {
    const rig = await ownRig(onTestFinished, { threads: 1, toolModules: [TIMEOUT_TOOLS] });
    const started = performance.now();
    const result = await rig.engine.run({
      prompt: scripted([{ calls: [{ name: 'hang', input: {} }] }, { reply: 'went on' }]),
    });
    const elapsed = performance.now() - started;
    expect(result).toMatchObject({ outcome: 'complete', text: 'went on' });
    const answer = firstToolResult(readTranscript(result));
    expect(answer.is_error).toBe(true);
    expect(String(answer.content)).toMatch(/`hang` timed out after 1s \(its timeoutMs is 1000\)/);
    assertToolUsesAnswered(readTranscript(result));
    // Its limit, not the ten-minute default or a thread's termination, ended it.
    expect(elapsed).toBeLessThan(20_000);
    expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
    console.info(
      `hung worker tool (timeoutMs 1000): the agent ended after ${Math.round(elapsed)} ms`,
    );
  });

  it("applies the engine's toolTimeoutMs to a tool that sets none", async ({ onTestFinished }) => {
    const rig = await ownRig(onTestFinished, {
      threads: 1,
      toolModules: [TIMEOUT_TOOLS],
      toolTimeoutMs: 500,
    });
    const result = await rig.engine.run({
      prompt: scripted([{ calls: [{ name: 'hang_untimed', input: {} }] }, { reply: 'went on' }]),
    });
    expect(result).toMatchObject({ outcome: 'complete', text: 'went on' });
    expect(String(firstToolResult(readTranscript(result)).content)).toMatch(
      /`hang_untimed` timed out after 500ms/,
    );
  });

  it("aborts a hung host tool's signal with a TimeoutError and answers the child at once", async ({
    onTestFinished,
  }) => {
    const reasons: unknown[] = [];
    const aborted = latch();
    const hostHang: AnyTool = {
      name: 'host_hang',
      description: 'Never returns; notes why its signal aborted.',
      inputSchema: { type: 'object' },
      timeoutMs: 1000,
      run: (_input: unknown, context: ToolContext) =>
        new Promise(() => {
          context.signal.addEventListener('abort', () => {
            reasons.push(context.signal.reason);
            aborted.open();
          });
        }),
    };
    const rig = await ownRig(onTestFinished, { threads: 1, hostTools: [hostHang] });
    const started = performance.now();
    const result = await rig.engine.run({
      prompt: scripted([{ calls: [{ name: 'host_hang', input: {} }] }, { reply: 'went on' }]),
    });
    const elapsed = performance.now() - started;
    expect(result).toMatchObject({ outcome: 'complete', text: 'went on' });
    const answer = firstToolResult(readTranscript(result));
    expect(answer.is_error).toBe(true);
    expect(String(answer.content)).toMatch(/^`host_hang` timed out after 1s/);
    await aborted.opened;
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatchObject({ name: 'TimeoutError' });
    expect((reasons[0] as Error).message).toMatch(/`host_hang` timed out after 1s/);
    expect(elapsed).toBeLessThan(20_000);
    console.info(
      `hung host tool (timeoutMs 1000): the agent ended after ${Math.round(elapsed)} ms`,
    );
  });

  it("times the root agent's own host tool calls too", async ({ onTestFinished }) => {
    const hostHang: AnyTool = {
      name: 'host_hang',
      description: 'Never returns.',
      inputSchema: { type: 'object' },
      timeoutMs: 300,
      run: () => new Promise(() => {}),
    };
    const rig = await ownRig(onTestFinished, { threads: 1, hostTools: [hostHang] });
    const session = new Session(rig.engine, { autoWake: false });
    const turn = await session.send(
      scripted([{ calls: [{ name: 'host_hang', input: {} }] }, { text: 'the root went on' }]),
    );
    expect(turn).toMatchObject({ outcome: 'ready', text: 'the root went on' });
    await session.close();
  });

  it('terminates a thread a busy-looping tool blocks; its other agents still complete', async ({
    onTestFinished,
  }) => {
    const rig = await ownRig(onTestFinished, {
      threads: 1,
      toolModules: [TIMEOUT_TOOLS],
      toolGraceMs: 500,
    });
    const log = eventLog();
    const sibling = (index: number) =>
      rig.engine.spawn({
        title: `sibling ${index}`,
        prompt: scripted([
          { calls: [{ name: 'pause', input: { ms: 300 } }] },
          { calls: [{ name: 'pause', input: { ms: 300 } }] },
          { reply: `sibling ${index} done` },
        ]),
        onEvent: log.onEvent,
      });
    const siblings = [sibling(0), sibling(1), sibling(2)];
    for (const handle of siblings) {
      await log.waitFor((event) => event.type === 'tool-call' && event.agentId === handle.id);
    }
    const blockedAt = performance.now();
    const stuck = rig.engine.spawn({
      title: 'stuck',
      prompt: scripted([{ calls: [{ name: 'spin_limited', input: {} }] }, { reply: 'never' }]),
      onEvent: log.onEvent,
    });
    const stuckResult = await stuck.result;
    expect(stuckResult).toMatchObject({ outcome: 'failed', code: 'tool_timeout' });
    expect(stuckResult.reason).toMatch(/`spin_limited` ran past its 1s time limit/);
    const results = await Promise.all(siblings.map((handle) => handle.result));
    const siblingsDone = performance.now() - blockedAt;
    results.forEach((result, index) => {
      expect(result).toMatchObject({ outcome: 'complete', text: `sibling ${index} done` });
      assertToolUsesAnswered(readTranscript(result));
    });
    // The thread was ended on purpose: the siblings resumed elsewhere, none of them blamed.
    const resumed = log.resumed();
    expect(resumed).not.toContain(stuck.id);
    for (const event of log.events) {
      if (event.type === 'agent-resume') expect(event.reason).toMatch(/stuck sibling/);
    }
    expectResultsExactlyOnce(rig.engine);
    console.info(
      `busy-looping tool (timeoutMs 1000, toolGraceMs 500): ${resumed.length} siblings resumed; all done ${Math.round(siblingsDone)} ms after the stuck agent was spawned`,
    );
  });
});

describe.concurrent('the spawn timeout', () => {
  it('cancels a child mid-request at once: the server sees the connection close', async ({
    onTestFinished,
  }) => {
    const rig = await ownRig(onTestFinished, { threads: 1 });
    const closed = new Promise<void>((resolve) => rig.model.once('client-closed', () => resolve()));
    const started = performance.now();
    const result = await rig.engine.run({
      prompt: scripted([{ delayMs: 60_000, text: 'too late' }, { reply: 'never' }]),
      timeout: 1000,
    });
    const elapsed = performance.now() - started;
    expect(result).toMatchObject({
      outcome: 'cancelled',
      cancelReason: 'timeout',
      reason: 'timeout: no result within 1s',
      text: '',
    });
    await closed;
    expect(elapsed).toBeLessThan(20_000);
    expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
  });

  it('cancels a child mid-tool at once, even a tool that ignores its signal', async ({
    onTestFinished,
  }) => {
    // A cancel grace far longer than the test: the child must end without its worker's end.
    const rig = await ownRig(onTestFinished, {
      threads: 1,
      toolModules: [TIMEOUT_TOOLS],
      cancelGraceMs: 120_000,
    });
    const result = await rig.engine.run({
      prompt: scripted([{ calls: [{ name: 'hang_untimed', input: {} }] }, { reply: 'never' }]),
      timeout: 1000,
    });
    expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'timeout' });
    expect(result.reason).toBe('timeout: no result within 1s');
    assertToolUsesAnswered(readTranscript(result));
    // Its worker made its result: no thread was terminated for it.
    expectResultsExactlyOnce(rig.engine, { allFromWorkers: true });
  });

  it('cancels its own agents with reason parent', async ({ onTestFinished }) => {
    const rig = await ownRig(onTestFinished, {
      threads: 1,
      maxDepth: 2,
      toolModules: [TIMEOUT_TOOLS],
    });
    const log = eventLog();
    const result = await rig.engine.run({
      title: 'parent',
      prompt: scripted([
        {
          calls: [
            {
              name: 'agent',
              input: {
                title: 'grandchild',
                prompt: scripted([{ calls: [{ name: 'hang_untimed', input: {} }] }]),
              },
            },
          ],
        },
      ]),
      timeout: 1500,
      onEvent: log.onEvent,
    });
    expect(result).toMatchObject({ outcome: 'cancelled', cancelReason: 'timeout' });
    const grandchild = await log.settled('grandchild');
    expect(grandchild).toMatchObject({ outcome: 'cancelled', cancelReason: 'parent' });
  });

  it('cancels a child still queued for a thread: the timeout counts from the spawn', async ({
    onTestFinished,
  }) => {
    const rig = await ownRig(onTestFinished, {
      threads: 1,
      agentsPerThread: 1,
      toolModules: [TIMEOUT_TOOLS],
    });
    const first = rig.engine.spawn({
      prompt: scripted([{ calls: [{ name: 'pause', input: { ms: 60_000 } }] }, { reply: 'x' }]),
    });
    const queued = await rig.engine.run({ prompt: scripted([{ reply: 'x' }]), timeout: 300 });
    expect(queued).toMatchObject({
      outcome: 'cancelled',
      cancelReason: 'timeout',
      reason: 'timeout: no result within 300ms',
    });
    expect(queued.usage.steps).toBe(0);
    first.cancel();
    await first.result;
  });
});

describe.concurrent('the time budget', () => {
  it('stops a hung tool when it runs out, and the agent gets its last turn', async ({
    onTestFinished,
  }) => {
    const rig = await ownRig(onTestFinished, { threads: 1, toolModules: [TIMEOUT_TOOLS] });
    const result = await rig.engine.run({
      prompt: scripted([
        { calls: [{ name: 'hang_untimed', input: {} }] },
        { reply: 'replied in its last turn' },
      ]),
      budget: { timeMs: 1000 },
    });
    expect(result).toMatchObject({
      outcome: 'complete',
      text: 'replied in its last turn',
      budgetExceeded: 'time',
    });
    expect(String(firstToolResult(readTranscript(result)).content)).toMatch(
      /`hang_untimed` was stopped: the agent's time budget ran out/,
    );
  });
});

describe.concurrent('bad time limits', () => {
  it('refuses a task line or an agent file whose timeout is out of range', async () => {
    const parsed = parseTasks(
      '{"id":"a","prompt":"p","timeout":0}\n{"id":"b","prompt":"p","timeout":"5s"}',
    );
    expect(parsed.tasks).toEqual([]);
    expect(parsed.errors.map((error) => error.message)).toEqual([
      expect.stringMatching(/`timeout` to be a whole number of milliseconds from 1 to 2147483647/),
      expect.stringMatching(/`timeout` to be a whole number of milliseconds from 1 to 2147483647/),
    ]);
    const dir = tempDir('cohort-agents-');
    writeFileSync(
      path.join(dir, 'slow.md'),
      '---\nname: slow\ndescription: x\ntimeout: 0\n---\nBe slow.\n',
    );
    await expect(Engine.start({ logDir: tempDir(), agentsDir: dir })).rejects.toThrowError(
      /slow\.md:4: Expected `timeout` to be a whole number of milliseconds from 1/,
    );
  });

  it('refuses a spawn timeout out of range or not a number, naming the option', async ({
    onTestFinished,
  }) => {
    const rig = await ownRig(onTestFinished, { threads: 1 });
    for (const timeout of [0, 2 ** 31, -5, 1.5, '5s', Number.NaN]) {
      expect(() => rig.engine.spawn({ prompt: 'hi', timeout: timeout as number })).toThrowError(
        /^Expected `timeout` to be a whole number of milliseconds from 1 to 2147483647/,
      );
    }
    expect(() => rig.engine.spawn({ prompt: 'hi', timeout: 2 ** 31 - 1 })).not.toThrow();
  });

  it('refuses toolTimeoutMs and toolGraceMs out of range before anything starts', async () => {
    const logDir = tempDir();
    await expect(Engine.start({ logDir, toolTimeoutMs: 0 })).rejects.toThrowError(
      /^Expected `toolTimeoutMs` to be a whole number of milliseconds from 1 to 2147483647/,
    );
    await expect(Engine.start({ logDir, toolTimeoutMs: 2 ** 31 })).rejects.toThrowError(
      /`toolTimeoutMs`/,
    );
    await expect(Engine.start({ logDir, toolGraceMs: -1 })).rejects.toThrowError(
      /^Expected `toolGraceMs` to be a whole number of milliseconds from 0/,
    );
  });

  it('refuses a tool whose timeoutMs no timer can hold, naming it and what arrived', async () => {
    const logDir = tempDir();
    const error = await Engine.start({ logDir, toolModules: [BAD_TOOLS] }).catch(
      (caught) => caught,
    );
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toMatch(
      /its tool #0 has a `timeoutMs` that is not a whole number of milliseconds from 1 to 2147483647 .*: got `0`/,
    );
    const host: AnyTool = {
      name: 'bad_host',
      description: 'x',
      inputSchema: { type: 'object' },
      timeoutMs: '10s' as unknown as number,
      run: () => 'x',
    };
    await expect(Engine.start({ logDir, hostTools: [host] })).rejects.toThrowError(
      /`hostTools\[0\]` to be a tool definition, but it has a `timeoutMs` .*: got `10s` \(string\)/,
    );
  });
});
