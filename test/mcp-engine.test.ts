import { getEventListeners } from 'node:events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Engine, startMcpServers } from '../src/main/engine.js';
import { McpConnection } from '../src/main/mcp/connection.js';
import { Session } from '../src/main/session.js';
import { UsageError } from '../src/shared/errors.js';
import type { AgentEvent } from '../src/shared/events.js';
import {
  assertToolUsesAnswered,
  type Rig,
  readTranscript,
  scripted,
  startRig,
  tempDir,
} from './helpers.js';
import {
  alive,
  allText,
  fixtureEntry,
  fixtureLog,
  PATIENCE,
  resultText,
  toolResults,
} from './mcp-helpers.js';

const TOKEN = 'fixture-token-4f9c2e7a1b';

/** One engine on two threads, and two fixture servers: `fx` for calls, `dies` to be killed. */
let rig: Rig;
const fx = fixtureEntry({ maxConcurrency: 64, env: { FIXTURE_TOKEN: TOKEN } });
const dies = fixtureEntry();
const timed = fixtureEntry({ toolTimeoutMs: 300 });

beforeAll(async () => {
  rig = await startRig({
    threads: 2,
    mcpServers: { fx: fx.entry, dies: dies.entry, timed: timed.entry },
  });
});

afterAll(async () => {
  await rig?.close();
});

const call = (name: string, input: Record<string, unknown> = {}) => ({ name, input });

describe('MCP tools in agents', () => {
  it('are listed as mcp__NAME__TOOL beside the other tools', () => {
    expect(rig.engine.toolNames).toEqual(
      expect.arrayContaining(['mcp__fx__echo', 'mcp__dies__die']),
    );
  });

  it('answer with text, JSON of structuredContent, image blocks, and errors the agent goes on after', async () => {
    const result = await rig.engine.run({
      prompt: scripted([
        {
          calls: [
            call('mcp__fx__echo', { text: 'hello' }),
            call('mcp__fx__add', { a: 2, b: 3 }),
            call('mcp__fx__image'),
            call('mcp__fx__fail'),
            call('mcp__fx__reject'),
            call('mcp__fx__secret'),
            call('mcp__fx__echo', { text: 7 }),
            call('mcp__fx__secret_image'),
          ],
        },
        { reply: 'done' },
      ]),
    });
    expect(result.outcome).toBe('complete');
    const transcript = readTranscript(result);
    assertToolUsesAnswered(transcript);
    const [echo, add, image, fail, reject, secret, badInput, secretImage] = toolResults(transcript);
    expect(echo).toMatchObject({ content: 'hello' });
    expect(echo?.is_error).toBeUndefined();
    expect(JSON.parse(resultText(add!))).toEqual({ sum: 5 });
    expect(image?.content).toEqual([
      { type: 'text', text: 'one pixel' },
      {
        type: 'image',
        source: { type: 'base64', media_type: 'image/png', data: expect.any(String) },
      },
    ]);
    expect(fail).toMatchObject({ is_error: true });
    expect(resultText(fail!)).toContain('the fixture failed on purpose');
    expect(reject).toMatchObject({ is_error: true });
    expect(resultText(reject!)).toMatch(
      /the call to MCP server `fx` failed: .*rejected on purpose/,
    );
    expect(resultText(secret!)).toBe('token is [redacted]');
    // Checked against the server's input schema before it is sent.
    expect(badInput).toMatchObject({ is_error: true });
    expect(resultText(badInput!)).toContain('Invalid input for `mcp__fx__echo`');
    expect(resultText(secretImage!)).toBe('token is [redacted]');
    expect(allText(rig.logDir)).not.toContain(TOKEN);
  });

  it('are the root’s too, called on main without a bridge, and a child it spawns gets them', async () => {
    const session = new Session(rig.engine);
    try {
      const turn = await session.send(
        scripted([
          {
            calls: [
              call('mcp__fx__echo', { text: 'root' }),
              call('agent', {
                title: 'child',
                tools: ['mcp__fx__*'],
                prompt: scripted([
                  { calls: [call('mcp__fx__echo', { text: 'child' })] },
                  { reply: 'child done' },
                ]),
              }),
            ],
          },
          { text: 'both done' },
        ]),
      );
      expect(turn.text).toBe('both done');
      const [root, child] = toolResults(session.transcript);
      expect(root).toMatchObject({ content: 'root' });
      expect(resultText(child!)).toContain('child done');
    } finally {
      await session.close();
    }
  });

  it('leave no listener on the caller’s signal, however many calls it made', async () => {
    const echo = rig.engine.hostTools.find((tool) => tool.name === 'mcp__fx__echo')!;
    const signal = new AbortController().signal;
    for (let index = 0; index < 12; index++) {
      expect(await echo.run({ text: `${index}` }, { signal, agentId: 'test', depth: 0 })).toBe(
        `${index}`,
      );
    }
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('multiplex many agents on two threads over one connection, all in flight at once', async () => {
    const agents = 40;
    const results = await Promise.all(
      Array.from({ length: agents }, (_, index) =>
        rig.engine.run({
          title: `barrier ${index}`,
          prompt: scripted([
            { calls: [call('mcp__fx__barrier', { n: agents })] },
            { calls: [call('mcp__fx__pid')] },
            { reply: 'through' },
          ]),
        }),
      ),
    );
    expect(results.map((result) => result.outcome)).toEqual(Array(agents).fill('complete'));
    const answers = results.map((result) => toolResults(readTranscript(result)).map(resultText));
    // The barrier opens only when all forty calls wait in the one server at the same time.
    expect(new Set(answers.map(([barrier]) => barrier))).toEqual(new Set([String(agents)]));
    expect(new Set(answers.map(([, pid]) => pid)).size).toBe(1);
    expect(fixtureLog(fx.log).filter((record) => record.event === 'start')).toHaveLength(1);
  });

  it('are chosen like other tools, one by name or all of a server by mcp__NAME__*', async () => {
    const one = await rig.engine.run({
      tools: ['mcp__fx__echo'],
      prompt: scripted([{ calls: [call('mcp__fx__pid')] }, { reply: 'x' }]),
    });
    expect(resultText(toolResults(readTranscript(one))[0]!)).toMatch(
      /^Unknown tool `mcp__fx__pid`. Expected one of: `mcp__fx__echo`, `reply`$/,
    );
    const all = await rig.engine.run({
      tools: ['mcp__fx__*'],
      prompt: scripted([
        { calls: [call('mcp__fx__echo', { text: 'in' }), call('mcp__dies__pid')] },
        { reply: 'x' },
      ]),
    });
    const [echo, other] = toolResults(readTranscript(all));
    expect(echo).toMatchObject({ content: 'in' });
    expect(resultText(other!)).toMatch(/^Unknown tool `mcp__dies__pid`/);
    expect(() => rig.engine.spawn({ tools: ['mcp__nope__*'], prompt: 'x' })).toThrow(
      /Expected `tools` to name known tools \(.*\), got `mcp__nope__\*`/,
    );
  });

  it('send notifications/cancelled for a call whose agent is cancelled', async () => {
    const events: AgentEvent[] = [];
    const handle = rig.engine.spawn({
      prompt: scripted([{ calls: [call('mcp__fx__hold')] }, { reply: 'never' }]),
      onEvent: (event) => events.push(event),
    });
    // The call is in the server before it is cancelled.
    await vi.waitFor(
      () =>
        expect(fixtureLog(fx.log).filter((record) => record.event === 'holding')).toHaveLength(1),
      PATIENCE,
    );
    expect(events.some((event) => event.type === 'tool-call')).toBe(true);
    handle.cancel();
    expect((await handle.result).outcome).toBe('cancelled');
    await vi.waitFor(
      () =>
        expect(fixtureLog(fx.log).filter((record) => record.event === 'cancelled')).toHaveLength(1),
      PATIENCE,
    );
  });

  it('answer a call past its entry’s toolTimeoutMs with an error, and cancel it on the server', async () => {
    const result = await rig.engine.run({
      prompt: scripted([{ calls: [call('mcp__timed__hold')] }, { reply: 'went on' }]),
    });
    expect(result.outcome).toBe('complete');
    const [late] = toolResults(readTranscript(result));
    expect(late).toMatchObject({ is_error: true });
    expect(resultText(late!)).toMatch(/`mcp__timed__hold` timed out after/);
    await vi.waitFor(
      () =>
        expect(fixtureLog(timed.log).filter((record) => record.event === 'cancelled')).toHaveLength(
          1,
        ),
      PATIENCE,
    );
  });

  it('fail as tool errors while a killed server is down, and work again once it is restarted', async () => {
    const killed = await rig.engine.run({
      prompt: scripted([{ calls: [call('mcp__dies__die')] }, { reply: 'went on' }]),
    });
    expect(killed.outcome).toBe('complete');
    const [died] = toolResults(readTranscript(killed));
    expect(died).toMatchObject({ is_error: true });
    expect(resultText(died!)).toMatch(/MCP server `dies`/);
    await vi.waitFor(
      () =>
        expect(fixtureLog(dies.log).filter((record) => record.event === 'start')).toHaveLength(2),
      PATIENCE,
    );
    const starts = fixtureLog(dies.log).filter((record) => record.event === 'start');
    await vi.waitFor(async () => {
      const again = await rig.engine.run({
        prompt: scripted([{ calls: [call('mcp__dies__pid')] }, { reply: 'x' }]),
      });
      expect(resultText(toolResults(readTranscript(again))[0]!)).toBe(String(starts[1]?.pid));
    }, PATIENCE);
  });
});

describe('MCP servers at start and close', () => {
  const engineOptions = () => ({ threads: 1, logDir: tempDir('cohort-logs-') });

  it('stop the start when one cannot start, never answers, or answers with what is not JSON-RPC', async () => {
    const never = {
      command: process.execPath,
      args: ['-e', 'setInterval(() => {}, 1e9)'],
      startTimeoutMs: 300,
    };
    const garbage = {
      command: process.execPath,
      args: ['-e', "process.stdout.write('not json\\n'); setInterval(() => {}, 1e9)"],
    };
    const missing = { command: 'cohort-no-such-server' };
    const leaky = {
      command: process.execPath,
      args: ['-e', "console.error('my token is ' + process.env.LEAK); process.exit(1)"],
      env: { LEAK: 'leaky-secret-7c1f0a93' },
    };
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { never },
        /Expected MCP server `never` \(in `mcpServers`\) to start and list its tools, but it did not answer `initialize` and `tools\/list` within 300 ms/,
      ],
      [{ garbage }, /MCP server `garbage` .* but it sent what is not a JSON-RPC message/],
      [{ missing }, /MCP server `missing` .* but .*ENOENT/],
      [{ leaky }, /MCP server `leaky` .* its stderr ended: my token is \[redacted\]$/],
    ];
    for (const [mcpServers, message] of cases) {
      const start = Engine.start({ ...engineOptions(), mcpServers: mcpServers as never });
      await expect(start).rejects.toThrow(UsageError);
      await expect(start).rejects.toThrow(message);
    }
  });

  it('are closed when the start fails after they are up, theirs or handed in', async () => {
    // Refused after the servers started and the check passed: a queue's lane must be realtime.
    const { entry, log } = fixtureEntry();
    const refused = Engine.start({
      ...engineOptions(),
      queue: { url: 'redis://127.0.0.1:1' },
      lane: 'batches',
      mcpServers: { fx: entry },
    });
    await expect(refused).rejects.toThrow(/Expected `lane` to be `realtime` with `queue`/);
    const [own] = fixtureLog(log).map((record) => record.pid);
    expect(own).toBeDefined();
    await vi.waitFor(() => expect(alive(own!)).toBe(false), PATIENCE);
    // Started by the caller and handed in: a bad option still closes them.
    const handed = fixtureEntry();
    const options = { ...engineOptions(), mcpServers: { fx: handed.entry } };
    const mcp = await startMcpServers(options);
    await expect(Engine.start({ ...options, threads: 0 }, { mcp })).rejects.toThrow(UsageError);
    expect(mcp?.connection('fx')?.state).toBe('closed');
    const [theirs] = fixtureLog(handed.log).map((record) => record.pid);
    await vi.waitFor(() => expect(alive(theirs!)).toBe(false), PATIENCE);
  });

  it('show no piece of a secret that the end of a failed server’s stderr would cut in two', async () => {
    const secret = 'cut-secret-5be01d77c2';
    // The secret's line, then enough that the last 2,000 characters start inside it.
    const script = `console.error('token ' + process.env.LEAK + '\\n' + 'y'.repeat(1990)); process.exit(1)`;
    const start = Engine.start({
      ...engineOptions(),
      mcpServers: {
        cut: { command: process.execPath, args: ['-e', script], env: { LEAK: secret } },
      },
    });
    await expect(start).rejects.toThrow(/its stderr ended: y+$/);
    await start.catch((error: Error) => expect(error.message).not.toMatch(/77c2|\[redacted\]/));
  });

  it('refuse a tool name that clashes with another tool, naming both places', async () => {
    const { entry } = fixtureEntry();
    const start = Engine.start({
      ...engineOptions(),
      hostTools: [
        {
          name: 'mcp__fx__echo',
          description: 'x',
          inputSchema: { type: 'object' },
          run: () => 'x',
        },
      ],
      mcpServers: { fx: entry },
    });
    await expect(start).rejects.toThrow(
      'Expected every tool to have its own name, got `mcp__fx__echo` from `hostTools[0]` and from MCP server `fx` (in `mcpServers`)',
    );
  });

  it('hold a server to its maxConcurrency, and leave no server process after close', async () => {
    const { entry } = fixtureEntry({ maxConcurrency: 2 });
    const capped = await startRig({ threads: 1, mcpServers: { capped: entry } });
    const engine = capped.engine;
    const prompt = scripted([
      {
        calls: [
          call('mcp__capped__echo', { text: 'a' }),
          call('mcp__capped__echo', { text: 'b' }),
          call('mcp__capped__echo', { text: 'c' }),
        ],
      },
      { reply: 'x' },
    ]);
    await Promise.all(Array.from({ length: 4 }, () => engine.run({ prompt })));
    const [peak, pid] = await Promise.all(
      ['peak', 'pid'].map(async (tool) => {
        const result = await engine.run({
          prompt: scripted([{ calls: [call(`mcp__capped__${tool}`)] }, { reply: 'x' }]),
        });
        return Number(resultText(toolResults(readTranscript(result))[0]!));
      }),
    );
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(2);
    expect(alive(pid!)).toBe(true);
    await capped.close();
    expect(alive(pid!)).toBe(false);
  });
});

describe('an MCP connection', () => {
  it('waits longer between starts of a server that dies each time just after it started', async () => {
    const { entry, log } = fixtureEntry({ env: { MCP_FIXTURE_MODE: 'crash-after-list' } });
    const connection = new McpConnection('crashy', entry);
    try {
      await connection.start();
      await vi.waitFor(() => expect(connection.restarts).toBeGreaterThanOrEqual(3), PATIENCE);
      // Three starts that each died at once: 0.1 s, 0.2 s, 0.4 s, and now at least 0.8 s.
      expect(connection.restartWaitMs).toBeGreaterThanOrEqual(800);
    } finally {
      await connection.close();
    }
    expect(fixtureLog(log).filter((record) => record.event === 'start').length).toBeGreaterThan(3);
  });
});

describe('an MCP connection closed while it restarts a server', () => {
  it('aborts the start and ends the process it spawned before close resolves', async () => {
    const { entry, log } = fixtureEntry({ env: { MCP_FIXTURE_MODE: 'hang-on-restart' } });
    const connection = new McpConnection('slow', entry);
    await connection.start();
    await expect(connection.call('die', {}, new AbortController().signal)).rejects.toThrow();
    // Started again, and it never answers `initialize`: the restart is under way.
    await vi.waitFor(() => expect(fixtureLog(log)).toHaveLength(2), PATIENCE);
    const restarted = fixtureLog(log)[1]!.pid;
    await connection.close();
    expect(alive(restarted)).toBe(false);
    expect(connection.state).toBe('closed');
  });
});
